#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input with libFuzzer (clang, ASan+UBSan):
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]   (default 60 s; all targets)
# Each target starts from fuzz/corpus/<target> and grows its own corpus in
# build-fuzz/corpus/<target>; a crash leaves its input in build-fuzz/artifacts/<target>/
# and ends the script with status 1. Add such an input to fuzz/corpus/<target>/ with the
# fix: ctest replays that corpus in every build (fuzz_corpus.<target>).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf model tokenizer config request request_constraint grammar chat_template)

command -v clang++ > /dev/null || { echo "fuzz.sh needs clang (apt-get install clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_CUDA=OFF -DTESSERA_HIP=OFF > /dev/null
cmake --build build-fuzz -j "${JOBS:-$(nproc)}" --target "${targets[@]/%/_fuzz}"

status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/artifacts/$t"
  echo "== $t: ${seconds} s"
  seeds=("fuzz/corpus/$t")
  [ "$t" != chat_template ] || seeds+=(core/chat/testdata)  # real models' templates
  [ "$t" != model ] || seeds+=(fuzz/corpus/gguf)
  [ "$t" != config ] || seeds+=(configs)
  if ! "build-fuzz/fuzz/${t}_fuzz" "build-fuzz/corpus/$t" "${seeds[@]}" -max_total_time="$seconds" \
      -rss_limit_mb=4096 -timeout=20 -artifact_prefix="build-fuzz/artifacts/$t/" -print_final_stats=1 \
      2> "build-fuzz/$t.log"; then
    echo "   crash: see build-fuzz/$t.log and build-fuzz/artifacts/$t/"
    status=1
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added)' "build-fuzz/$t.log" | sed 's/^/   /' || true
done
exit $status
