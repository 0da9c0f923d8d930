#!/usr/bin/env bash
# Quick start: install what is missing, build, and generate text with a real model.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF
cmake --build build

MODEL=${TESSERA_DEMO_MODEL:-../shared/models/stories260K.gguf}
if [ ! -f "$MODEL" ]; then
  cat >&2 <<MSG
No demo model at $MODEL.
Tessera runs any llama-family GGUF file, e.g. one downloaded from Hugging Face
(TinyLlama-1.1B-Chat Q8_0 or llama2.c's stories260K converted with llama.cpp):
  TESSERA_DEMO_MODEL=/path/to/model.gguf scripts/demo.sh
MSG
  exit 1
fi
build/bin/tessera run -m "$MODEL" -p "Once upon a time" -n 128 --temp 0
