#!/usr/bin/env bash
# One device call: configure + build with CUDA, run the recorder tests (GPU ones included), record the 12-layer
# transformer, run the recorder benchmarks. Logs and results go to $OUT (default ./out).
# Needs cereal's headers carried in .deps (see docs/library.md) and PyTorch with libtorch installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
status=0
step() { echo "== $*" | tee -a "$OUT/summary.txt"; }
record() { local rc=$1; shift; echo "   -> rc=$rc ($*)" | tee -a "$OUT/summary.txt"; [ "$rc" = 0 ] || status=1; }

# At most 8 files come back from the device machine: summary.txt, build.log, tests.log, run12.log, bench.log, bench.json.
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; g++ --version | head -1; } \
  >> "$OUT/summary.txt" 2>&1
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')

step configure
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMREC_WITH_CUDA=ON -DMEMREC_WITH_VIEWER=OFF \
  -DMEMREC_EXTRA_INCLUDE="$PWD/.deps/usr/include" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" > /tmp/configure.log 2>&1
record $? configure
[ $status = 0 ] || { tail -40 /tmp/configure.log | tee -a "$OUT/summary.txt"; exit 1; }

step build
ninja -C "$BUILD" -j16 -k 0 memrec memrec_recorder_tests bench_recorder memrec_example > "$OUT/build.log" 2>&1
record $? build
grep -E "error|FAILED" "$OUT/build.log" | head -40 | tee -a "$OUT/summary.txt"

step tests
(cd /tmp && timeout 300 "$OLDPWD/$BUILD/tests/memrec_recorder_tests" --gtest_color=no) > "$OUT/tests.log" 2>&1
record $? tests
grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|Expected|Which is|  Actual" "$OUT/tests.log" | head -80

step "memrec run transformer --layers 12"
"$BUILD/cli/memrec" run transformer --layers 12 -o /tmp/run12.memrec --pickle /tmp/run12.pickle > "$OUT/run12.log" 2>&1
record $? run12
cat "$OUT/run12.log"

step example
"$BUILD/recorder/example/memrec_example" /tmp/example.memrec 2>&1 | tee -a "$OUT/summary.txt"
record $? example

step benchmarks
timeout 240 "$BUILD/bench/bench_recorder" --benchmark_enable_random_interleaving=true --benchmark_repetitions=5 \
  --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > "$OUT/bench.log" 2>&1
record $? benchmarks
cat "$OUT/bench.log"

step "done: status $status"
exit $status
