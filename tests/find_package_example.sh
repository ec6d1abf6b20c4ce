#!/usr/bin/env bash
# What a user does: install memrec, build the example against it with find_package(memrec), run it, read the file.
# Usage: find_package_example.sh BUILD_DIR SOURCE_DIR MEMREC_BINARY
set -euo pipefail
build=$1 source=$2 memrec=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
cmake -S "$source/recorder/example" -B "$tmp/example" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/example" > /dev/null
"$tmp/example/memrec_example" "$tmp/example.memrec"
"$memrec" info "$tmp/example.memrec" | grep -q "peak allocated"
echo "find_package(memrec): built, ran and read back"
