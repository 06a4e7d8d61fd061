#!/usr/bin/env bash
# build.sh — the project's two commands (see README.md):
#   ./build.sh demo   install what is missing, build, run the demo
#   ./build.sh test   install what is missing, build, run the whole test suite: the normal
#                     build (warnings as errors), an AddressSanitizer + UBSan build, and the
#                     concurrency test under ThreadSanitizer
# Both are idempotent: packages already present are not reinstalled and configured build
# directories are reused.
set -euo pipefail
cd "$(dirname "$0")"

# pocl-opencl-icd and the ICD loader: an OpenCL device on the CPU, so the tests run the GPU
# kernels (the OpenCL target) on machines without a GPU; ragjit itself builds without them
PACKAGES=(gcc pkg-config meson ninja-build llvm-16-dev libffi-dev libcmocka-dev python3 python3-numpy
          ocl-icd-libopencl1 pocl-opencl-icd)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "build.sh: installing ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# configure DIR [meson options...]: set up DIR once, reconfigure if options changed
configure() {
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
}

cmd=${1:-}
case "$cmd" in
  demo)
    install_missing
    configure build --buildtype=debugoptimized
    ninja -C build
    demo=examples/masked_softmax.rj
    echo "== the program ($demo)"
    grep -v '^#' "$demo"
    echo
    echo "== what fusion made of it: ./build/tools/ragjit emit $demo --stage fused"
    ./build/tools/ragjit emit "$demo" --stage fused
    echo
    echo "== JIT-compiled and run on random jagged data"
    ./build/tools/ragjit run "$demo" --random B=3,maxlen=4,seed=1 --out /tmp/ragjit-demo --print --time
    echo
    echo "== checked against the reference interpreter (larger batch)"
    ./build/tools/ragjit check "$demo" --random B=64,maxlen=128,seed=2
    ;;
  test)
    install_missing
    configure build --buildtype=debugoptimized -Dwerror=true -Ddebug_verify=true
    ninja -C build
    meson test -C build --print-errorlogs --num-processes 2
    configure build-san --buildtype=debug -Dwerror=true -Ddebug_verify=true \
      -Db_sanitize=address,undefined -Db_lundef=false \
      -Dc_args=-fno-sanitize-recover=all
    ninja -C build-san
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
      meson test -C build-san --print-errorlogs --num-processes 2 --no-suite install
    # ThreadSanitizer: the concurrency test alone (OpenMP's runtime and LLVM are not
    # instrumented, so the tests that use them would only report noise)
    configure build-tsan --buildtype=debug -Dwerror=true -Db_sanitize=thread -Db_lundef=false
    ninja -C build-tsan tests/test_threads
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      meson test -C build-tsan --no-rebuild --print-errorlogs threads
    ;;
  *)
    echo "usage: ./build.sh demo | test" >&2
    exit 2
    ;;
esac
