#!/usr/bin/env bash
# The fragmenting workload (examples/train.py with a sequence length that varies per step, seeded) under each common
# PYTORCH_CUDA_ALLOC_CONF setting: DIR/NAME.log holds each plain run's memory_stats() (the measured peaks),
# DIR/NAME.memrec a recording of the same run under that setting, DIR/NAME.conf the setting.
#   bench/alloc_conf_runs.sh MEMREC DIR
set -euo pipefail
memrec=$1 dir=$2
mkdir -p "$dir"
train=(python3 examples/train.py --layers 8 --d-model 768 --heads 12 --seq 512 --seq-min 96 --batch 16 --vocab 8192
       --steps 10)
settings=(
  "default="
  "expandable=expandable_segments:True"
  "split64=max_split_size_mb:64"
  "split256=max_split_size_mb:256"
  "gc06_split128=garbage_collection_threshold:0.6,max_split_size_mb:128"
  "roundup4=roundup_power2_divisions:4"
)
for s in "${settings[@]}"; do
  name=${s%%=*} conf=${s#*=}
  printf '%s\n' "$conf" > "$dir/$name.conf"
  PYTORCH_CUDA_ALLOC_CONF=$conf "${train[@]}" > "$dir/$name.log" 2>&1
  PYTORCH_CUDA_ALLOC_CONF=$conf "$memrec" record --force -o "$dir/$name.memrec" -- "${train[@]}" > "$dir/$name.record.log" 2>&1
  printf '%-14s %-58s %s\n' "$name" "${conf:-(default)}" "$(grep -o 'memory_stats .*' "$dir/$name.log")"
done
