#!/usr/bin/env bash
# Runs each hostile-client attack of issue 25 (bench/attack.mjs) against a live
# `tessera serve` on loopback, bounded in time: the crash reproducers, 1,000 slowloris
# sockets, half-close and pipelining, the amplification request, 100 distinct 1 MB
# constraints and a 10 MB prompt, costly schema compiles. One PASS/FAIL line per check,
# with its numbers; exit status 1 when any failed. On a synth 110m model with
# stories260K's vocabulary (MODEL=path to use another).
#   ATTACKS=slowloris,memory bench/attack.sh   # a subset
#   EXTRA_TOML=$'[scheduler]\nmax_seqs_per_call = 8' bench/attack.sh   # other settings
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
CACHE_MEMORY=${CACHE_MEMORY:-268435456}
[ -x build/bin/tessera ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build; }
work=$(mktemp -d)
port=${PORT:-18451}
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
model=${MODEL:-}
if [ -z "$model" ]; then
  echo "attack: writing the synth 110m model" >&2
  model="$work/m110.gguf"
  build/bin/tessera synth "$model" --preset 110m --donor "$SHARED/models/stories260K.gguf" 2>/dev/null
fi
cat > "$work/serve.toml" <<TOML
[model]
path = "$model"
[backend]
threads = 2
[constraints]
cache_memory = $CACHE_MEMORY
[server]
port = $port
${EXTRA_TOML:-}
TOML
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)"
build/bin/tessera serve --config "$work/serve.toml" >/dev/null 2>"$work/serve.log" &
pid=$!
for _ in $(seq 300); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
timeout 600 node bench/attack.mjs "$port" "$pid" "$CACHE_MEMORY"
