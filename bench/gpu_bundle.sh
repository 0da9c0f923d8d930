#!/usr/bin/env bash
# Packs a CUDA-enabled build for a GPU machine that has the CUDA driver and toolkit but not
# this project's Debian libraries (a bare CUDA image): the programs, the plugins,
# gpu_backend_test, and every shared library they load that is neither glibc, libstdc++ nor
# CUDA's own. Unpack it at the same absolute path as BUILD_DIR (the tests find the plugins
# through the build's path) and run bench/gpu_check.sh with TESSERA_GPU_CHECK_BUILD set:
#
#   bench/gpu_bundle.sh build-gpu gpu.tar.xz              # here
#   mkdir -p "$BUILD" && tar -xJf gpu.tar.xz -C "$BUILD"  # there, BUILD = build-gpu's path
#   TESSERA_GPU_CHECK_BUILD=$BUILD bench/gpu_check.sh
set -euo pipefail
BUILD=$(cd "${1:?usage: gpu_bundle.sh BUILD_DIR OUT.tar.xz}" && pwd)
OUT=$(realpath -m "${2:?usage: gpu_bundle.sh BUILD_DIR OUT.tar.xz}")
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

FILES=(bin/tessera bin/tessera-conformance tests/gpu_backend_test)
for f in "${FILES[@]}"; do
  [ -x "$BUILD/$f" ] || { echo "gpu_bundle: $BUILD/$f is missing (build it first)" >&2; exit 1; }
done
mkdir -p "$STAGE/bin" "$STAGE/tests" "$STAGE/lib/tessera" "$STAGE/libs"
cp "$BUILD"/bin/tessera "$BUILD"/bin/tessera-conformance "$STAGE/bin/"
cp "$BUILD/tests/gpu_backend_test" "$STAGE/tests/"
cp "$BUILD"/lib/tessera/*.so "$STAGE/lib/tessera/"

# The libraries the binaries resolve here, less the system's and CUDA's.
SKIP='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|libcuda|libcudart|libcublas|libcublasLt)\.so'
for f in "$STAGE"/bin/* "$STAGE"/tests/* "$STAGE"/lib/tessera/*.so; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $SKIP ]] || cp -L "$path" "$STAGE/libs/$name"
done
echo "gpu_bundle: $(ls "$STAGE/libs" | wc -l) libraries: $(ls "$STAGE/libs" | tr '\n' ' ')" >&2
tar -cJf "$OUT" -C "$STAGE" .
echo "gpu_bundle: wrote $OUT ($(du -h "$OUT" | cut -f1))" >&2
