#!/bin/sh
# The shared library exports only the public rj_ symbols declared in ragjit.h, and all of them.
set -eu
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
bad=$(printf '%s\n' "$exported" | grep -v '^rj_' || true)
if [ -n "$bad" ]; then
  echo "non-rj_ symbols exported from $lib:"; echo "$bad"; exit 1
fi
declared=$(grep -o '^RJ_API [^(]*(' "$header" | sed 's/($//; s/.*[ *]//' | sort)
missing=$(printf "%s\n" "$declared" | while read -r s; do printf "%s\n" "$exported" | grep -qx "$s" || echo "$s"; done)
if [ -n "$missing" ]; then
  echo "declared in ragjit.h but not exported:"; echo "$missing"; exit 1
fi
echo "$(printf '%s\n' "$exported" | wc -l) symbols exported, all rj_ and all declared"
