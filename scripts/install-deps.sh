#!/usr/bin/env bash
# Installs the Debian 12 packages Tessera builds with, skipping those already present. Every
# package the build uses is named here, never left to a Recommends (installs run with
# --no-install-recommends): libdnnl-dev's CMake package needs OpenCL (ocl-icd-opencl-dev,
# opencl-c-headers), which libdnnl-dev only recommends. scripts/check-deps.sh proves the list.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  libtomlplusplus-dev libspdlog-dev libfmt-dev
  libboost-dev libboost-filesystem-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  nlohmann-json3-dev libcli11-dev libxxhash-dev
  libicu-dev
  libcpp-httplib-dev
  libgtest-dev libgmock-dev
  libvalijson-dev jq
  hipcc
)

# The tokenizer tests compare against npm packages; Node.js may come from elsewhere.
command -v npm >/dev/null || PACKAGES+=(nodejs npm)

# --list: print the list (scripts/check-deps.sh proves it complete) and install nothing.
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
