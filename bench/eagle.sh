#!/usr/bin/env bash
# EAGLE-3 on stories260K: trains a head with `tessera train-eagle` (or takes HEAD=path),
# then through the server
#   1. acceptance: the 5 reference prompts and the 50 of bench/data/eagle_prompts.txt,
#      128 tokens each at B = 1, greedy and at temperature 0.8 (seeded), every step
#      drafting k = K tokens (adaptive off): mean tokens per verifying target pass
#      ((accepted + verifications) / verifications, from /metrics), and the acceptance rate;
#      for chains and for each tree budget of TREE (default "0 12": chains, then trees of
#      12 tokens, [speculative] tree_budget);
#   2. wall-clock: B clients (1, 4, 16) sending the reference prompts, 64 greedy tokens
#      each, with no speculation and with the head (the speculation gate on, as served),
#      chains and trees, tokens/s and the ratio to no speculation in the same run, over
#      ROUNDS measured rounds per concurrency (default 1; a round at B = 16 is about two
#      seconds of decoding, so a few rounds steady the ratio).
#   HEAD=head.gguf K=4 B="1 16" TREE="0 12" bench/eagle.sh
#   HEAD=head.gguf ACCEPTANCE=0 ROUNDS=5 bench/eagle.sh   # wall-clock only
#   HEAD=head.gguf K=6 SHARPNESS=1.4 bench/eagle.sh       # [speculative] draft_sharpness
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
B=${B:-1 4 16}
K=${K:-4}
TREE=${TREE:-0 12}
ROUNDS=${ROUNDS:-1}
ACCEPTANCE=${ACCEPTANCE:-1}
SHARPNESS=${SHARPNESS:-1.0}
model="$SHARED/models/stories260K.gguf"
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
head=${HEAD:-}
if [ -z "$head" ]; then
  head="$work/head.gguf"
  echo "bench: training a head (tessera train-eagle)" >&2
  build/bin/tessera train-eagle -m "$model" -o "$head" -t 2 >&2
fi
port=${PORT:-18491}
metric() { curl -sf "localhost:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# serve METHOD EXTRA: a server on $port with [speculative] method = METHOD (eagle-N: eagle
# with tree_budget = N).
serve() {
  local method=${1%%-*} tree=0
  [ "$method" != "$1" ] && tree=${1#*-}
  {
    printf '[speculative]\nmethod = "%s"\nnum_draft_tokens = %d\ntree_budget = %d\n' "$method" "$K" "$tree"
    [ "$method" = eagle ] && printf 'draft_model = "%s"\ndraft_sharpness = %s\n' "$head" "$SHARPNESS"
    printf '%s\n' "$2"
  } > "$work/$1.toml"
  build/bin/tessera serve -m "$model" -t 2 --config "$work/$1.toml" --port "$port" >/dev/null 2>"$work/$1.log" &
  pid=$!
  for _ in $(seq 150); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
}
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=""; port=$((port + 1)); }

# Bodies: the reference prompts (token ids) and ours (text), at a temperature.
bodies() {
  jq -c --argjson t "$1" '{prompt, max_tokens: 128, temperature: $t, seed: 7, ignore_eos: true}' \
    "$SHARED/models/reference/stories260K.ref.jsonl"
  jq -R -c --argjson t "$1" '{prompt: ., max_tokens: 128, temperature: $t, seed: 7, ignore_eos: true}' \
    bench/data/eagle_prompts.txt
}

[ "$ACCEPTANCE" = 1 ] && printf '%-5s %-6s %6s %10s %9s %s\n' tree temp prompts drafted accepted "tokens per verifying pass"
for tree in $TREE; do
[ "$ACCEPTANCE" = 1 ] || break
serve "eagle-$tree" "adaptive = false"
for t in 0 0.8; do
  bodies "$t" > "$work/acc.jsonl"
  d0=$(metric tessera_spec_draft_tokens_total); a0=$(metric tessera_spec_accepted_tokens_total)
  v0=$(metric tessera_spec_verifications_total)
  while read -r body; do
    curl -sf "localhost:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" >/dev/null
  done < "$work/acc.jsonl"
  d=$(( $(metric tessera_spec_draft_tokens_total) - d0 )); a=$(( $(metric tessera_spec_accepted_tokens_total) - a0 ))
  v=$(( $(metric tessera_spec_verifications_total) - v0 ))
  printf '%-5s %-6s %6d %10d %8.0f%% %.2f\n' "$tree" "$t" "$(wc -l < "$work/acc.jsonl")" "$d" \
    "$(awk -v a="$a" -v d="$d" 'BEGIN { print 100 * a / d }')" "$(awk -v a="$a" -v v="$v" 'BEGIN { print (a + v) / v }')"
done
stop
done

jq -c '{prompt, max_tokens: 64, temperature: 0, ignore_eos: true}' \
  "$SHARED/models/reference/stories260K.ref.jsonl" > "$work/speed.jsonl"
client() {
  local tokens=0 n
  while read -r body; do
    n=$(curl -sf "localhost:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" | jq '.usage.completion_tokens')
    tokens=$((tokens + n))
  done < "$work/speed.jsonl"
  echo "$tokens"
}
declare -A base
printf '\n%-9s %3s %8s %11s %7s\n' method B tokens tokens/s ratio
for method in none $(for t in $TREE; do echo "eagle-$t"; done); do
  serve "$method" ""
  for b in $B; do
    for i in $(seq "$b"); do client > /dev/null & done  # unmeasured: the gate samples first
    wait $(jobs -p | grep -v "^$pid$")
    start=$(date +%s.%N)
    for r in $(seq "$ROUNDS"); do
      for i in $(seq "$b"); do client > "$work/client.$r.$i" & done
      wait $(jobs -p | grep -v "^$pid$")
    done
    end=$(date +%s.%N)
    tokens=$(cat "$work"/client.* | awk '{ s += $1 } END { print s }')
    rm -f "$work"/client.*
    tps=$(awk -v n="$tokens" -v a="$start" -v e="$end" 'BEGIN { print n / (e - a) }')
    [ "$method" = none ] && base[$b]=$tps
    printf '%-9s %3d %8d %11.1f %6.2fx\n' "$method" "$b" "$tokens" "$tps" \
      "$(awk -v t="$tps" -v r="${base[$b]}" 'BEGIN { print t / r }')"
  done
  stop
done
