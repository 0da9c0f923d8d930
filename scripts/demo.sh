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
No model at $MODEL (the trained TinyStories model lives in ../shared beside the checkout).
Generating with a small random-weight model made by 'tessera synth' instead: expect
gibberish. Any llama-family GGUF works: TESSERA_DEMO_MODEL=/path/to/model.gguf scripts/demo.sh
MSG
  MODEL=build/demo-synth.gguf
  build/bin/tessera synth "$MODEL" --preset tiny --donor bytes --vocab 260
fi
build/bin/tessera run -m "$MODEL" -p "Once upon a time" -n 128 --temp 0
