#!/usr/bin/env bash
# Builds digests.c against ggml-quants.c from the llama.cpp sources node-llama-cpp ships
# (tests/npm, after `npm ci`) and prints the digests quant_formats_test.cpp compares with.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here/../../tests/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -c advice.detachedHead=false clone -q "$bundle" "$work/llama.cpp"
src=$work/llama.cpp/ggml/src
cc -O2 -std=c11 -I"$src/../include" -I"$src" -c "$src/ggml-quants.c" -o "$work/ggml-quants.o"
cc -O2 -std=c11 "$here/digests.c" "$work/ggml-quants.o" -lm -o "$work/digests"
"$work/digests"
