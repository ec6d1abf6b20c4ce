#!/usr/bin/env bash
# Records tests/data/scale_*.memrec, the runs `memrec whatif scale` is tested on: examples/train.py (explicit
# softmax(QK^T) attention) on the CPU at batch 2, 4, 8 (sequence 64), and at sequence 32, 128, 256 (batch 2; batch 2
# is also sequence 64).
#
#     tests/scripts/scale_fixtures.sh build/cli/memrec tests/data
set -euo pipefail
memrec=$1 out=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
record() {  # NAME ARGS...
  local name=$1
  shift
  "$memrec" record --force -o "$out/$name.memrec" -- /usr/bin/python3 "$here/examples/train.py" \
    --layers 1 --d-model 32 --heads 2 --vocab 256 --steps 2 "$@"
}
for batch in 2 4 8; do record "scale_batch$batch" --batch "$batch"; done
for seq in 32 128 256; do record "scale_seq$seq" --batch 2 --seq "$seq"; done
