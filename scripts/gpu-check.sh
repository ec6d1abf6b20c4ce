#!/usr/bin/env bash
# One device call: configure + build with CUDA, run the recorder tests (GPU ones included), record the 12-layer
# transformer, check the checkpointing what-if against measured runs, run one out of GPU memory, run the recorder
# benchmarks.
# Logs and results go to $OUT (default ./out).
# Needs cereal's headers and Debian's libunwind8 + libunwind-dev carried in .deps (see docs/library.md) and PyTorch
# with libtorch installed.
#
# Each section runs in a subshell with `set -e` and pipefail (so output is cut with `sed -n 1,Np`, not head, whose early
# exit would fail the pipe), so its first failing command ends it with that status; the next
# sections still run, and summary.txt ends with every section's result. The script exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
# libunwind.so.8 (Debian's libunwind8, carried in .deps like cereal) for the recorder's stack capture, which loads it
# at run time and falls back to torch's unwinder where it is missing.
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
MEMREC=$BUILD/cli/memrec
results=()

# At most 8 files come back from the device machine: summary.txt, build.log, tests.log, run12.log,
# checkpoint.txt, oom.log, bench.log, bench.json, and the files of the sections that run (each names its own).
say() { echo "$*" | tee -a "$OUT/summary.txt"; }

# section NAME FUNCTION: runs FUNCTION under set -e (not inside `if` or `||`, where bash would ignore -e).
# SKIP="benchmarks tests" leaves sections out, e.g. to fit a second call on a warm machine into its time limit;
# SECTIONS (at the end) picks them.
section() {
  if [[ " ${SKIP:-} " == *" $1 "* ]]; then
    say "== $1 skipped"
    results+=("$(printf '%-12s %s' "$1" skipped)")
    return
  fi
  say "== $1"
  ( set -e; "$2" )
  local rc=$?
  say "   -> rc=$rc ($1)"
  results+=("$(printf '%-12s %s' "$1" "$([ $rc = 0 ] && echo ok || echo "FAILED (rc=$rc)")")")
}

configure() {
  local prefix
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S "${SRC:-.}" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMREC_WITH_CUDA=ON -DMEMREC_WITH_VIEWER=OFF -DMEMREC_INSTALL=OFF \
    -DMEMREC_EXTRA_INCLUDE="$PWD/.deps/usr/include" -DCMAKE_PREFIX_PATH="$prefix" > /tmp/configure.log 2>&1 ||
    { tail -40 /tmp/configure.log | tee -a "$OUT/summary.txt"; return 1; }
}

build() {
  local python=()  # the Python targets and the C++ CUDA program: only where the Python with torch has headers
  ninja -C "$BUILD" -t targets all > /tmp/targets.txt  # not piped into grep -q: its early exit fails the pipe
  grep -q "^memrec_python_tests:" /tmp/targets.txt && python=(memrec_python memrec_python_tests)
  grep -q "^memrec_cuda_allocations:" /tmp/targets.txt && python+=(memrec_cuda_allocations)
  local targets=(memrec memrec-run memrec_recorder_tests bench_recorder memrec_example bench_analysis bench_format
                 bench_load bench_ranks "${python[@]}")
  [ -n "${TARGETS:-}" ] && read -ra targets <<< "$TARGETS"  # what the chosen SECTIONS need
  ninja -C "$BUILD" -j16 -k 0 "${targets[@]}" > "$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$OUT/build.log" | sed -n 1,40p | tee -a "$OUT/summary.txt"; return 1; }
}

tests() {
  local rc=0
  (cd /tmp && timeout 400 stdbuf -oL "$OLDPWD/$BUILD/tests/memrec_recorder_tests" --gtest_color=no) > "$OUT/tests.log" 2>&1 || rc=$?
  grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|Expected|Which is|  Actual|^--checkpoint|^[a-z0-9,()]+ +[0-9.]+ " \
    "$OUT/tests.log" | sed -n 1,100p || true
  return $rc
}

run12() {
  "$MEMREC" run transformer --layers 12 -o /tmp/run12.memrec --pickle /tmp/run12.pickle > "$OUT/run12.log" 2>&1 ||
    { cat "$OUT/run12.log"; return 1; }
  cat "$OUT/run12.log"
  "$MEMREC" stats /tmp/run12.memrec --top 5 | sed -n 1,30p
}

peak_of() { "$MEMREC" stats "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_allocated"]["bytes"])'; }

# The 12-layer GPU transformer plain and with three checkpointing choices; memrec whatif on the plain run predicts
# each measured peak within 5%. One warmup step, so the measured ones have Adam's state.
# No stacks or kernels: the prediction needs only events and scopes, and the runs stay short.
checkpoint() {
  local table=$OUT/checkpoint.txt base="$MEMREC run transformer --layers 12 --warmup 1 --steps 2 --kernels off --stacks off"
  $base -o /tmp/ckpt-none.memrec > /tmp/ckpt-none.log 2>&1 || { cat /tmp/ckpt-none.log; return 1; }
  local plain every_other="0,2,4,6,8,10" failed=0
  plain=$(peak_of /tmp/ckpt-none.memrec)
  { grep "^config:" /tmp/ckpt-none.log; printf '%-16s %14s %14s %8s\n' "--checkpoint" "predicted MiB" "measured MiB" "error"
    python3 -c "print(f'{\"(none)\":<16} {\"\":>14} {$plain / 2**20:14.2f}')"; } > "$table"
  for layers in all 0,1,2,3,4,5 "$every_other"; do
    local file=/tmp/ckpt-$layers.memrec measured predicted
    $base --checkpoint "$layers" -o "$file" > "$file.log" 2>&1 || { cat "$file.log"; return 1; }
    measured=$(peak_of "$file")
    predicted=$("$MEMREC" whatif checkpoint /tmp/ckpt-none.memrec --layers "$layers" --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["predicted_peak"])')
    python3 - "$layers" "$predicted" "$measured" >> "$table" <<'EOF' || failed=1
import sys
layers, predicted, measured = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
error = (predicted - measured) / measured
print(f"{layers:<16} {predicted / 2**20:14.2f} {measured / 2**20:14.2f} {100 * error:7.1f}%")
sys.exit(abs(error) >= 0.05)
EOF
  done
  cat "$table" | tee -a "$OUT/summary.txt"
  [ $failed = 0 ] || { say "   a prediction is off by 5% or more"; return 1; }
}

# memrec advise on a Hugging Face GPT-2 (random weights) and a plain-module GPT: each recorded, advised, then run
# again without memrec with the top three replayed changes (and the combined one) applied; advise.txt has predicted
# against measured peaks and savings (tests/scripts/advise_gpu.py), and fails where a saving is off by 5% or more.
advise() {
  local failed=0
  for model in hf gpt; do
    "$MEMREC" record --force -o /tmp/advise-$model.memrec -- python3 tests/scripts/advise_gpu.py train --model $model \
      > /tmp/advise-$model.log 2>&1 || { tail -30 /tmp/advise-$model.log; return 1; }
    cp /tmp/advise-$model.memrec "$OUT/"  # the advised run, for replaying its advice again here
    "$MEMREC" advise /tmp/advise-$model.memrec | tee -a "$OUT/advise.txt"
    "$MEMREC" advise /tmp/advise-$model.memrec --json > "$OUT/advise-$model.json"
    python3 tests/scripts/advise_gpu.py check --model $model --advice "$OUT/advise-$model.json" --python python3 \
      | tee -a "$OUT/advise.txt" || failed=1
  done
  [ $failed = 0 ] || { say "   a measured saving is off by 5% or more"; return 1; }
}

# OOM forensics: a batch no GPU here holds. The run must fail with one message and leave a complete
# file with the OOM event, the live blocks and the segments; stats must explain it.
oom() {
  local rc=0
  "$MEMREC" run transformer --layers 12 --batch 512 --warmup 0 --steps 1 -o /tmp/oom.memrec > "$OUT/oom.log" 2>&1 ||
    rc=$?
  tail -25 "$OUT/oom.log"
  [ $rc = 1 ] || { say "   expected exit 1, got $rc"; return 1; }
  grep -q "memrec: error: out of memory" "$OUT/oom.log"
  "$MEMREC" info /tmp/oom.memrec | sed -n 1,40p
  "$MEMREC" stats /tmp/oom.memrec > /tmp/oom-stats.txt
  grep -A14 "^OOM at" /tmp/oom-stats.txt | tee -a "$OUT/summary.txt"
}

# `memrec record` on Python programs (the python3 on PATH, whose torch the build used). The module's
# tests (the example trains on the GPU there), then the example on CUDA against its own memory_stats(), torch.compile,
# PyTorch's _record_memory_history alongside memrec in one process (entry for entry), and torchrun with 2 ranks.
python_tests() {
  local rc=0
  (cd /tmp && timeout 450 "$OLDPWD/$BUILD/tests/memrec_python_tests" --gtest_color=no) > "$OUT/python_tests.log" 2>&1 || rc=$?
  grep -E "^\[ *(OK|FAILED|PASSED) *\]|Failure|Expected|Which is|  Actual|exception" "$OUT/python_tests.log" | sed -n 1,60p
  [ $rc = 0 ] || { tail -30 "$OUT/python_tests.log"; return $rc; }
}

# compare_with_memory_stats LOG FILE: the allocator counters and peaks a CUDA program printed into LOG (one line
# `memory_stats {json}`, as examples/train.py prints) against its recording FILE.
# memrec records from CUDA's initialization and allocates nothing on the device itself, so the program's counters
# are the recording's, one for one.
compare_with_memory_stats() {
  "$MEMREC" export "$2" -o "${2%.memrec}-export.pickle"
  python3 - "$1" "${2%.memrec}-export.pickle" "$("$MEMREC" stats "$2" --json)" <<'PYEOF'
import json, pickle, sys
stats = json.loads(next(l for l in open(sys.argv[1]) if l.startswith("memory_stats "))[len("memory_stats "):])
trace = pickle.load(open(sys.argv[2], "rb"))["device_traces"][0]
recorded = json.loads(sys.argv[3])
count = lambda a: sum(e["action"] == a for e in trace)
rows = [("allocs", count("alloc"), stats["allocation.all.allocated"]),
        # c10 counts a free when the program frees (free_requested), before record_stream's uses end
        ("frees", count("free_requested"), stats["allocation.all.freed"]),
        ("segments", count("segment_alloc"), stats["segment.all.allocated"]),
        # memrec's CUDA events carry the bytes requested (as PyTorch's trace does), not the rounded block sizes
        ("peak requested", recorded["peak_allocated"]["bytes"], stats["requested_bytes.all.peak"]),
        ("peak reserved", recorded["peak_reserved"]["bytes"], stats["reserved_bytes.all.peak"])]
for name, ours, theirs in rows:
    print(f"{name:<16} memrec {ours:>14}  memory_stats {theirs:>14}  {'ok' if ours == theirs else 'DIFFERENT'}")
sys.exit(any(o != t for _, o, t in rows))
PYEOF
}

python_record() {
  "$MEMREC" record --force -o /tmp/py.memrec --pickle /tmp/py.pickle -- python3 examples/train.py --steps 4 --layers 4 \
    > /tmp/py.log 2>&1 || { tail -30 /tmp/py.log; return 1; }
  tail -4 /tmp/py.log
  compare_with_memory_stats /tmp/py.log /tmp/py.memrec
  "$MEMREC" stats /tmp/py.memrec --by module --top 8
  "$MEMREC" stats /tmp/py.memrec --by stack --top 8
  "$MEMREC" record --force -o /tmp/pyc.memrec -- python3 examples/train.py --steps 3 --compile > /tmp/pyc.log 2>&1 ||
    { tail -30 /tmp/pyc.log; return 1; }
  "$MEMREC" stats /tmp/pyc.memrec --by op --top 8
  "$MEMREC" export /tmp/pyc.memrec --format perfetto -o /tmp/pyc.json
  grep -o "Torch-Compiled Region: [0-9/]*" /tmp/pyc.json | sort | uniq -c
  "$MEMREC" record --force -o /tmp/hist.memrec -- python3 tests/scripts/torch_history.py train --dump /tmp/torch-hist.pickle \
    > /tmp/hist.log 2>&1 || { tail -30 /tmp/hist.log; return 1; }
  "$MEMREC" export /tmp/hist.memrec -o /tmp/hist-memrec.pickle
  python3 tests/scripts/torch_history.py compare /tmp/torch-hist.pickle /tmp/hist-memrec.pickle
  "$MEMREC" record --force -o /tmp/graph.memrec -- python3 tests/scripts/cuda_graph.py > /tmp/graph.log 2>&1 ||
    { tail -30 /tmp/graph.log; return 1; }
  grep "graph pool" /tmp/graph.log
  "$MEMREC" stats /tmp/graph.memrec --by pool --top 4 | tee /tmp/graph-stats.txt | grep -A4 "by pool"
  grep -q "pool ($(grep -o 'graph pool (.*)' /tmp/graph.log | grep -o '[0-9]*, [0-9]*'))" /tmp/graph-stats.txt
  "$MEMREC" record --force -o /tmp/prof.memrec -- python3 tests/scripts/profiler_first.py > /tmp/prof.log 2>&1 ||
    { tail -30 /tmp/prof.log; return 1; }
  grep -E "memrec|profiler kernels|CUPTI" /tmp/prof.log
  "$MEMREC" info /tmp/prof.memrec 2>&1 | grep -E "events|kernels"
  "$MEMREC" info /tmp/prof.memrec 2>&1 | grep "kernels not traced from .*: the program's profiler held CUPTI" > /dev/null
  if grep -q "CUPTI_ERROR\|activities will be missing" /tmp/prof.log; then return 1; fi
  grep -q "profiler kernels [1-9]" /tmp/prof.log
  "$MEMREC" record --force -o /tmp/ranks.memrec -- torchrun --nproc-per-node 2 examples/train.py --steps 2 --device cpu \
    > /tmp/ranks.log 2>&1 || { tail -30 /tmp/ranks.log; return 1; }
  grep "wrote" /tmp/ranks.log
}

# `memrec record` on a libtorch C++ program on CUDA (tests/programs/cuda_allocations.cpp), recorded from main():
# its counters and peaks against its own memory_stats, as the Python example's.
cuda_program() {
  "$MEMREC" record --force -o /tmp/cx.memrec -- "$BUILD/tests/memrec_cuda_allocations" > /tmp/cx.log 2>&1 ||
    { tail -30 /tmp/cx.log; return 1; }
  cat /tmp/cx.log
  compare_with_memory_stats /tmp/cx.log /tmp/cx.memrec
  "$MEMREC" stats /tmp/cx.memrec --by stack --top 5
  python3 - /tmp/cx-export.pickle <<'PYEOF'  # the events are spread in time as the program made them
import pickle, sys
times = [e["time_us"] for e in pickle.load(open(sys.argv[1], "rb"))["device_traces"][0]]
print("first times (us):", times[:4], "last:", times[-2:])
sys.exit(len(set(times)) < len(times) // 2)
PYEOF
}

# The model zoo (tests/python/zoo) on CUDA: each program with and without `memrec record`, identical in exit status,
# stdout, its own stderr and memory_stats(), and memrec's counts equal to memory_stats() (torch.compile, a CUDA graph,
# DDP and the Hugging Face models from configs included).
zoo() {
  python3 tests/python/zoo/run_zoo.py --memrec "$MEMREC" --python "$(command -v python3)" --device cuda --jobs 8 \
    --out /tmp/zoo 2>&1 | tee "$OUT/zoo.txt" | tee -a "$OUT/summary.txt"
}

# truth_run NAME [VAR=VALUE...]: records tests/scripts/gpu_truth.py (a one-rank NCCL process group, cuBLAS and a raw
# cuMemAlloc) under that environment, prints the program's own view and memrec info, then checks the recording: the
# raw allocation is an other allocation of its size, NCCL's setup makes other allocations, NVML used - (reserved +
# other) stays within 2 MiB over the run.
truth_run() {
  local name=$1 file
  shift
  rm -f /tmp/"$name".memrec /tmp/"$name".*.memrec
  env "$@" "$MEMREC" record --force -o /tmp/"$name".memrec -- python3 tests/scripts/gpu_truth.py run --facts /tmp/"$name".json \
    > /tmp/"$name".log 2>&1 || { tail -40 /tmp/"$name".log; return 1; }
  cat /tmp/"$name".log
  for file in /tmp/"$name".memrec /tmp/"$name".*.memrec; do [ -f "$file" ] && break; done  # one process, or by pid
  "$MEMREC" info "$file" | sed -n 1,30p
  python3 tests/scripts/gpu_truth.py check /tmp/"$name".json "$file" --memrec "$MEMREC" | tee -a "$OUT/summary.txt"
}

# Device memory outside the caching allocator: checked with the defaults; printed, not checked, with expandable
# segments (the allocator's cuMemCreate/cuMemMap) and with NCCL on cudaMalloc instead of its cuMem* buffers.
gpu_truth() {
  truth_run truth
}

gpu_truth_variants() {
  say "-- expandable segments (printed, not checked):"
  truth_run truthx PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True || true
  say "-- NCCL_CUMEM_ENABLE=0 (printed, not checked):"
  truth_run truthc NCCL_CUMEM_ENABLE=0 || true
}

# The same on two GPUs with torchrun (each rank on its own GPU), checked on each rank's file; skipped with one GPU.
gpu_truth_ranks() {
  local gpus rc=0 rank
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
  [ "$gpus" -ge 2 ] || { say "   one GPU: skipped"; return 0; }
  rm -f /tmp/ranks-truth.*
  "$MEMREC" record --force -o /tmp/ranks-truth.memrec -- torchrun --nproc-per-node 2 tests/scripts/gpu_truth.py run \
    --facts /tmp/ranks-truth.json > /tmp/ranks-truth.log 2>&1 || { tail -40 /tmp/ranks-truth.log; return 1; }
  cat /tmp/ranks-truth.log
  for rank in 0 1; do
    say "-- rank $rank"
    python3 tests/scripts/gpu_truth.py check /tmp/ranks-truth.rank$rank.json /tmp/ranks-truth.rank$rank.memrec \
      --memrec "$MEMREC" | tee -a "$OUT/summary.txt" || rc=1
  done
  return $rc
}

# Step-time cost of recording a Python program (GPT-2-small size), eager and torch.compile: bench/python_record.sh.
python_bench() {
  bench/python_record.sh "$MEMREC" 12 | tee -a "$OUT/summary.txt"
  [[ " ${TABLES:-steps} " == *" steps "* ]] || return 0
  say "torch.compile:"
  local train=(python3 examples/train.py --layers 12 --d-model 768 --heads 12 --seq 1024 --vocab 50257 --batch 8
               --steps 12 --compile)
  say "none $("${train[@]}" 2>&1 | grep -o 'median step ms [0-9.]*')"
  say "memrec stacks=all kernels=on $("$MEMREC" record --force -o /tmp/bench-compile.memrec -- "${train[@]}" 2>&1 |
    grep -o 'median step ms [0-9.]*')"
}

# The fragmenting workload under each allocator setting (bench/alloc_conf_runs.sh), with the GPU recordings that
# the allocator model is checked against (12-layer, expandable segments, OOM) packed into alloc_runs.tar.
alloc_runs() {
  bench/alloc_conf_runs.sh "$MEMREC" /tmp/alloc | tee -a "$OUT/summary.txt"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$MEMREC" run transformer --layers 2 -o /tmp/alloc/run2-expandable.memrec
  cp /tmp/run12.memrec /tmp/oom.memrec /tmp/alloc/ 2>/dev/null || true
  tar -C /tmp -cf "$OUT/alloc_runs.tar" alloc
}

# The allocator model against the measured runs of alloc_runs: each setting's reserved peak predicted from the default
# run's recording, within 5% (the table in docs/benchmarks.md); alloc_bench: its replay speed on 10M synthetic events.
alloc_whatif() {
  [[ -f /tmp/alloc/default.conf ]] || bench/alloc_conf_runs.sh "$MEMREC" /tmp/alloc > /dev/null
  python3 bench/alloc_whatif_check.py "$MEMREC" /tmp/alloc | tee "$OUT/alloc_whatif.md" | tee -a "$OUT/summary.txt"
}

alloc_bench() {
  ninja -C "$BUILD" bench_allocator > /dev/null
  timeout 120 "$BUILD/bench/bench_allocator" --benchmark_filter="/10000000$" 2>&1 | grep -E "^BM_" | tee -a "$OUT/summary.txt"
}

# memrec whatif scale against measured runs (bench/scale_check.py): Hugging Face GPT-2 (124M from a config, eager
# attention) recorded at batch 2 and 4 predicts 8, 12 and 16, at sequence 256, 512 and 1024 predicts 2048, each within
# memrec growth on Hugging Face GPT-2 (random weights) trained with a history list of its logits and without it: the
# verdicts, the line named, and the step it predicts against a run to OOM under set_per_process_memory_fraction (2%).
growth() {
  python3 bench/growth_check.py "$MEMREC" /tmp/growth "$OUT/growth.json" | tee "$OUT/growth.txt" | tee -a "$OUT/summary.txt"
}

# 5% of a recorded run; --fit's largest batch and sequence must run and the next must not (or come within 2% of the
# device). scale_bench: bench_scale's two histories of 1M events (target: fit and predict in 3 s).
scale() {
  python3 bench/scale_check.py "$MEMREC" /tmp/scale | tee "$OUT/scale.md" | tee -a "$OUT/summary.txt"
}

scale_bench() {
  ninja -C "$BUILD" bench_scale > /dev/null
  timeout 120 "$BUILD/bench/bench_scale" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 |
    grep -E "_median|^Benchmark" | tee -a "$OUT/summary.txt"
}

# Ranks side by side: torchrun with 2 ranks on CUDA, rank 1 given a larger batch, each rank's counts and peaks
# against its own memory_stats (torchrun --tee prefixes each rank's lines with [defaultR]:), then `stats --by rank`.
# One GPU: the ranks share it on gloo (DDP). Two GPUs (nvidia-h200-x2): DDP and FSDP2 on NCCL, a GPU each.
# ranks_bench: the loader at scale (bench/bench_ranks.cpp: 64 ranks x 1M events for stats, 8 x 1M opened for the viewer).
ranks() {
  local gpus backend modes mode rank
  gpus=$(nvidia-smi -L | wc -l)
  if [ "$gpus" -ge 2 ]; then backend=nccl; modes=(ddp fsdp); else backend=gloo; modes=(ddp); fi
  for mode in "${modes[@]}"; do
    local flags=()
    [ "$mode" = fsdp ] && flags=(--fsdp)
    "$MEMREC" record --force -o "/tmp/ranks-$mode.memrec" -- torchrun --nproc-per-node 2 --tee 3 examples/train.py --steps 3 \
      --layers 4 --backend "$backend" --rank-batch 1=8 "${flags[@]}" > "/tmp/ranks-$mode.log" 2>&1 ||
      { tail -30 "/tmp/ranks-$mode.log"; return 1; }
    for rank in 0 1; do
      grep -a "^\[default$rank\]:" "/tmp/ranks-$mode.log" | sed "s/^\[default$rank\]://" > "/tmp/ranks-$mode.rank$rank.log"
      say "$mode rank $rank ($backend, $gpus GPU(s)):"
      compare_with_memory_stats "/tmp/ranks-$mode.rank$rank.log" "/tmp/ranks-$mode.rank$rank.memrec" | tee -a "$OUT/summary.txt"
    done
    "$MEMREC" stats --by rank "/tmp/ranks-$mode.rank0.memrec" "/tmp/ranks-$mode.rank1.memrec" --top 5 | tee -a "$OUT/summary.txt"
  done
}

ranks_bench() {
  timeout 300 "$BUILD/bench/bench_ranks" 2>&1 | grep -E "^BM_|^Benchmark" | tee -a "$OUT/summary.txt"
}

# Issue 26's benchmark: every recorder mode interleaved in one process on GPT-2 (bench/step_modes.py), in a long
# run's steady state (each recording's first 3 steps untimed), then memrec's parts one by one (--breakdown); the same
# on a small CPU-bound model. STEP_MODES="--only all,no-kernels" picks modes of the first table.
step_modes() {
  local sm=(env PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/step_modes.py)
  "${sm[@]}" --rounds 10 ${STEP_MODES:-} | tee -a "$OUT/summary.txt"
  [ -n "${STEP_MODES:-}" ] && return
  "${sm[@]}" --breakdown --rounds 6 | tee -a "$OUT/summary.txt"
  local small=(--model encoder --batch 8 --seq 64 --steps 40)
  "${sm[@]}" "${small[@]}" | tee -a "$OUT/summary.txt"
  "${sm[@]}" "${small[@]}" --breakdown | tee -a "$OUT/summary.txt"
}

# Issue 42: memrec against PyTorch's recorder where the CPU bounds the step, every mode interleaved in one process:
# the small encoder (4 layers, d 128, 4 heads, feed-forward 256, batch 8 x 64, AdamW), 25 rounds of 40 steps, then
# GPT-2 (7 rounds of 8 steps); then what `memrec info` says the encoder's default recording cost (its last round's file).
cpu_bound_cost() {
  local sm=(env PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/step_modes.py
            --only again,torch-python,torch-all,all,python,no-kernels,no-ops,ops-all,python-ops-all)
  "${sm[@]}" --model encoder --ff 256 --batch 8 --seq 64 --rounds 25 --steps 40 --out /tmp/cpu-bound-cost |
    tee -a "$OUT/summary.txt"
  "$MEMREC" info /tmp/cpu-bound-cost/all.memrec | grep "^recording cost" | tee -a "$OUT/summary.txt"
  "${sm[@]}" --rounds 7 --steps 8 | tee -a "$OUT/summary.txt"
}

# Each part of a recording in ns per unit on this host (bench/part_costs.py --time: the CI guard's loops, timed), with
# the allocation loop on the CPU allocator, then on the CUDA caching allocator.
part_times() {
  local device
  for device in cpu cuda; do
    PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/part_costs.py --time --device $device \
      --out /tmp/part-times-$device | tee -a "$OUT/summary.txt"
  done
}

# Where memrec's cost reaches a GPU-bound step: the GPU's idle time before and between the first kernels of each step,
# from recordings with every step's kernels (bench/gpu_idle.py); GPU_IDLE="--modes bare,hooks,ops,cpp,python,full"
# adds memrec's parts one by one.
gpu_idle() {
  env PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/gpu_idle.py "$MEMREC" --rounds 8 \
    --modes bare,full,no-ops ${GPU_IDLE:-} 2>&1 | grep -v loss_type | tee -a "$OUT/summary.txt"
}

# Issue 22's overhead check: alloc+free pairs on CUDA under memrec with owners on and off in turns, after a training
# step whose owner scans sent the model's parameters, gradients and AdamW state (bench/alloc_pairs.py).
owners_cost() {
  local stacks
  for stacks in all off; do
    PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/alloc_pairs.py --owners-rounds 16 \
      --stacks "$stacks" | tee -a "$OUT/summary.txt"
  done
}

# Owners at the peak of three Hugging Face models (bench/owners_models.py): <none> at most 5% by module and by layer;
# OWNERS_MODELS="gpt2_compile_fx ..." runs only those.
owners() {
  mkdir -p /tmp/owners
  python3 bench/owners_models.py "$MEMREC" /tmp/owners ${OWNERS_MODELS:-} | tee -a "$OUT/summary.txt"
}

# Layers by the model's own names (bench/layers_check.py): a 12-layer GPT of plain modules, eager vs compiled whole,
# compiled per block, in DDP (one rank, NCCL) and FSDP2; at the end of the last forward the layers' activation bytes
# within 10% of their mean and the same names in both runs; no wrapper's part (DDP's optimizer's GraphModule and
# submod_N pieces included) in a layer, module or owner name; DDP's buckets the layer "ddp bucket", FSDP2's
# all-gathered parameters "fsdp all-gather". LAYERS_CASES="whole ddp" runs only those.
layers() {
  mkdir -p /tmp/layers
  python3 bench/layers_check.py "$MEMREC" /tmp/layers ${LAYERS_CASES:-} | tee "$OUT/layers.txt" | tee -a "$OUT/summary.txt"
}

# pip install from this clone into the Python whose torch CUDA trains with (no registry here: --no-index), then the
# entry points as a user of that venv runs them, from outside the clone.
pip_install() {
  MEMREC_CMAKE_ARGS="-DMEMREC_EXTRA_INCLUDE=$PWD/.deps/usr/include" python3 -m pip install --no-index \
    --no-build-isolation . > /tmp/pip.log 2>&1 || { tail -40 /tmp/pip.log; return 1; }
  local train=$PWD/examples/train.py
  (cd /tmp && memrec record --force -o /tmp/pip.memrec -- python3 "$train" --steps 2 --layers 2) > /tmp/pip-record.log 2>&1 ||
    { tail -30 /tmp/pip-record.log; return 1; }
  grep wrote /tmp/pip-record.log
  (cd /tmp && python3 -m memrec info /tmp/pip.memrec) | grep -E "device.0.type|peak allocated"
  (cd /tmp && python3 -c "import memrec; print(memrec.__file__)")
}

example() {
  "$BUILD/recorder/example/memrec_example" /tmp/example.memrec 2>&1 | tee -a "$OUT/summary.txt"
}

benchmarks() {
  timeout 240 "$BUILD/bench/bench_recorder" --benchmark_enable_random_interleaving=true --benchmark_repetitions=5 \
    --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > "$OUT/bench.log" 2>&1 || { cat "$OUT/bench.log"; return 1; }
  cat "$OUT/bench.log"
}

# interleaved_cost NAME FILTER REPETITIONS BASE [PREFIX...]: bench_recorder's modes FILTER interleaved at random
# (run under PREFIX), kept as $OUT/NAME.json, each repetition against the BASE repetitions next to it
# (bench/paired_cost.py).
interleaved_cost() {
  local name=$1 filter=$2 repetitions=$3 base=$4
  shift 4
  "$@" "$BUILD/bench/bench_recorder" --benchmark_filter="$filter" --benchmark_enable_random_interleaving=true \
    --benchmark_repetitions="$repetitions" --benchmark_out="${JSON_DIR:-$OUT}/$name.json" --benchmark_out_format=json \
    > "/tmp/$name.log" 2>&1 || { tail -20 "/tmp/$name.log" | tee -a "$OUT/summary.txt"; return 1; }
  python3 bench/paired_cost.py "${JSON_DIR:-$OUT}/$name.json" --base "$base" | tee -a "$OUT/summary.txt"
}

# Issue 26's per-pair figures: alloc+free pairs on CUDA with no recording, memrec without stacks and memrec with C++
# stacks (BM_AllocPair modes 0, 5, 9; no op scopes), the process kept on 4 cores so that its threads do not wander
# over the host's.
pair_cost() {
  interleaved_cost pair_cost 'BM_AllocPair/(0|5|9)/' "${PAIR_REPETITIONS:-40}" BM_AllocPair/0/ taskset -c 4-7
}

# The per-pair figures of pair_cost against another commit's recorder, run in turns with this one's: AB_ROUNDS
# (default 4) processes of each, 15 repetitions a mode, every other round the other one first. Make
# build-base/src.tar with `git archive BASE -o build-base/src.tar` and carry build-base (without it the section
# says so and does nothing); its bench_recorder is built in /tmp/base, again only when the archive changed. The runs
# come back in pair_ab.tar (pair_base_N.json, pair_this_N.json).
pair_ab() {
  [ -f build-base/src.tar ] || { say "pair_ab: no build-base/src.tar (git archive BASE -o build-base/src.tar)"; return 0; }
  if ! cmp -s build-base/src.tar /tmp/base.tar; then
    rm -rf /tmp/base /tmp/base.tar && mkdir -p /tmp/base && tar -xf build-base/src.tar -C /tmp/base
    cp build-base/src.tar /tmp/base.tar
  fi
  SRC=/tmp/base BUILD=/tmp/base/build configure
  ninja -C /tmp/base/build -j16 bench_recorder > /tmp/base_build.log 2>&1 ||
    { tail -20 /tmp/base_build.log | tee -a "$OUT/summary.txt"; rm -f /tmp/base.tar; return 1; }
  local i which order
  rm -rf /tmp/pair_ab && mkdir -p /tmp/pair_ab
  for i in $(seq 1 "${AB_ROUNDS:-4}"); do
    order="base this"
    [ $((i % 2)) = 0 ] && order="this base"
    for which in $order; do
      say "-- $which, process $i"
      local build=$BUILD
      [ $which = base ] && build=/tmp/base/build
      BUILD=$build JSON_DIR=/tmp/pair_ab interleaved_cost "pair_${which}_$i" 'BM_AllocPair/(0|5|9)/' 15 BM_AllocPair/0/ \
        taskset -c 4-7
    done
  done
  tar -cf "$OUT/pair_ab.tar" -C /tmp pair_ab
}

# Issue 26's 12-layer figure: the transformer step with no recording and with memrec's stacks, op scopes and kernels
# (BM_TransformerStep modes 0 and 3), unpinned (on 4 cores the recorder's threads would share the program's).
step12_cost() {
  interleaved_cost step12_cost 'BM_TransformerStep/(0|3)/' "${STEP12_REPETITIONS:-10}" BM_TransformerStep/0/ timeout 200
}

# Absolute times of the snapshot library (no GPU needed, but this is the machine benchmarks are quoted from),
# opening a file for the viewer included.
analysis_bench() {
  timeout 150 "$BUILD/bench/bench_analysis" --benchmark_filter="/10000000$" 2>&1 | grep -E "^BM_|^Benchmark" | tee -a "$OUT/summary.txt"
  timeout 60 "$BUILD/bench/bench_format" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 |
    grep -E "_median|^Benchmark" | tee -a "$OUT/summary.txt"
  timeout 120 "$BUILD/bench/bench_load" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 |
    grep -E "_median|^Benchmark" | tee -a "$OUT/summary.txt"
}

# The read path's and the analysis' benchmarks against the last recorded results (bench/recorded/gpu-host.json,
# from an earlier run of this section): a benchmark more than 10% slower fails the section. bench_read.json holds this
# run's results in one file; committing it as bench/recorded/gpu-host.json records them (docs/benchmarks.md).
bench_compare() {
  local runs=()
  for b in bench_format bench_load bench_analysis; do
    local filter=.
    [ "$b" = bench_analysis ] && filter="/10000000$"
    timeout 300 "$BUILD/bench/$b" --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_out="/tmp/$b.json" --benchmark_out_format=json > "/tmp/$b.log" 2>&1 || { tail -20 "/tmp/$b.log"; return 1; }
    runs+=("/tmp/$b.json")
  done
  python3 scripts/bench-compare.py bench/recorded/gpu-host.json "${runs[@]}" --save "$OUT/bench_read.json" |
    tee -a "$OUT/summary.txt"
}

# Recording leaves the program's own tools whole (issue 38). memory_stats() of HF GPT-2 generate (KV cache,
# inference_mode) plain twice, under `memrec record` and under memrec.start() variants, each with the cycle collector
# as usual, disabled and frozen (tests/scripts/generate_memory.py): which of memrec's options moves the reserved peak
# and segments, and whether the collector's timing is why. Then the program's own torch.profiler with memrec first,
# profiler first, and both on a schedule of two cycles (the zoo's self_profiling and strict_modules, under
# `memrec record` and `import memrec`): its kernel counts, its stderr and the windows the file names.
guest() {
  local gen=tests/scripts/generate_memory.py mode
  for mode in normal disable freeze; do
    echo "gc $mode: plain        $(python3 $gen --gc $mode)"
    echo "gc $mode: plain again  $(python3 $gen --gc $mode)"
    echo "gc $mode: record       $("$MEMREC" record --force -o /tmp/gen.memrec -- python3 $gen --memrec record --gc $mode)"
    echo "gc $mode: start        $(PYTHONPATH="$BUILD/python" python3 $gen --memrec start --gc $mode)"
    echo "gc $mode: start late   $(PYTHONPATH="$BUILD/python" python3 $gen --memrec start --late --gc $mode)"
    echo "gc $mode: no devmem    $(PYTHONPATH="$BUILD/python" python3 $gen --memrec start --option device_memory=0 --gc $mode)"
    echo "gc $mode: stacks off   $(PYTHONPATH="$BUILD/python" python3 $gen --memrec start --option stacks=off --gc $mode)"
    echo "gc $mode: no kernels   $(PYTHONPATH="$BUILD/python" python3 $gen --memrec start --option kernels=0 --gc $mode)"
    echo "gc $mode: no scopes    $(PYTHONPATH="$BUILD/python" python3 $gen --memrec start --option scopes=0 --option owners=0 --gc $mode)"
  done 2>&1 | tee "$OUT/guest.txt" | tee -a "$OUT/summary.txt"
  "$MEMREC" record --force -o /tmp/prof.memrec -- python3 tests/scripts/profiler_first.py > /tmp/prof.log 2>&1 ||
    { tail -30 /tmp/prof.log; return 1; }
  cat /tmp/prof.log
  "$MEMREC" info /tmp/prof.memrec 2>&1 | grep -E "^ *kernels|not traced"
  python3 tests/python/zoo/run_zoo.py --memrec "$MEMREC" --python "$(command -v python3)" --device cuda --jobs 2 \
    --only self_profiling,gpt_ddp_compiled,strict_modules,hf_generate --out /tmp/zoo-guest 2>&1 | tee -a "$OUT/guest.txt" "$OUT/summary.txt"
  for f in /tmp/zoo-guest/self_profiling*.memrec; do echo "$f"; "$MEMREC" info "$f" 2>&1 | grep -E "^ *kernels|not traced"; done
  SELF_PROFILING_EDGES=1 PYTHONPATH="$BUILD/python" python3 tests/python/zoo/self_profiling.py --device cuda 2>&1 |
    grep cycle
  ZOO_MEMREC_OUT=/tmp/edges.memrec SELF_PROFILING_EDGES=1 PYTHONPATH="$BUILD/python" \
    python3 tests/python/zoo/self_profiling.py --device cuda 2>&1 | grep cycle
  ! grep -q "CUPTI_ERROR\|activities will be missing" /tmp/prof.log /tmp/zoo-guest/*.err
}

# Where recording moves the caching allocator's layout (issue 38): HF GPT-2 generate (4 prompts of 64 tokens from the
# CUDA generator, pad 0), each row its own process, one after another (runs side by side move the driver's
# addresses). The allocator picks among free blocks of one size by address, and the driver places segments around
# CUPTI's own mappings (docs/reliability.md): each row names one part of memrec alone (through memrec.start's options)
# or, without memrec, one thing a recorder does to the device (--probe), each with its segments' layout. Fails when
# the plain runs disagree or `memrec record` without CUPTI differs from plain.
kv_layout() {
  local gen=(python3 tests/scripts/generate_memory.py --batch 4 --prompt 64 --prompt-rng cuda --pad 0)
  local start=(env PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" "${gen[@]}" --late --memrec start)
  local off=(--option stacks=off --option kernels=0 --option device_memory=0 --option scopes=0 --option owners=0
             --option ops=0)
  row() {
    local name=$1 out
    shift
    out=$("$@" 2>/tmp/kv_layout.err | tail -1) || true
    [[ $out == "{"* ]] || out="FAILED: $(tail -1 /tmp/kv_layout.err)"
    printf '%-24s %s\n' "$name" "$out"
  }
  {
    row plain "${gen[@]}"
    row "plain again" "${gen[@]}"
    row record "$MEMREC" record --force -o /tmp/kv.memrec -- "${gen[@]}" --memrec record
    row "record, no CUPTI" "$MEMREC" record --force -o /tmp/kv.memrec --kernels off --device-memory off -- \
      "${gen[@]}" --memrec record
    row start "${start[@]}"
    row "start before CUDA" env PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" "${gen[@]}" --memrec start
    row "start, all off" "${start[@]}" "${off[@]}"
    row "start, no CUPTI" "${start[@]}" --option kernels=0 --option device_memory=0
    row "only kernels (CUPTI)" "${start[@]}" "${off[@]}" --option kernels=1
    row "only device memory" "${start[@]}" "${off[@]}" --option device_memory=1
    row "only python stacks" "${start[@]}" "${off[@]}" --option stacks=python
    row "only scopes, owners" "${start[@]}" "${off[@]}" --option scopes=1 --option owners=1
    row "only ops" "${start[@]}" "${off[@]}" --option ops=1
    row "probe cuMemAlloc 2 MiB" "${gen[@]}" --probe device_alloc
    row "probe pinned 8 MiB" "${gen[@]}" --probe pinned
    row "probe torch.profiler" "${gen[@]}" --probe profiler
    row "probe snapshot" "${gen[@]}" --probe snapshot
    row "CUPTI subscribe alone" "${gen[@]}" --cupti-subscribe
  } | tee "$OUT/kv_layout.txt" | tee -a "$OUT/summary.txt"
  { python3 - "$OUT/kv_layout.txt" <<'PY'
import json, sys
rows = {line[:24].strip(): json.loads(line[25:]) for line in open(sys.argv[1]) if line[25:].startswith("{")}
keys = ["reserved_bytes.all.peak", "segment.all.allocated", "allocation.all.allocated"]
plain = {k: rows["plain"][k] for k in keys}
moved = [name for name in rows if {k: rows[name].get(k) for k in keys} != plain]
print(f"plain {plain}; differs: {', '.join(moved) or 'none'}")
sys.exit(1 if {"plain again", "record, no CUPTI"} & set(moved) else 0)
PY
  } | tee -a "$OUT/summary.txt"
}

# A real training run recorded for LONG_RUN_SECONDS (default 150), then opened by every command (bench/long_run.py).
long_run() {
  python3 bench/long_run.py "$MEMREC" /tmp/long_run "${LONG_RUN_SECONDS:-150}" | tee -a "$OUT/summary.txt"
  rm -rf /tmp/long_run
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; g++ --version | head -1; } \
  >> "$OUT/summary.txt" 2>&1
# SECTIONS="build gpu_truth ..." runs those, in that order (configure first when the build is new).
all_sections=(configure build tests run12 checkpoint oom python_tests python_record cuda_program zoo gpu_truth
              gpu_truth_variants gpu_truth_ranks python_bench alloc_runs alloc_whatif alloc_bench scale scale_bench
              ranks ranks_bench advise owners owners_cost step_modes gpu_idle pair_cost pair_ab step12_cost example
              benchmarks analysis_bench bench_compare long_run pip_install growth layers guest kv_layout cpu_bound_cost
              part_times)
for name in ${SECTIONS:-${all_sections[*]}}; do
  [[ " ${all_sections[*]} " == *" $name "* ]] || { say "no section $name"; exit 2; }
  section "$name" "$name"
done

say "== summary"
status=0
for r in "${results[@]}"; do
  say "   $r"
  [[ $r == *FAILED* ]] && status=1
done
exit $status
