#!/usr/bin/env bash
# Step time of examples/train.py at GPT-2-small size (12 layers, d 768, seq 1024) on a GPU: without recording,
# under PyTorch's _record_memory_history (stacks python / all), and under `memrec record` (stacks python / all,
# kernels on / off). Modes run one after the other in one call, so their ratios compare; each prints the median
# step time (steps after the first two). Usage: [PYTHON=python3] bench/python_record.sh MEMREC [STEPS] [train.py args]
set -uo pipefail
memrec=$1 steps=${2:-12}
shift $(( $# < 2 ? $# : 2 ))
train=(${PYTHON:-python3} examples/train.py --layers 12 --d-model 768 --heads 12 --seq 1024 --vocab 50257 --batch 8
       --steps "$steps" "$@")
median() { grep -o "median step ms [0-9.]*" | awk '{print $4}'; }
row() {  # NAME COMMAND...: the median step time and the whole command's wall time
  local name=$1 start end ms
  shift
  start=$(date +%s%N)
  ms=$("$@" 2>&1 | tee "/tmp/bench-${name// /_}.log" | median)
  end=$(date +%s%N)
  grep -q "memrec: not recording\|nothing recorded" "/tmp/bench-${name// /_}.log" && ms="NOT-RECORDED"
  printf '%-34s %10s %10.1f\n' "$name" "${ms:-FAILED}" "$(awk "BEGIN { print ($end - $start) / 1e9 }")"
}
printf '%-34s %10s %10s\n' mode "step ms" "wall s"
row "none" "${train[@]}"
row "torch history stacks=python" "${train[@]}" --torch-history python
row "torch history stacks=all" "${train[@]}" --torch-history all
for stacks in python all; do
  for kernels in on off; do
    row "memrec stacks=$stacks kernels=$kernels" "$memrec" record -o "/tmp/bench-$stacks-$kernels.memrec" \
      --stacks "$stacks" --kernels "$kernels" -- "${train[@]}"
  done
done
