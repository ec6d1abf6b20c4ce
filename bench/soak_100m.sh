#!/usr/bin/env bash
# The long-run soak (docs/benchmarks.md, "Long runs (issue 24)"): records EVENTS events of a steady CPU training
# loop through memrec::Recorder (bench/recorder/soak_record.cpp), then opens the file with every command, each under
# /usr/bin/time -v for its wall time and peak resident memory. Prints a Markdown table; deletes the file at the end.
#
#   bench/soak_100m.sh [EVENTS] [RATE] [BUILD]    (defaults: 100000000; 400000 events/s, 0 for as fast as the loop
#                                                 runs; build. The file goes to $TMPDIR or /tmp)
set -euo pipefail

events=${1:-100000000}
rate=${2:-400000}
build=${3:-build}
memrec=$build/cli/memrec
dir=$(mktemp -d "${TMPDIR:-/tmp}/memrec_soak.XXXXXX")
trap 'rm -rf "$dir"' EXIT
run=$dir/run.memrec

# "| what | wall s | peak RSS MiB |" for one command, its own output kept in $dir/out.txt.
measure() {
  local what=$1
  shift
  if ! /usr/bin/time -v -o "$dir/time.txt" "$@" > "$dir/out.txt" 2>&1; then
    echo "| $what | failed: $(tail -1 "$dir/out.txt") | |"
    return
  fi
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i];
                                                 print s}' "$dir/time.txt")
  rss=$(awk '/Maximum resident set size/ {printf "%.0f", $NF / 1024}' "$dir/time.txt")
  echo "| $what | $wall | $rss |"
}

echo "commit $(git rev-parse --short HEAD), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $events events," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| command | wall s | peak RSS MiB |"
echo "|---|---|---|"
measure "record (soak_record, no stacks, $rate events/s asked)" "$build/bench/soak_record" "$run" "$events" "$rate"
recorded=$(cat "$dir/out.txt")
steps=$(sed -E 's/.*"steps": ([0-9]+).*/\1/' <<< "$recorded")
middle=$((steps / 2))
measure "info" "$memrec" info "$run"
measure "stats" "$memrec" stats "$run"
measure "diff (the file against itself)" "$memrec" diff "$run" "$run"
measure "report" xvfb-run -a "$memrec" report "$run" -o "$dir/report.html"
measure "export --steps $middle..$middle (pickle)" "$memrec" export "$run" --steps "$middle..$middle" \
  -o "$dir/step.pickle"
measure "view --screenshot" xvfb-run -a "$memrec" view "$run" --screenshot "$dir/view.png"
measure "stats --steps $middle..$middle" "$memrec" stats "$run" --steps "$middle..$middle"
measure "view --steps $middle..$middle --screenshot" xvfb-run -a "$memrec" view "$run" --steps "$middle..$middle" \
  --screenshot "$dir/step.png"
echo
echo "recorder: $recorded"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "file: $(stat -c %s "$run") bytes, step pickle: $(stat -c %s "$dir/step.pickle") bytes"
