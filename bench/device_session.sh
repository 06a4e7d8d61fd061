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
#   bench/device_session.sh run [tests] [bench] [peer] [peer-cpu] [ncu]
#       On the GPU machine, from the repository root, with .device carried there (the device
#       tool: command "bash bench/device_session.sh run tests bench", carry [".device"]):
#       unpacks into /tmp/ragjit-device and runs the parts named (tests and bench without any),
#       each to its end even when one fails, printing and appending everything to
#       $OUT/device.log (./device-out/device.log without $OUT):
#         tests     nvidia-smi; test_cuda (every graph of the test corpus, packed and with
#                   holes, and random chains, on the device against the interpreter; device
#                   memory, CUDA graphs, allocation failures), the device example, `ragjit
#                   check --target cuda` of every example program, and on that machine's CPU
#                   (another x86-64 than the build machine's) ragjit's own linker: test_elfload
#                   and `ragjit check --target cpu` of every example with RAGJIT_LLVM_LINKER=own
#         bench     bench --target cuda (W1..W9 by the device's timers against a device copy,
#                   device-resident runs, the persistent cache across new processes)
#         peer      bench/torch_peer.py --device cuda: PyTorch's nested jagged tensors on the
#                   same data (B = 2048, lengths 1..1024, D = 256)
#         peer-cpu  bench/torch_peer.py on the machine's CPU, all its cores
#         ncu       Nsight Compute's time and DRAM bytes of each kernel of W1..W6
#       A part takes 1-5 minutes on an H100; one call of the device tool runs 10 at most, so
#       "tests bench" and "peer ncu" are two calls.
# Exit status: 0 when every part ran and passed, else 1 (the log says which failed).
set -uo pipefail
cd "$(dirname "$0")/.."

PACK=.device/ragjit.tar.xz

pack() {
  set -e
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

part_tests() {
  step nvidia-smi nvidia-smi
  step test_cuda "$R/bin/test_cuda"
  step example-device "$R/bin/example-device"
  for f in examples/*.rj; do
    step "check $(basename "$f")" "$R/bin/ragjit" check "$f" --random B=64,maxlen=300,seed=3,V=1000 --target cuda
  done
  step test_elfload "$R/bin/test_elfload"
  for f in examples/*.rj; do
    step "check-cpu $(basename "$f")" env RAGJIT_LLVM_LINKER=own RAGJIT_CACHE_DIR=off "$R/bin/ragjit" check "$f" \
      --random B=64,maxlen=300,seed=3,V=1000 --target cpu
  done
}

part_bench() {
  step bench "$R/bin/bench" --target cuda
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

run() {
  [ -f "$PACK" ] || { echo "device_session: $PACK is missing: run 'bench/device_session.sh pack' first and carry .device" >&2; exit 2; }
  local out=${OUT:-$PWD/device-out}
  mkdir -p "$out"
  exec > >(tee -a "$out/device.log") 2>&1
  R=/tmp/ragjit-device
  rm -rf "$R"
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
      *) echo "device_session: unknown part '$p' (tests, bench, peer, peer-cpu, ncu)"; FAILED+=("$p") ;;
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
