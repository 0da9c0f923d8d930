#!/usr/bin/env bash
# The SDK as a vendor sees it: install Tessera into a temporary prefix, build the
# templates out of tree with only -DCMAKE_PREFIX_PATH (and once with pkg-config), run the
# installed conformance kit on them, then generate text with the example backend through
# a config file and check it equals the CPU backend's (the stories260K greedy reference).
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR SHARED_DIR
set -euo pipefail
BUILD=$1 SRC=$2 SHARED=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix

echo "== install into $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null

for kind in backend draft; do
  echo "== build sdk/templates/$kind out of tree"
  cmake -S "$SRC/sdk/templates/$kind" -B "$WORK/$kind" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
  cmake --build "$WORK/$kind" >/dev/null
  "$PREFIX/bin/tessera-conformance" "$WORK/$kind/libtessera_${kind}_example.so" --gtest_brief=1
done

echo "== build the draft template with pkg-config instead of CMake"
mkdir -p "$WORK/pc"
PKG_CONFIG_PATH=$(dirname "$(find "$PREFIX" -name tessera-plugin.pc)")
# shellcheck disable=SC2046  # the flags are meant to split
c++ -std=c++20 -O1 -shared -fPIC -Wl,--no-undefined \
  $(PKG_CONFIG_PATH=$PKG_CONFIG_PATH pkg-config --cflags tessera-plugin) \
  "$SRC/sdk/templates/draft/example_draft.cpp" -o "$WORK/pc/libtessera_draft_example.so"
"$PREFIX/bin/tessera-conformance" "$WORK/pc/libtessera_draft_example.so" --gtest_brief=1

MODEL=$SHARED/models/stories260K.gguf
REF=$SHARED/models/reference/stories260K.ref.jsonl
if [[ ! -f $MODEL || ! -f $REF ]]; then
  echo "skipping text generation: $MODEL or $REF is missing"
  exit 77
fi

echo "== generate with the example backend loaded through a config file"
cat > "$WORK/cfg.toml" <<TOML
plugin_dir = "$WORK/backend"

[model]
path = "$MODEL"

[backend]
plugin = "example"
TOML
PROMPT="Once upon a time"
example=$("$PREFIX/bin/tessera" run -c "$WORK/cfg.toml" -m "$MODEL" -p "$PROMPT" -n 20 --temp 0)
cpu=$("$PREFIX/bin/tessera" run -m "$MODEL" -p "$PROMPT" -n 20 --temp 0)
reference=$(jq -r --arg p "$PROMPT" 'select(.prompt == $p) | .greedy_text' "$REF")
echo "example backend: $example"
echo "cpu backend:     $cpu"
[[ $example == "$cpu" ]] || { echo "FAIL: the example backend's text differs from the CPU backend's"; exit 1; }
[[ -n $cpu && $reference == "$cpu"* ]] || { echo "FAIL: not a prefix of the reference greedy text"; exit 1; }
echo "OK: identical, and a prefix of the reference greedy text"
