#!/usr/bin/env bash
# Speculative decoding under load through the server: B clients (1, 4, 16 by default) each
# send the stories260K reference prompts one after another, 64 greedy tokens each, to a
# synth 110m model with stories260K's vocabulary; methods none, ngram and draft_model (a
# Q4_0 copy of the target as its self-draft, whose passes run batched for all requests)
# in the same run. Prints tokens/s per method and concurrency, the ratio to no
# speculation at that concurrency, and the draft acceptance and draft-model passes per
# engine step from /metrics. Each concurrency first runs one unmeasured round (the
# speculation gate samples each batch-size class before it decides; a server that has run
# a while has done so), then the measured one.
#   B="1 16" METHODS="none draft_model" bench/speculative_batch.sh
#   EXTRA_TOML=$'adaptive = false' bench/speculative_batch.sh   # lines for [speculative]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
B=${B:-1 4 16}
METHODS=${METHODS:-none ngram draft_model}
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
echo "bench: writing the synth 110m model and its Q4_0 self-draft" >&2
build/bin/tessera synth "$work/m110.gguf" --preset 110m --donor "$SHARED/models/stories260K.gguf" 2>/dev/null
build/bin/tessera quantize "$work/m110.gguf" "$work/m110-q4_0.gguf" q4_0 2>/dev/null
jq -c '{prompt, max_tokens: 64, temperature: 0, ignore_eos: true}' \
  "$SHARED/models/reference/stories260K.ref.jsonl" > "$work/bodies.jsonl"
port=${PORT:-18471}

metric() { curl -sf "localhost:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# One client: every body in turn; prints the completion tokens it got.
client() {
  local tokens=0 n
  while read -r body; do
    n=$(curl -sf "localhost:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" |
        jq '.usage.completion_tokens')
    tokens=$((tokens + n))
  done < "$work/bodies.jsonl"
  echo "$tokens"
}

declare -A base
printf '%-12s %3s %8s %11s %7s %9s %12s\n' method B tokens tokens/s ratio accepted passes/step
for method in $METHODS; do
  {
    printf '[speculative]\nmethod = "%s"\n' "$method"
    [ "$method" = draft_model ] && printf 'draft_model = "%s"\n' "$work/m110-q4_0.gguf"
    [ "$method" = none ] || printf '%s\n' "${EXTRA_TOML:-}"
  } > "$work/$method.toml"
  build/bin/tessera serve -m "$work/m110.gguf" -t 2 --config "$work/$method.toml" --port "$port" >/dev/null 2>"$work/$method.log" &
  pid=$!
  for _ in $(seq 150); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
  for b in $B; do
    for i in $(seq "$b"); do client > /dev/null & done  # the unmeasured round
    wait $(jobs -p | grep -v "^$pid$")
    steps0=$(metric tessera_engine_steps_total); drafted0=$(metric tessera_spec_draft_tokens_total)
    accepted0=$(metric tessera_spec_accepted_tokens_total); passes0=$(metric tessera_spec_draft_model_passes_total)
    start=$(date +%s.%N)
    for i in $(seq "$b"); do client > "$work/client.$i" & done
    wait $(jobs -p | grep -v "^$pid$")
    end=$(date +%s.%N)
    tokens=$(cat "$work"/client.* | awk '{ s += $1 } END { print s }')
    rm -f "$work"/client.*
    steps=$(( $(metric tessera_engine_steps_total) - steps0 ))
    drafted=$(( $(metric tessera_spec_draft_tokens_total) - drafted0 ))
    accepted=$(( $(metric tessera_spec_accepted_tokens_total) - accepted0 ))
    passes=$(( $(metric tessera_spec_draft_model_passes_total) - passes0 ))
    tps=$(awk -v n="$tokens" -v a="$start" -v e="$end" 'BEGIN { print n / (e - a) }')
    [ "$method" = none ] && base[$b]=$tps
    printf '%-12s %3d %8d %11.1f %6.2fx %8s %12s\n' "$method" "$b" "$tokens" "$tps" \
      "$(awk -v t="$tps" -v r="${base[$b]:-$tps}" 'BEGIN { print t / r }')" \
      "$(awk -v a="$accepted" -v d="$drafted" 'BEGIN { if (d > 0) printf "%.0f%%", 100 * a / d; else print "-" }')" \
      "$(awk -v p="$passes" -v s="$steps" 'BEGIN { if (p > 0) printf "%.2f", p / s; else print "-" }')"
  done
  kill -TERM "$pid"; wait "$pid" || true
  pid=""
  port=$((port + 1))
done
