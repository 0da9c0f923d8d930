#!/usr/bin/env bash
# The SDK as a vendor sees it: install Tessera into a temporary prefix, build the
# templates and a third-party JSON Schema constraint plugin (acme_json, from
# third_party_json_schema/) out of tree with only -DCMAKE_PREFIX_PATH (and once with
# pkg-config), and run the installed conformance kit on them. Then, through config files:
# generate text with the example backend and check it equals the CPU backend's (the
# stories260K greedy reference); and generate under a JSON Schema with acme_json in place
# of the in-tree json_schema plugin, checking the output against the schema with jq; and
# generate with the quant template's scheme, whose weights only its own kernels read.
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR SHARED_DIR
set -euo pipefail
BUILD=$1 SRC=$2 SHARED=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix

echo "== install into $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null

# Builds the CMake project in $1 into $WORK/$2 against the installed SDK only.
build_out_of_tree() {
  cmake -S "$1" -B "$WORK/$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
  cmake --build "$WORK/$2" >/dev/null
}

for kind in backend draft constraint quant; do
  echo "== build sdk/templates/$kind out of tree"
  build_out_of_tree "$SRC/sdk/templates/$kind" "$kind"
  "$PREFIX/bin/tessera-conformance" "$WORK/$kind/libtessera_${kind}_example.so" --gtest_brief=1
done

echo "== build the third-party constraint plugin acme_json out of tree"
build_out_of_tree "$SRC/tests/sdk/third_party_json_schema" acme_json
"$PREFIX/bin/tessera-conformance" "$WORK/acme_json/libtessera_constraint_acme_json.so" --gtest_brief=1

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
example=$("$PREFIX/bin/tessera" run --config "$WORK/cfg.toml" -m "$MODEL" -p "$PROMPT" -n 20 --temp 0)
cpu=$("$PREFIX/bin/tessera" run -m "$MODEL" -p "$PROMPT" -n 20 --temp 0)
reference=$(jq -r --arg p "$PROMPT" 'select(.prompt == $p) | .greedy_text' "$REF")
echo "example backend: $example"
echo "cpu backend:     $cpu"
[[ $example == "$cpu" ]] || { echo "FAIL: the example backend's text differs from the CPU backend's"; exit 1; }
[[ -n $cpu && $reference == "$cpu"* ]] || { echo "FAIL: not a prefix of the reference greedy text"; exit 1; }
echo "OK: identical, and a prefix of the reference greedy text"

echo "== generate under constraints with acme_json in place of the in-tree json_schema"
cat > "$WORK/constraints.toml" <<TOML
plugin_dir = "$WORK/acme_json"

[model]
path = "$MODEL"

[constraints]
plugins = ["acme_json", "regex"]
TOML
run_constrained() {
  "$PREFIX/bin/tessera" run --config "$WORK/constraints.toml" -m "$MODEL" -p "$PROMPT" -n 200 --temp 0 "$@"
}
SCHEMA='{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},
  "pet":{"enum":["cat","dog","fish"]},"happy":{"type":"boolean"}},"required":["name","age","pet","happy"]}'
json=$(run_constrained -j "$SCHEMA")
echo "acme_json: $json"
jq -e '(keys_unsorted == ["name", "age", "pet", "happy"])
       and (.name | type == "string" and length <= 12)
       and (.age | type == "number" and . == floor)
       and (.pet | IN("cat", "dog", "fish"))
       and (.happy | type == "boolean")' <<<"$json" >/dev/null \
  || { echo "FAIL: the output does not satisfy the schema"; exit 1; }
# acme_json refuses arrays, which the in-tree json_schema compiles: proof of who served it.
if refusal=$(run_constrained -j '{"type":"array"}' 2>&1); then
  echo "FAIL: an array schema compiled: acme_json did not serve json_schema"; exit 1
fi
[[ $refusal == *"type 'array'"* ]] || { echo "FAIL: acme_json's refusal not reported: $refusal"; exit 1; }
# The second plugin of the list serves the kinds acme_json does not.
text=$(run_constrained --regex 'The (cat|dog) [a-z]{3,8}\.')
echo "regex:     $text"
[[ $text =~ ^The\ (cat|dog)\ [a-z]{3,8}\.$ ]] || { echo "FAIL: the output does not match the regex"; exit 1; }
echo "OK: acme_json served json_schema and its output satisfies the schema; regex came next"

echo "== generate with the quant template's scheme 'example' loaded through a config file"
cat > "$WORK/quant.toml" <<TOML
plugin_dir = "$WORK/quant"

[model]
path = "$MODEL"

[quant]
scheme = "example"

[log]
level = "info"
TOML
quant=$("$PREFIX/bin/tessera" run --config "$WORK/quant.toml" -m "$MODEL" -p "$PROMPT" -n 20 --temp 0 2>"$WORK/quant.log") \
  || { cat "$WORK/quant.log"; echo "FAIL: generation failed"; exit 1; }
echo "example scheme: $quant"
# The load log proves the template's scheme converted the weights (so its kernels ran
# them: no backend reads TSR_DTYPE_PLUGIN).
grep -q "quant example: converted [1-9]" "$WORK/quant.log" \
  || { cat "$WORK/quant.log"; echo "FAIL: the example scheme converted no weights"; exit 1; }
# 8-bit weights change the logits a little, not the story: the text starts as the f32 one.
[[ ${quant:0:12} == "${cpu:0:12}" ]] || { echo "FAIL: the example scheme's text diverged at once"; exit 1; }
echo "OK: the template's scheme quantized the model and generated with its own kernels"

echo "== a C program against the installed libtessera.so (pkg-config tessera), plugins found from the library"
PC_DIR=$(dirname "$(find "$PREFIX" -name tessera.pc)")
LIBDIR=$(PKG_CONFIG_PATH=$PC_DIR pkg-config --variable=libdir tessera)
# shellcheck disable=SC2046  # the flags are meant to split
cc -std=c99 -O1 -Wall -Werror -DTESSERA_SHARED_DIR="\"$SHARED\"" "$SRC/tests/abi/engine_c_test.c" \
  $(PKG_CONFIG_PATH=$PC_DIR pkg-config --cflags --libs tessera) -Wl,-rpath,"$LIBDIR" -o "$WORK/engine_c_app"
# No plugin_dir and no TESSERA_PLUGIN_PATH: libtessera.so looks beside itself.
env -u TESSERA_PLUGIN_PATH "$WORK/engine_c_app"
[[ -f $LIBDIR/tessera/libtessera_backend_cpu.so ]] || { echo "FAIL: plugins are not in $LIBDIR/tessera"; exit 1; }
echo "OK: the installed C API generated the reference text"
