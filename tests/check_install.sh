#!/bin/sh
# The install as a user meets it: `meson install` into a fresh, empty root (--destdir; the
# build's own prefix under it, /usr/local by default), then examples/builder.c compiled, linked
# and run with nothing but what pkg-config says and what the dynamic loader finds, each through
# its own default search path for that prefix (moved under the root), never through where the
# files happened to land. A library installed where neither looks (as /usr/local/lib64 on
# Debian, where meson 1.0 falls back to lib64 without dpkg-architecture) fails here.
#
# The search paths: pkg-config's built-in one (pkg-config --variable pc_path pkg-config) and the
# loader's (/etc/ld.so.conf and its includes, then ld.so's trusted directories); the entries
# under /usr/local (under /usr where none are) are taken for the prefix, as Debian's search
# /usr/local/lib/<multiarch> and /usr/local/lib for /usr/local. On Debian the library must
# moreover be in <prefix>/lib/<multiarch>, meson's libdir there.
set -eu
builddir=$1 srcdir=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

meson install -C "$builddir" --destdir "$root" --no-rebuild --quiet >/dev/null
lib=$(cd "$root" && find . -name 'libragjit.so.0' | sed 's|^\.||' | head -n 1)
pc=$(cd "$root" && find . -name ragjit.pc | sed 's|^\.||' | head -n 1)
[ -n "$lib" ] || fail "libragjit.so.0 was not installed"
[ -n "$pc" ] || fail "ragjit.pc was not installed"
prefix=$(sed -n 's/^prefix=//p' "$root$pc")
echo "installed: $lib, $pc (prefix $prefix)"

# for_prefix: the lines of stdin under /usr/local (else under /usr) with that part replaced by
# the prefix, one a line
for_prefix() {
  awk -v p="$prefix" '
    { sub(/\/+$/, ""); all[n++] = $0; if (index($0, "/usr/local/") == 1 || $0 == "/usr/local") loc = 1 }
    END {
      base = loc ? "/usr/local" : "/usr"
      for (i = 0; i < n; i++)
        if (all[i] == base || index(all[i], base "/") == 1) {
          if (loc || index(all[i], "/usr/local") != 1) print p substr(all[i], length(base) + 1)
        }
    }'
}

# ld_conf FILE: the directories a ld.so.conf names, includes followed
ld_conf() {
  [ -r "$1" ] || return 0
  sed 's/#.*//' "$1" | while read -r word rest; do
    case $word in
      '') ;;
      include) for f in $rest; do for g in $f; do ld_conf "$g"; done; done ;;
      *) echo "$word" ;;
    esac
  done
}
ld_trusted() {
  for ldso in /lib64/ld-linux*.so.* /lib/ld-linux*.so.* /lib/ld-musl*.so.*; do
    if [ -x "$ldso" ] && "$ldso" --help >/dev/null 2>&1; then
      "$ldso" --help | sed -n 's/^ *\(\/[^ ]*\) (system search path)$/\1/p'
      return 0
    fi
  done
  printf '/lib\n/usr/lib\n'
}

pc_dirs=$(pkg-config --variable pc_path pkg-config | tr ':' '\n' | for_prefix)
ld_dirs=$( (ld_conf /etc/ld.so.conf; ld_trusted) | for_prefix)
[ -n "$pc_dirs" ] || fail "pkg-config's search path names nothing for the prefix $prefix"
echo "pkg-config searches for $prefix:" $pc_dirs
echo "the loader searches for $prefix:" $ld_dirs

# Debian: meson's libdir is lib/<multiarch> (what it asks dpkg-architecture for)
multiarch=$(${CC:-cc} -print-multiarch 2>/dev/null || true)
if [ -f /etc/debian_version ] && [ -n "$multiarch" ] && [ "${lib%/*}" != "$prefix/lib/$multiarch" ]; then
  fail "the library went to ${lib%/*}, not to $prefix/lib/$multiarch, where Debian's loader and" \
       "pkg-config look (meson 1.0 picks lib/$multiarch only by asking dpkg-architecture, of package" \
       "dpkg-dev, and lib64 without it: install dpkg-dev and set the build up again, or pass" \
       "-Dlibdir=lib/$multiarch)"
fi
echo "$ld_dirs" | grep -qxF "${lib%/*}" ||
  fail "the loader does not look in ${lib%/*}, where the library was installed"
echo "$pc_dirs" | grep -qxF "${pc%/*}" ||
  fail "pkg-config does not look in ${pc%/*}, where ragjit.pc was installed"

# pkg-config with its own search path (moved under the root) and nothing else
PKG_CONFIG_LIBDIR=$(echo "$pc_dirs" | sed "s|^|$root|" | paste -sd: -)
PKG_CONFIG_SYSROOT_DIR=$root
export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
unset PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs ragjit) || fail "pkg-config does not find ragjit"
${CC:-cc} -std=c11 -Wall -Werror "$srcdir/examples/builder.c" -o "$root/builder" $flags
# the loader with its own search path (moved under the root) and nothing else
out=$(LD_LIBRARY_PATH=$(echo "$ld_dirs" | sed "s|^|$root|" | paste -sd: -) "$root/builder") ||
  fail "examples/builder.c, built against the install, failed: $out"
echo "$out" | sed 's/^/  /'
echo "installed library found by pkg-config and the loader; builder.c built with: $flags"
