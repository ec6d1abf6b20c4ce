#!/usr/bin/env bash
# The cost of recording a Python program, without recording, under PyTorch's _record_memory_history (stacks python /
# all; CUDA only) and under `memrec record` (stacks python / all, kernels on / off). Modes run one after the other in
# one call, so their ratios compare. Two tables:
# - step time of examples/train.py at GPT-2-small size (12 layers, d 768, seq 1024): the median step (after the
#   first two);
# - ns per allocation/free pair from Python (bench/alloc_pairs.py: PAIRS pairs of a 256-element torch.empty).
# Each row also gives the command's wall time and "to files ms", from the program's last statement (its `end_ns`
# line) to the command's return: for memrec rows, to `memrec record` returning with complete files. That is an upper
# bound: it includes the interpreter's shutdown (the rows without memrec give that alone) and memrec's summary,
# which reads the files back (no --pickle, so nothing else is written); "read ms" is `memrec info` on the same
# file, an estimate of that read's share. "file ms", for memrec rows, is from `end_ns` to the file's last write (its
# modification time, from the file system's coarse clock: within a few ms): when the recording was complete, whatever
# the interpreter does after.
# Usage: [PYTHON=python3] [PAIRS=200000] [ROUNDS=1] [TABLES="steps pairs"] bench/python_record.sh MEMREC [STEPS] [train.py args]
set -uo pipefail
memrec=$1 steps=${2:-12}
shift $(( $# < 2 ? $# : 2 ))
python=${PYTHON:-python3}
train=("$python" examples/train.py --layers 12 --d-model 768 --heads 12 --seq 1024 --vocab 50257 --batch 8
       --steps "$steps" "$@")
pairs=("$python" bench/alloc_pairs.py --pairs "${PAIRS:-200000}")
value() { grep -o "^$1 [0-9.]*" | tail -1 | awk '{print $NF}'; }
ms() { awk "BEGIN { printf \"%.1f\", ($2 - $1) / 1e6 }"; }
header() { printf '%-34s %12s %8s %12s %8s %8s\n' mode "$1" "wall s" "to files ms" "file ms" "read ms"; }

row() {  # METRIC NAME COMMAND...: METRIC's value in the output, wall time, to-files time; for memrec, read time
  local metric=$1 name=$2 log start end wall v files=- complete=- read=- end_ns out read_start
  shift 2
  log="/tmp/bench-${metric// /_}-${name// /_}.log"
  start=$(date +%s%N)
  "$@" > "$log" 2>&1
  end=$(date +%s%N)
  wall=$(awk "BEGIN { printf \"%.1f\", ($end - $start) / 1e9 }")
  v=$(value "$metric" < "$log")
  end_ns=$(value end_ns < "$log")
  [ -n "$end_ns" ] && files=$(ms "$end_ns" "$end")
  if [ "$1" = "$memrec" ]; then
    out=$(grep -m1 -o "^wrote [^ ]*" "$log" | cut -d" " -f2)
    if [ -n "$out" ]; then
      [ -n "$end_ns" ] && complete=$(ms "$end_ns" "$(stat -c %.9Y "$out" | tr -d .)")
      read_start=$(date +%s%N)
      "$memrec" info "$out" > /dev/null 2>&1 && read=$(ms "$read_start" "$(date +%s%N)")
    fi
    grep -q "memrec: not recording\|nothing recorded" "$log" && v="NOT-RECORDED"
  fi
  printf '%-34s %12s %8s %12s %8s %8s\n' "$name" "${v:-FAILED}" "$wall" "$files" "$complete" "$read"
}

tables=" ${TABLES:-steps pairs} "
if [[ $tables == *" steps "* ]]; then
  header "step ms"
  row "median step ms" "none" "${train[@]}"
  row "median step ms" "torch history stacks=python" "${train[@]}" --torch-history python
  row "median step ms" "torch history stacks=all" "${train[@]}" --torch-history all
  for stacks in python all; do
    for kernels in on off; do
      row "median step ms" "memrec stacks=$stacks kernels=$kernels" "$memrec" record --force \
        -o "/tmp/bench-$stacks-$kernels.memrec" --stacks "$stacks" --kernels "$kernels" -- "${train[@]}"
    done
  done
fi

[[ $tables == *" pairs "* ]] || exit 0
header "ns/pair"
for round in $(seq "${ROUNDS:-1}"); do  # ROUNDS > 1: the modes again, interleaved, for the spread between runs
  row "ns per pair" "none" "${pairs[@]}"
  row "ns per pair" "torch history stacks=python" "${pairs[@]}" --torch-history python
  row "ns per pair" "torch history stacks=all" "${pairs[@]}" --torch-history all
  for stacks in python all; do
    row "ns per pair" "memrec stacks=$stacks kernels=on" "$memrec" record --force -o "/tmp/bench-pairs-$stacks.memrec" \
      --stacks "$stacks" -- "${pairs[@]}"
  done
done
