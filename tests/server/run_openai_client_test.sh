#!/usr/bin/env bash
# Starts `tessera serve` on a free port with stories260K, waits for /health, runs the
# official `openai` npm client tests against it (node --test), and stops the server.
# Exit 77 (ctest: skipped) when node, the npm packages or the shared model are absent.
# Usage: run_openai_client_test.sh TESSERA_BINARY SHARED_DIR NPM_DIR
set -euo pipefail
bin=$(realpath -m "$1") shared=$(realpath -m "$2") npm_dir=$(realpath -m "$3")
model=$shared/models/stories260K.gguf
here=$(cd "$(dirname "$0")" && pwd)

command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$npm_dir/node_modules/openai" ] || { echo "SKIP: no openai package; run npm ci --prefix tests/npm"; exit 77; }
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 77; }

out=$(mktemp) err=$(mktemp)
"$bin" serve -m "$model" --port 0 -t 1 --api-key test-key >"$out" 2>"$err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$out" "$err"' EXIT

# `serve --port 0` prints the port it bound once it accepts connections.
port=""
for _ in $(seq 300); do
  port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$out")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "tessera serve exited:"; cat "$err"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "tessera serve did not start:"; cat "$err"; exit 1; }

TESSERA_URL="http://127.0.0.1:$port" TESSERA_API_KEY=test-key TESSERA_NPM_DIR="$npm_dir" TESSERA_MODEL_PATH="$model" \
  node --test "$here/openai_client.test.mjs" || { echo "server log:"; tail -50 "$err"; exit 1; }
