#!/usr/bin/env bash
# Configures and builds memrec into build/ (extra arguments go to cmake); TARGETS="memrec memrec-run" builds only
# those. Uses ccache when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@"
targets=()
[ -n "${TARGETS:-}" ] && targets=(--target ${TARGETS})
cmake --build build -j "$(nproc)" "${targets[@]}"
