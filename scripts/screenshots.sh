#!/usr/bin/env bash
# Renders the README's viewer screenshots by running the viewer's screenshot tests, which keep the PNGs they
# checked: every picture in the README passed the same assertions as CI.
# Usage: scripts/screenshots.sh [build dir] [output dir]   (defaults: build, docs/images)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-$root/docs/images}"
tests="$build/tests/memrec_viewer_tests"
if [[ ! -x "$tests" ]]; then
  echo "screenshots.sh: $tests is missing; build it first: ninja -C $build memrec memrec_viewer_tests" >&2
  exit 1
fi
mkdir -p "$out"
MEMREC_SCREENSHOT_DIR="$out" "$tests" --gtest_filter='Torch/Screenshot.*:ScreenshotAt.*:Torch/FlameShot.*:FlameShotRange.*:SegmentsShot.*:ModulesShot.*'
ls -l "$out"/viewer_*.png
