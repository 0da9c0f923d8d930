#!/usr/bin/env bash
# n choices against one: the time to the first token of every choice (a non-streamed
# completion of max_tokens 1) for n = 1 and n = 8 on a 400-token prompt, alternated over
# ROUNDS rounds in one run, each request with a cache salt of its own (no prefix-cache hit
# between them), on a synth 110m model with stories260K's vocabulary; and the prompt tokens
# the engine computed (/metrics) per request. The n choices fork the prompt's KV, so n = 8
# should cost about what n = 1 does.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-5}
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
work=$(mktemp -d)
port=${PORT:-18441}
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
echo "bench: writing the synth 110m model" >&2
build/bin/tessera synth "$work/m110.gguf" --preset 110m --donor "$SHARED/models/stories260K.gguf" 2>/dev/null
build/bin/tessera serve -m "$work/m110.gguf" --port "$port" -t 2 >/dev/null 2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
prompt=""
while [ "$(curl -sf "localhost:$port/tokenize" -d "$(jq -nc --arg p "$prompt" '{prompt: $p}')" | jq .count)" -lt 400 ]; do
  prompt+="The little dog ran to the big park with its friend. "
done
computed() { curl -sf "localhost:$port/metrics" | awk '/^tessera_prompt_tokens_computed_total/ { print $2 }'; }
: > "$work/1.txt"
: > "$work/8.txt"
for round in $(seq "$ROUNDS"); do
  for n in 1 8; do
    before=$(computed)
    body=$(jq -nc --arg p "$prompt" --argjson n "$n" --arg salt "r$round-n$n-$RANDOM" \
      '{prompt: $p, n: $n, max_tokens: 1, temperature: 1, seed: 1, cache_salt: $salt}')
    t=$(curl -sf -o /dev/null -w '%{time_total}' "localhost:$port/v1/completions" -H 'Content-Type: application/json' -d "$body")
    echo "$t $(( $(computed) - before ))" >> "$work/$n.txt"
    printf '.' >&2
  done
done
echo >&2
median() { sort -n "$1" | awk '{ t[NR] = $1; c = $2 } END { print t[int((NR + 1) / 2)], c }'; }
read -r t1 c1 < <(median "$work/1.txt")
read -r t8 c8 < <(median "$work/8.txt")
printf 'n=1: %.1f ms to the first token, %d prompt tokens computed\n' "$(awk -v t="$t1" 'BEGIN { print t * 1000 }')" "$c1"
printf 'n=8: %.1f ms to the first token of all 8, %d prompt tokens computed (%.2fx the time of n=1)\n' \
  "$(awk -v t="$t8" 'BEGIN { print t * 1000 }')" "$c8" "$(awk -v a="$t8" -v b="$t1" 'BEGIN { print a / b }')"
