#!/usr/bin/env bash
# device_session.sh — a GPU session's work, in two halves, so that the GPU machine's minutes go
# to measuring, not to building: that machine has the CUDA driver, nvcc, Nsight Compute and
# PyTorch, but neither LLVM nor ragjit's other build dependencies.
#
#   bench/device_session.sh pack
#       On the Debian build machine, from anywhere in the checkout: builds build-static (release,
#       LLVM linked into libragjit: meson's -Dllvm_static=true) and packs ragjit, libragjit,
#       bench, test_cuda, test_elfload, the device example and the shared libraries they need
#       beyond libc, libm and libstdc++ (libffi, libgomp, libcmocka, libz, libzstd, libtinfo),
#       stripped, into .device/ragjit.tar.xz (about 13 MB, 1-4 minutes; .device/ is ignored by
#       git).
#
#   bench/device_session.sh run [tests] [bench] [peer] [peer-cpu] [ncu] [knobs]
#       On the GPU machine, from the repository root, with .device carried there (the device
#       tool: command "bash bench/device_session.sh run tests bench", carry [".device"]):
#       unpacks into /tmp/ragjit-device and runs the parts named (tests and bench without any),
#       each to its end even when one fails, printing and appending everything to
#       $OUT/device.log (./device-out/device.log without $OUT):
#         tests     nvidia-smi, then side by side, each under a time limit (TEST_LIMIT, 200 s):
#                   test_cuda's device tests (the corpus packed, with holes and in f16/bf16,
#                   random chains, device memory, CUDA graphs, allocation failures), the
#                   device example, `ragjit check --target cuda` of every example program,
#                   tests/half_numpy.py (16-bit against NumPy, the cuda target included), a
#                   tests/difftest.py campaign on cuda (DIFFTEST_N programs from DIFFTEST_SEED),
#                   and on that machine's CPU (another x86-64 than the build machine's)
#                   ragjit's own linker: test_elfload and `ragjit check --target cpu` of every
#                   example with RAGJIT_LLVM_LINKER=own
#         bench     bench --target cuda --dtype bf16 (W1..W9 by the device's timers against a
#                   device copy, device-resident runs, W1..W6 in bf16 against f32, the
#                   persistent cache across new processes), under BENCH_LIMIT (200 s)
#         peer      bench/torch_peer.py --device cuda: PyTorch's nested jagged tensors on the
#                   same data (B = 2048, lengths 1..1024, D = 256)
#         peer-cpu  bench/torch_peer.py on the machine's CPU, all its cores
#         ncu       Nsight Compute's time and DRAM bytes of each kernel of W1..W6
#         knobs     W1, W2, W4, W5 in f32 and bf16 under the RAGJIT_SIMT_* settings (unroll
#                   hints, threads an SM: src/codegen/simt/emit.c), about 2.5 minutes
#       On an H200 (2026-11-29): tests 110 s (side by side; test_device_half the longest), bench
#       85 s, peer 87 s, knobs 150 s, and about 30 s to start a machine: "tests bench" is one
#       call of the device tool of about 4 minutes.
# Exit status: 0 when every part ran and passed, else 1 (the log says which failed).
set -uo pipefail
cd "$(dirname "$0")/.."

PACK=.device/ragjit.tar.xz

pack() {
  set -e
  # LLVM's static libraries link against libzstd (the shared build does not need its -dev)
  if ! dpkg-query -W -f='${Status}' libzstd-dev 2>/dev/null | grep -q "ok installed"; then
    local sudo=()
    [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libzstd-dev
  fi
  if [ -f build-static/build.ninja ]; then
    meson configure build-static -Dbuildtype=release -Dllvm_static=true >/dev/null
  else
    meson setup build-static --buildtype=release -Dllvm_static=true
  fi
  ninja -C build-static
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib"
  cp build-static/tools/ragjit build-static/bench/bench build-static/examples/example-device "$stage/bin/"
  cp build-static/tests/test_cuda build-static/tests/test_elfload "$stage/bin/"
  cp -L build-static/libragjit.so.0 "$stage/lib/"
  # the shared libraries beyond the C and C++ runtimes, as this machine resolves them
  ldd "$stage"/bin/* "$stage/lib/libragjit.so.0" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      case "$name" in
        libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libdl.so*|libpthread.so*|librt.so*|libragjit.so*) ;;
        *) cp -L "$path" "$stage/lib/$name" ;;
      esac
    done
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*
  mkdir -p .device
  # test_cuda links LLVM as libragjit does: xz -9's 64 MiB window stores it about once
  tar -cf - -C "$stage" bin lib | xz -9 >"$PACK"
  rm -rf "$stage"
  echo "device_session: packed $(du -h "$PACK" | cut -f1) into $PACK: $(ls "$(dirname "$PACK")")"
  echo "device_session: on the GPU machine: bash bench/device_session.sh run tests bench (carry .device)"
}

FAILED=()
# step NAME COMMAND...: runs it, prints its exit status and seconds; a failure is recorded
step() {
  local name=$1; shift
  echo "=== $name: $*"
  local t0 rc
  t0=$(date +%s%N)
  "$@"
  rc=$?
  echo "=== $name: exit $rc after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  [ "$rc" -eq 0 ] || FAILED+=("$name")
}

# The bench workloads as programs (bench/pipeline_check.py's), for ncu.
workloads() {
  mkdir -p "$1"
  python3 -c 'import sys; sys.path.insert(0, "bench"); from pipeline_check import workload_files; workload_files(sys.argv[1])' "$1"
}

# The --random sizes of an example's check: the interpreter, its oracle, takes minutes on the
# whole encoder at B = 64, maxlen = 300
check_size() {
  case "$(basename "$1")" in
    encoder.rj) echo B=8,maxlen=48,seed=3,V=1000 ;;
    encoder_layer.rj) echo B=16,maxlen=64,seed=3,V=1000 ;;
    *) echo B=64,maxlen=300,seed=3,V=1000 ;;
  esac
}

# bg NAME LIMIT COMMAND...: a step in the background under `timeout LIMIT` (seconds), its output
# kept apart and printed whole by bg_wait, so that parallel steps do not interleave
BG_PIDS=()
bg() {
  local name=$1 limit=$2; shift 2
  (
    t0=$(date +%s%N)
    timeout -k 5 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    echo "=== $name: exit $rc after $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$LOGS/$name.log"
    echo "$rc" >"$LOGS/$name.rc"
  ) &
  BG_PIDS+=($!)
}

bg_wait() {
  local pid f n rc
  for pid in "${BG_PIDS[@]}"; do wait "$pid"; done
  BG_PIDS=()
  for f in "$LOGS"/*.log; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .log)
    echo "=== $n"
    cat "$f"
    rc=$(cat "$LOGS/$n.rc" 2>/dev/null || echo 99)
    [ "$rc" -eq 0 ] || FAILED+=("$n")
  done
  rm -f "$LOGS"/*
}

# The tests run side by side (the machine has 16 cores and the GPU takes several processes):
# test_cuda's device tests apart, every example checked on the GPU, the 16-bit formats and a
# difftest campaign against NumPy references, and ragjit's own linker on this other x86-64.
part_tests() {
  step nvidia-smi nvidia-smi
  local tc="$R/bin/test_cuda" lim=${TEST_LIMIT:-200}
  bg tc-runs "$lim" "$tc" --only test_device_runs
  bg tc-holes "$lim" "$tc" --only test_device_holes
  bg tc-half "$lim" "$tc" --only test_device_half
  bg tc-misc "$lim" "$tc" --only test_device_random --only test_index_errors --only test_device_graph \
    --only test_device_stats --only test_no_device --only test_source --only test_constants_text --only test_attention_tiles
  bg tc-alloc "$lim" "$tc" --only test_device_alloc_failures
  bg tc-alloc-device "$lim" "$tc" --only test_device_alloc_failures_device
  bg example-device "$lim" "$R/bin/example-device"
  local f
  for f in examples/*.rj; do
    bg "check-$(basename "$f" .rj)" "$lim" "$R/bin/ragjit" check "$f" --random "$(check_size "$f")" --target cuda
  done
  bg half-numpy "$lim" python3 tests/half_numpy.py "$R/bin/ragjit"
  bg difftest-cuda "$lim" python3 tests/difftest.py "$R/bin/ragjit" --campaign "${DIFFTEST_N:-120}" \
    --seed "${DIFFTEST_SEED:-300000}" --targets cuda --half-share 0.4 --no-shrink
  bg test_elfload "$lim" "$R/bin/test_elfload"
  bg check-own-linker "$lim" bash -c 'for f in examples/*.rj; do case $f in *encoder.rj) s=B=8,maxlen=48 ;; *) s=B=16,maxlen=64 ;; esac
    RAGJIT_LLVM_LINKER=own RAGJIT_CACHE_DIR=off "$0" check "$f" --random "$s,seed=3,V=1000" --target cpu || exit 1; done' "$R/bin/ragjit"
  bg_wait
}

part_bench() {
  step bench timeout -k 5 "${BENCH_LIMIT:-200}" "$R/bin/bench" --target cuda --dtype bf16 --reps "${BENCH_REPS:-7}"
}

part_peer() {
  step torch-peer-cuda python3 bench/torch_peer.py "$R/bin/ragjit" --device cuda --B 2048 --reps 20
}

part_peer_cpu() {
  step torch-peer-cpu python3 bench/torch_peer.py "$R/bin/ragjit" --device cpu --reps 10
}

part_ncu() {
  local dir=/tmp/ragjit-device/wl
  workloads "$dir"
  for f in "$dir"/W*.rj; do
    step "ncu $(basename "$f")" ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum \
      "$R/bin/ragjit" bench "$f" --target cuda --random B=2048,minlen=1,maxlen=1024,seed=7 --reps 2
  done
}

# W1, W2, W4, W5 in f32 and bf16 under each RAGJIT_SIMT_* setting (src/codegen/simt/emit.c:
# cem_knob), a process each: kernel time by the device's timers and the ratio to the copy.
part_knobs() {
  local dir=/tmp/ragjit-device/knobs t w s o
  mkdir -p "$dir"
  for t in f32 bf16; do
    printf 'ragged j1 : B\ninput x : %s[B, j1, 256]\ninput w : %s[256]\ninput b : %s[256]\ny = relu(x * w + b)\noutput y\n' $t $t $t >"$dir/W1_$t.rj"
    printf 'ragged j1 : B\ninput x : %s[B, j1, 256]\ny = softmax(x, dim=1)\noutput y\n' $t >"$dir/W2_$t.rj"
    printf 'ragged j1 : B\ninput x : %s[B, j1, 256]\ny = sum(x, dim=1)\noutput y\n' $t >"$dir/W4_$t.rj"
    printf 'ragged j1 : B\ninput x : %s[B, j1, 256]\ninput w : %s[256]\ninput b : %s[256]\ny = layer_norm(x, [256], w, b)\noutput y\n' $t $t $t >"$dir/W5_$t.rj"
  done
  local settings=("" "RAGJIT_SIMT_UNROLL_LANES=0" "RAGJIT_SIMT_UNROLL_SERIAL=4" "RAGJIT_SIMT_SM_THREADS=1536")
  for w in W1 W2 W4 W5; do
    for t in f32 bf16; do
      for s in "${settings[@]}"; do
        o=$(env $s timeout 60 "$R/bin/ragjit" bench "$dir/${w}_$t.rj" --target cuda \
            --random B=1024,minlen=1,maxlen=1024,seed=7 --reps 9 2>&1)
        echo "$w $t [${s:-default}] kernels $(echo "$o" | grep -E '^  kernels' | awk '{print $2}') ms," \
          "$(echo "$o" | grep -oE 'kernels at [0-9.]+x')"
      done
    done
  done
}

run() {
  [ -f "$PACK" ] || { echo "device_session: $PACK is missing: run 'bench/device_session.sh pack' first and carry .device" >&2; exit 2; }
  local out=${OUT:-$PWD/device-out}
  mkdir -p "$out"
  exec > >(tee -a "$out/device.log") 2>&1
  R=/tmp/ragjit-device
  LOGS=/tmp/ragjit-device-logs
  rm -rf "$R" "$LOGS"
  mkdir -p "$LOGS"
  mkdir -p "$R"
  tar -xJf "$PACK" -C "$R" || exit 1
  export LD_LIBRARY_PATH="$R/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export RAGJIT_CACHE_DIR=off PYTHONUNBUFFERED=1
  local parts=("$@")
  [ ${#parts[@]} -gt 0 ] || parts=(tests bench)
  echo "device_session: $(date -u) on $(hostname): ${parts[*]}"
  for p in "${parts[@]}"; do
    case "$p" in
      tests) part_tests ;;
      bench) part_bench ;;
      peer) part_peer ;;
      peer-cpu) part_peer_cpu ;;
      ncu) part_ncu ;;
      knobs) part_knobs ;;
      *) echo "device_session: unknown part '$p' (tests, bench, peer, peer-cpu, ncu, knobs)"; FAILED+=("$p") ;;
    esac
  done
  if [ ${#FAILED[@]} -eq 0 ]; then
    echo "device_session: every step passed"
  else
    echo "device_session: FAILED: ${FAILED[*]}"
    exit 1
  fi
}

case "${1:-}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  *) sed -n '2,36p' "$0"; exit 2 ;;
esac
