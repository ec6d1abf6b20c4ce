#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the full build (gcc), then the snapshot library,
# CLI and readers again under ASan+UBSan (clang) with the libFuzzer targets.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMREC_FUZZ=ON \
  -DMEMREC_WITH_TORCH=OFF -DMEMREC_WITH_VIEWER=OFF -DMEMREC_BUILD_BENCH=OFF
cmake --build build-fuzz -j "$(nproc)"
ctest --test-dir build-fuzz --output-on-failure -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
