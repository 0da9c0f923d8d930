#!/usr/bin/env bash
# Every quantization scheme on one footing: perplexity and KL(F32 || scheme) on the second
# half of ../shared/models/stories260K.samples.txt (chunks of 128 tokens), the calibrated
# methods (and the importance matrix) calibrated on the first half. Two models: stories260K (a real model, 64-wide rows:
# only the blocks of 32 fit) and a 256-wide synth llama with moderate outlier features
# (`synth --outlier-dims 4 --outlier-gain 4`, 4 layers, FFN 768: every format fits).
# Prints a Markdown table per model. Usage: bench/quant_quality.sh [CHUNKS] (default 80).
set -euo pipefail
cd "$(dirname "$0")/.."
CHUNKS=${1:-80}
T=build/bin/tessera SAMPLES=../shared/models/stories260K.samples.txt
[ -x "$T" ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
[ -f "$SAMPLES" ] || { echo "quant_quality: $SAMPLES is missing" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bytes=$(wc -c < "$SAMPLES")
head -c $((bytes / 2)) "$SAMPLES" > "$work/calib.txt"
tail -c $((bytes - bytes / 2)) "$SAMPLES" > "$work/eval.txt"
"$T" synth "$work/synth.gguf" --dim 256 --layers 4 --heads 4 --kv-heads 4 --ffn 768 --outlier-dims 4 \
  --outlier-gain 4 2>/dev/null

# row NAME FILE [--quant SCHEME]: one table row against the model's F32 file ($base).
row() {
  local name=$1 file=$2
  shift 2
  local j
  j=$("$T" perplexity -m "$file" --kl-base "$base" -f "$work/eval.txt" -c 128 --chunks "$CHUNKS" -t "$(nproc)" \
        -ctk f32 -ctv f32 --json "$@" 2>/dev/null | tail -1)
  printf '| %s | %.5g | %.5f | %.1f %% |\n' "$name" "$(jq .ppl <<<"$j")" "$(jq .kl_mean <<<"$j")" \
    "$(jq '.top1_agree * 100' <<<"$j")"
}

# quantize NAME TYPE [FLAGS...]: writes $work/NAME.gguf from $base.
quantize() {
  local name=$1 type=$2
  shift 2
  "$T" quantize "$base" "$work/$name.gguf" "$type" "$@" >/dev/null 2>&1
}

table() {
  echo
  printf '%s (F32 perplexity %.5g)\n' "$1" "$("$T" perplexity -m "$base" -f "$work/eval.txt" -c 128 --chunks "$CHUNKS" \
    --json 2>/dev/null | tail -1 | jq .ppl)"
  echo
  echo '| scheme | perplexity | mean KL | top-1 agreement |'
  echo '|---|---|---|---|'
  for type in q8_0 q5_1 q5_0 q4_1 q4_0 "${KQUANTS[@]}"; do
    quantize "$type" "$type" && row "$type" "$work/$type.gguf"
  done
  for scheme in fp8_e4m3 "${INT4[@]}" llm_int8 w8a8_smooth; do
    row "$scheme (at load)" "$base" --quant "$scheme"
  done
  quantize smooth w8a8_smooth --calib "$work/calib.txt" && row "w8a8_smooth, SmoothQuant-smoothed" "$work/smooth.gguf" --quant w8a8_smooth
  for type in q4_0 q4_1 q5_0 q8_0; do
    quantize "gptq-$type" "$type" --method gptq --calib "$work/calib.txt" && row "$type, GPTQ" "$work/gptq-$type.gguf"
  done
  "$T" imatrix -m "$base" -f "$work/calib.txt" -c 128 -o "$work/imatrix.gguf" >/dev/null 2>&1
  printf '[quant]\nimatrix = "%s"\n' "$work/imatrix.gguf" >"$work/imatrix.toml"
  row "llm_int8, imatrix (at load)" "$base" --quant llm_int8 --config "$work/imatrix.toml"
  for type in q4_0 q4_1 "${KQUANTS[@]:0:1}"; do
    quantize "im-$type" "$type" --imatrix "$work/imatrix.gguf" && row "$type, imatrix" "$work/im-$type.gguf"
  done
  for type in q4_0 q4_1 "${KQUANTS[@]:0:1}"; do
    quantize "awq-$type" "$type" --method awq --calib "$work/calib.txt" && row "$type, AWQ" "$work/awq-$type.gguf"
  done
  [ ${#INT4[@]} -eq 0 ] || { quantize awq-int4 int4_g128 --method awq --calib "$work/calib.txt" &&
    row "int4_g128, AWQ-scaled (at load)" "$work/awq-int4.gguf" --quant int4_g128; }
  [ ${#INT4[@]} -eq 0 ] || { quantize gptq-int4 int4_g128 --method gptq --calib "$work/calib.txt" &&
    row "int4_g128, GPTQ grid values (at load)" "$work/gptq-int4.gguf" --quant int4_g128; }
}

# stories260K's rows of 64 fit no super-block of 256 and no int4_g128 group of 128.
base=../shared/models/stories260K.gguf KQUANTS=() INT4=()
table "stories260K"
base=$work/synth.gguf KQUANTS=(q4_k_m q6_k q5_k_m q3_k iq4_xs) INT4=(int4_g128)
table "synth 256-wide, 4 layers, outlier gain 4"
