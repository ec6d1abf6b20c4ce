#!/usr/bin/env bash
# Installs, builds, records a 12-layer transformer (CUDA when there is a GPU, else CPU),
# exports the pickle for pytorch.org/memory_viz, renders a screenshot, and says where they are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
TARGETS="memrec memrec-run" scripts/build.sh  # what the demo runs; tests and benchmarks wait for scripts/test.sh
mkdir -p out
build/cli/memrec run transformer --layers 12 -o out/transformer.memrec --pickle out/transformer.pickle
xvfb-run -a -s "-screen 0 1600x1000x24" build/cli/memrec view out/transformer.memrec --screenshot out/transformer.png
echo
echo "snapshot:   $PWD/out/transformer.memrec   (memrec info/stats/view)"
echo "pickle:     $PWD/out/transformer.pickle   (open in pytorch.org/memory_viz)"
echo "screenshot: $PWD/out/transformer.png"
