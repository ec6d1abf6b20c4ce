#!/usr/bin/env bash
# Installs the Debian 12 packages memrec builds, tests and runs with. Safe to run again.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git python3 clang libclang-rt-14-dev
  libtorch-dev libopenblas0-pthread python3-torch python3-dev
  python3-pip python3-venv python3-setuptools python3-wheel python3-build python3-nbclient python3-ipykernel
  libcereal-dev libzstd-dev libcli11-dev libfmt-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libncurses-dev tmux
  libgtest-dev libbenchmark-dev libboost-stacktrace-dev libunwind-dev
  libimgui-dev libglfw3-dev libgl-dev libstb-dev
  xvfb xauth x11-apps imagemagick chromium valgrind
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
