#!/usr/bin/env bash
# Starts `tessera serve` on a free port, waits for it, runs official `openai` npm client
# tests against it (node --test), and stops the server.
# Exit 77 (ctest: skipped) when node, the npm packages or the model's source are absent.
# Usage: run_openai_client_test.sh TESSERA_BINARY SHARED_DIR NPM_DIR [TEST_FILE [SYNTH_ARGS]]
#   TEST_FILE   beside this script; default openai_client.test.mjs (stories260K from SHARED_DIR)
#   SYNTH_ARGS  `tessera synth` flags: serve a model written with them instead; "@npm/" in
#               them stands for NPM_DIR/node_modules/ (a donor tokenizer)
set -euo pipefail
bin=$(realpath -m "$1") shared=$(realpath -m "$2") npm_dir=$(realpath -m "$3")
test_file=${4:-openai_client.test.mjs} synth_args=${5:-}
model=$shared/models/stories260K.gguf
here=$(cd "$(dirname "$0")" && pwd)

command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$npm_dir/node_modules/openai" ] || { echo "SKIP: no openai package; run npm ci --prefix tests/npm"; exit 77; }

out=$(mktemp) err=$(mktemp) work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; rm -rf "$out" "$err" "$work"' EXIT
if [ -n "$synth_args" ]; then
  model=$work/model.gguf
  # shellcheck disable=SC2086 # the flags are words
  "$bin" synth "$model" ${synth_args//@npm\//$npm_dir/node_modules/} 2>>"$err" || { cat "$err"; exit 1; }
fi
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 77; }

"$bin" serve -m "$model" --port 0 -t 1 --api-key test-key >"$out" 2>>"$err" &
pid=$!

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
  node --test "$here/$test_file" || { echo "server log:"; tail -50 "$err"; exit 1; }
