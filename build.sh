#!/usr/bin/env bash
# build.sh — the project's commands (see README.md):
#   ./build.sh demo   install what is missing, build, run the demo
#   ./build.sh test   install what is missing, build, run the whole test suite in five stages:
#                     the normal build (warnings as errors), an AddressSanitizer + UBSan build,
#                     the concurrency test under ThreadSanitizer, each libFuzzer harness for
#                     a short smoke run, and the Python package (pip install . in a venv, pytest). Every stage runs even when an earlier one failed; a
#                     summary of the stages (pass/fail, time) ends the output, its last line
#                     "stages: N passed, N failed"; the exit status is non-zero if any failed.
#   ./build.sh fuzz [SECONDS] [parse|npy|api|elf ...]
#                     run the fuzzers for long: SECONDS each (default 600), one at a time, on a
#                     corpus kept in build-fuzz/corpus/ (docs/guide.md, "Fuzzing")
# All are idempotent: packages already present are not reinstalled and configured build
# directories are reused.
set -euo pipefail
cd "$(dirname "$0")"

# pocl-opencl-icd and the ICD loader: an OpenCL device on the CPU, so the tests run the GPU
# kernels (the OpenCL target) on machines without a GPU; ragjit itself builds without them.
# clang, its runtime (libFuzzer, sanitizers) and OpenMP: the fuzz build (it configures bench/,
# whose C baselines use OpenMP, and clang's -fopenmp needs libomp's headers; apt installs
# without recommends, so the runtime is named too). The library itself has no OpenMP.
# libopenblas0-pthread: the GEMM core of matrix products on the CPU (loaded at run time; without
# it ragjit multiplies with its own, slower kernel)
# dpkg-dev: its dpkg-architecture is how meson learns Debian's libdir, lib/x86_64-linux-gnu;
# without it meson 1.0 falls back to lib64, and `meson install` puts the library in
# /usr/local/lib64, where neither the loader nor pkg-config look (meson issue 7270)
# python3-venv: the Python package's stage makes a venv, where pip brings meson-python, meson,
# NumPy and pytest from PyPI; python3-dev: Python's headers, for the package's C helper of
# planned calls (python/ragjit/_fastcall.c; without them the package calls through ctypes)
PACKAGES=(gcc pkg-config meson ninja-build llvm-16-dev libffi-dev libcmocka-dev libdlpack-dev python3 python3-numpy
          python3-venv python3-dev ocl-icd-libopencl1 pocl-opencl-icd clang libclang-rt-14-dev libomp-dev libopenblas0-pthread dpkg-dev)
FUZZERS=(parse npy api elf)

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

# configure DIR [meson options...]: set up DIR once, reconfigure if options changed. A directory
# set up while dpkg-architecture was missing has meson's fallback libdir, lib64: it gets
# Debian's (see dpkg-dev above).
configure() {
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    if command -v dpkg-architecture >/dev/null &&
       meson introspect --buildoptions "$dir" | grep -qF '"name": "libdir", "value": "lib64"'; then
      set -- "$@" "-Dlibdir=lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
    fi
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
}

# The libFuzzer harnesses: a clang build with coverage instrumentation, ASan and UBSan.
build_fuzzers() {
  CC=clang configure build-fuzz --buildtype=debugoptimized -Dfuzz=true -Dtests=false \
    -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
  ninja -C build-fuzz "${FUZZERS[@]/#/fuzz/fuzz_}"
}

# run_fuzzer NAME SECONDS CORPUS [libFuzzer flags...]: fuzzes for SECONDS, growing CORPUS (the
# repository's seeds are read, never written); findings land in build-fuzz/findings/NAME/.
# Prints the run's closing numbers; fails if the fuzzer found something.
run_fuzzer() {
  local name=$1 secs=$2 corpus=$3; shift 3
  local found=build-fuzz/findings/$name log=build-fuzz/findings/$name.log
  mkdir -p "$found" "$corpus"
  local rc=0 dict=()
  [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
  # RAGJIT_CACHE_DIR=off: every program a fuzzer compiles would otherwise land in ~/.cache
  RAGJIT_CACHE_DIR=off UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions="$PWD/fuzz/ubsan.supp" \
    "./build-fuzz/fuzz/fuzz_$name" "$corpus" "fuzz/corpus/$name" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$found/" "${dict[@]}" "$@" >"$log" 2>&1 || rc=$?
  local runs last
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [^ ]+' || true)
  echo "fuzz_$name: ${runs:-?} executions in ${secs}s, ${last:-no coverage line}, exit $rc"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|FUZZ FINDING|runtime error|SUMMARY|Test unit written' "$log" >&2 || true
    echo "fuzz_$name: FAILED; the log is $log, to reproduce: ./build-fuzz/fuzz/fuzz_$name FILE" >&2
  fi
  return "$rc"
}

# The stages of `test`. Each runs under set -e of its own (stage): its first failing command
# fails it, and the next stage runs all the same.
test_normal() {
  configure build --buildtype=debugoptimized -Dwerror=true -Ddebug_verify=true
  ninja -C build
  meson test -C build --print-errorlogs --num-processes 2
}

# -O1 (debug info kept), as AddressSanitizer's documentation advises: at -O0 the reference
# interpreter, the oracle of most tests, ran 2.2 times as long, and test_jit went past its 300 s
test_asan() {
  configure build-san -Ddebug=true -Doptimization=1 -Dwerror=true -Ddebug_verify=true \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dc_args=-fno-sanitize-recover=all -fno-omit-frame-pointer"
  ninja -C build-san
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
    meson test -C build-san --print-errorlogs --num-processes 2 --no-suite install
}

# ThreadSanitizer: the concurrency tests alone, a context shared by threads and the CPU worker
# pool (LLVM is not instrumented: the tests that compile on several threads would only report
# noise)
test_tsan() {
  configure build-tsan --buildtype=debug -Dwerror=true -Db_sanitize=thread -Db_lundef=false
  ninja -C build-tsan tests/test_threads tests/test_pool
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    meson test -C build-tsan --no-rebuild --print-errorlogs threads pool
}

# libFuzzer smoke runs, 20 s each, on a throwaway copy of the seed corpora; a finding fails the
# stage (the input is left in build-fuzz/findings/)
test_fuzz_smoke() {
  build_fuzzers
  local failed=0 f
  for f in "${FUZZERS[@]}"; do
    rm -rf "build-fuzz/smoke/$f"
    run_fuzzer "$f" 20 "build-fuzz/smoke/$f" || failed=$((failed + 1))
  done
  rm -rf build-fuzz/smoke
  echo "fuzz: $(( ${#FUZZERS[@]} - failed )) passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# The Python package (python/, pyproject.toml), as a user installs it: a fresh venv of Debian's
# python3 in build-venv/, `pip install .` of the checkout (meson-python and meson come from PyPI
# through pip's build isolation, NumPy and scipy-openblas32 as the package's dependencies;
# libragjit is built again, release, into the package), PyTorch from PyPI for the tests of the
# PyTorch integration (its Linux wheel with the CUDA libraries it depends on: about 2 minutes
# and 5 GB; the tests of it are skipped, saying so, only where it cannot be installed), then
# pytest (from PyPI) on python/tests/ against what was installed, run from outside the
# checkout, and the examples of examples/python/. pytest's exit 5 (no test ran) fails the stage.
test_python() {
  local py=/usr/bin/python3 venv=build-venv rc=0
  [ -x "$py" ] || py=python3
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check pytest
  "$venv/bin/pip" install -q --disable-pip-version-check .
  local t0=$SECONDS torch=1
  if ! timeout 1200 "$venv/bin/pip" install -q --disable-pip-version-check torch; then
    torch=0
    echo "python: PyTorch could not be installed from PyPI: its tests and the examples are skipped" >&2
  fi
  echo "python: PyTorch installed in $((SECONDS - t0)) s ($(du -sh "$venv" | cut -f1) in the venv)"
  local tests=$PWD/python/tests examples=$PWD/examples/python
  (cd "$venv" && RAGJIT_CACHE_DIR=off bin/python -m pytest -p no:cacheprovider -rs "$tests") || rc=$?
  if [ "$rc" -eq 5 ]; then echo "python: pytest ran no test" >&2; return 1; fi
  if [ "$torch" -eq 1 ]; then
    for ex in "$examples"/*.py; do
      echo "== python $ex"
      (cd "$venv" && RAGJIT_CACHE_DIR=off bin/python "$ex") || rc=1
    done
  fi
  return "$rc"
}

# stage NAME FUNCTION: runs one stage whatever became of the earlier ones, and records whether
# it passed and how long it took (summary prints them). The function runs in a subshell with
# set -e: outside any `||`, where bash would ignore set -e in it.
STAGE_LINES=()
STAGES_FAILED=0
stage() {
  local name=$1 fn=$2 t0=$SECONDS rc=0
  echo
  echo "==== stage: $name"
  set +e
  ( set -e; "$fn" )
  rc=$?
  set -e
  local secs=$((SECONDS - t0)) verdict=passed
  if [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; STAGES_FAILED=$((STAGES_FAILED + 1)); fi
  echo "==== stage: $name: $verdict in $((secs / 60))m$(printf %02d $((secs % 60)))s"
  STAGE_LINES+=("$(printf '  %-28s %-16s %dm%02ds' "$name" "$verdict" $((secs / 60)) $((secs % 60)))")
}

# The table of stages, then a last line that CI reads: "stages: N passed, N failed". Exits
# non-zero if any stage failed.
summary() {
  echo
  echo "==== summary (${SECONDS}s in all)"
  printf '%s\n' "${STAGE_LINES[@]}"
  echo "stages: $(( ${#STAGE_LINES[@]} - STAGES_FAILED )) passed, $STAGES_FAILED failed"
  [ "$STAGES_FAILED" -eq 0 ]
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
    stage "normal build + tests" test_normal
    stage "ASan+UBSan build + tests" test_asan
    stage "TSan concurrency test" test_tsan
    stage "fuzz smoke (20 s each)" test_fuzz_smoke
    stage "Python package + pytest" test_python
    summary
    ;;
  fuzz)
    install_missing
    secs=${2:-600}
    shift $(( $# > 1 ? 2 : 1 ))
    [ $# -gt 0 ] && FUZZERS=("$@")
    build_fuzzers
    failed=0
    # FUZZ_FLAGS adds libFuzzer flags, e.g. "-fork=1 -ignore_crashes=1" to keep going past
    # findings (never in CI)
    for f in "${FUZZERS[@]}"; do
      # shellcheck disable=SC2086
      run_fuzzer "$f" "$secs" "build-fuzz/corpus/$f" ${FUZZ_FLAGS:-} || failed=1
    done
    exit "$failed"
    ;;
  *)
    echo "usage: ./build.sh demo | test | fuzz [SECONDS] [parse|npy|api|elf ...]" >&2
    exit 2
    ;;
esac
