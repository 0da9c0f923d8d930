#!/usr/bin/env bash
# Issue 3's prefix-caching benchmark: 32 requests sharing a 400-token prefix, prefix
# caching on and off in the same run. Prints the table and one JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-../shared/models/stories260K.gguf}
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
build/bin/tessera bench --serving -m "$MODEL" --requests 32 --concurrency 8 \
  --prefix-len 400 --suffix-len 16 --max-tokens 32 --json
