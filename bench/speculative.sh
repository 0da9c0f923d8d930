#!/usr/bin/env bash
# Speculative decoding at B = 1 through the server: each reference prompt of stories260K
# asked, then asked again (a retry), one request at a time, 128 greedy tokens, on a
# synth 110m model with stories260K's vocabulary; methods none, ngram and suffix in the same
# run. Prints tokens/s per method and the ratio to no speculation.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "bench: writing the synth 110m model" >&2
build/bin/tessera synth "$work/m110.gguf" --preset 110m --donor "$SHARED/models/stories260K.gguf" 2>/dev/null
jq -c '{prompt, max_tokens: 128, temperature: 0, ignore_eos: true}' \
  "$SHARED/models/reference/stories260K.ref.jsonl" > "$work/once.jsonl"
cat "$work/once.jsonl" "$work/once.jsonl" > "$work/bodies.jsonl"
port=${PORT:-18431}
base=""
for method in none ngram suffix; do
  printf '[speculative]\nmethod = "%s"\n' "$method" > "$work/$method.toml"
  build/bin/tessera serve -m "$work/m110.gguf" --config "$work/$method.toml" --port "$port" >/dev/null 2>"$work/$method.log" &
  pid=$!
  for _ in $(seq 100); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
  tokens=0
  start=$(date +%s.%N)
  while read -r body; do
    n=$(curl -sf "localhost:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" |
        jq '.usage.completion_tokens')
    tokens=$((tokens + n))
    printf '.' >&2
  done < "$work/bodies.jsonl"
  end=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true
  tps=$(awk -v n="$tokens" -v a="$start" -v b="$end" 'BEGIN { print n / (b - a) }')
  [ -n "$base" ] || base=$tps
  printf '\n%-7s %5d tokens  %7.1f tokens/s  %.2fx\n' "$method" "$tokens" "$tps" "$(awk -v t="$tps" -v b="$base" 'BEGIN { print t / b }')"
  port=$((port + 1))
done
