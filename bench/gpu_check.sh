#!/usr/bin/env bash
# The GPU check of issue 9, in one go, from the repository root of a machine with an NVIDIA
# GPU and the CUDA toolkit (no internet, no ../shared needed):
#
#   1. configure and build (Release, CUDA on, tests on; only the targets used here);
#   2. synthesize the models on the machine (`tessera synth`, built-in byte vocabulary);
#   3. gpu_backend_test: ops against the CPU backend and the model-level checks (greedy ids
#      and top logits against the CPU backend, decode graphs against eager steps) on a small
#      F32 model, with cuBLAS and again with TESSERA_GPU_NO_BLAS=1 (the GEMM kernels the
#      HIP backend uses), then the model-level checks on a 1.1B-shaped F32 model;
#   4. the SDK conformance kit on the CUDA plugin, the CPU plugin as reference;
#   5. `tessera bench` on the CUDA backend, decode graphs on and off: pp512, tg128 (against
#      the roofline of the device's copy bandwidth, measured with PyTorch when present),
#      batched decode B=1,4,16 (the engine benchmark's sizes), and B=64 through the serving
#      benchmark at concurrency 64, on a 1B-shaped Q8_0 model (and the 8B shape with
#      GPU_CHECK_8B=1, time allowing).
#
# Sized to finish in about 5 minutes on 16 cores and an H200. With $OUT set, the report is
# $OUT/gpu_report.md and the logs go beside it; otherwise into build-gpucheck/out.
#
# TESSERA_GPU_CHECK_BUILD=DIR skips steps 1's configure and build and uses the build in DIR,
# e.g. one unpacked from bench/gpu_bundle.sh on a machine without this project's Debian
# libraries (DIR/libs, when there, joins LD_LIBRARY_PATH, with the CUDA toolkit's libraries).
# Exit status: the number of failed steps (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${TESSERA_GPU_CHECK_BUILD:-build-gpucheck}
OUT_DIR=${OUT:-$BUILD/out}
MODELS=$BUILD/models
JOBS=$(nproc)
mkdir -p "$OUT_DIR" "$MODELS"
REPORT=$OUT_DIR/gpu_report.md
T0=$(date +%s)
FAILED=0
ROWS=()

log() { echo "[gpu_check +$(($(date +%s) - T0))s] $*" >&2; }

# step NAME TIMEOUT_S COMMAND...: runs with a time limit, logs to $OUT_DIR/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  log "$name"
  local t=$(date +%s)
  timeout "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  local result=PASS
  if [ $rc -ne 0 ]; then
    result="FAIL (rc $rc$([ $rc -eq 124 ] && echo ', timed out'))"
    FAILED=$((FAILED + 1))
    tail -20 "$OUT_DIR/$name.log" >&2
  fi
  ROWS+=("| $name | $result | $(($(date +%s) - t)) s |")
  return $rc
}

# The value of "key" in the JSON object on the last line of a log.
json_field() { tail -1 "$1" | grep -o "\"$2\":[^,}]*" | head -1 | cut -d: -f2; }

if [ -n "${TESSERA_GPU_CHECK_BUILD:-}" ]; then
  # A bundle's libraries, then the CUDA runtime and cuBLAS wherever the toolkit keeps them.
  CUDA_LIBS=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.*' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$BUILD/libs:$CUDA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  log "prebuilt $BUILD; CUDA libraries from $CUDA_LIBS"
else
  step configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_BUILD_TESTS=ON -DTESSERA_CUDA=ON -DTESSERA_HIP=OFF
  step build 300 ninja -C "$BUILD" -j"$JOBS" tessera tessera_backend_cpu tessera_backend_cuda \
    gpu_backend_test tessera-conformance || { log "build failed"; }
fi

BIN=$BUILD/bin
if [ -x "$BIN/tessera" ]; then
  # A small F32 model for the model-level check (F32 keeps both backends exact to ~1e-6),
  # and the benchmark models.
  step synth_small 60 "$BIN/tessera" synth "$MODELS/small-f32.gguf" --preset tiny --dim 256 \
    --layers 4 --heads 8 --kv-heads 2 --ffn 512 --donor bytes --vocab 260 --type f32
  step synth_1b_q8_0 120 "$BIN/tessera" synth "$MODELS/1b-q8_0.gguf" --preset 1b --donor bytes \
    --vocab 260 --type q8_0
  step synth_1b_f32 120 "$BIN/tessera" synth "$MODELS/1b-f32.gguf" --preset 1b --donor bytes \
    --vocab 260 --type f32
  if [ "${GPU_CHECK_8B:-0}" = 1 ]; then
    step synth_8b_q8_0 240 "$BIN/tessera" synth "$MODELS/8b-q8_0.gguf" --preset 1b --dim 4096 \
      --layers 32 --heads 32 --kv-heads 8 --ffn 14336 --donor bytes --vocab 260 --type q8_0
  fi
fi

TEST=$BUILD/tests/gpu_backend_test
if [ -x "$TEST" ]; then
  # Not --gtest_brief: the summary must list skipped tests (checked below).
  TESSERA_GPU_TEST_MODEL=$MODELS/small-f32.gguf step gpu_backend_test 120 "$TEST"
  TESSERA_GPU_NO_BLAS=1 TESSERA_GPU_TEST_MODEL=$MODELS/small-f32.gguf \
    step gpu_backend_test_no_blas 120 "$TEST" --gtest_brief=1 --gtest_filter='*Matmul*:*Model*'
  # The model-level checks again on the 1.1B shape (F32, so that both backends compute
  # exactly enough to compare top logits at 1e-3).
  TESSERA_GPU_TEST_MODEL=$MODELS/1b-f32.gguf step gpu_model_test_1b 300 "$TEST" \
    --gtest_filter='Gpu/GpuModelTest.*/cuda'
  # The ops tests must have run, not skipped for want of a device.
  if grep -q "SKIPPED .*GpuOpTest.*/cuda" "$OUT_DIR/gpu_backend_test.log"; then
    log "gpu_backend_test skipped the op tests: no device?"
    FAILED=$((FAILED + 1))
    ROWS+=("| device seen by the tests | FAIL | - |")
  fi
fi
LIB=$BUILD/lib/tessera
if [ -x "$BIN/tessera-conformance" ]; then
  step conformance_cuda 120 "$BIN/tessera-conformance" "$LIB/libtessera_backend_cuda.so" \
    --reference "$LIB/libtessera_backend_cpu.so" --gtest_brief=1
  TESSERA_GPU_NO_BLAS=1 step conformance_cuda_no_blas 120 "$BIN/tessera-conformance" \
    "$LIB/libtessera_backend_cuda.so" --reference "$LIB/libtessera_backend_cpu.so" --gtest_brief=1
fi

# The device's copy bandwidth (bytes read + written per second), measured here with
# PyTorch when it is installed: the roofline of a decode step that reads every weight once.
GPU_BW=$(python3 - 2>/dev/null <<'PY'
import torch
a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): b.copy_(a)
e.record(); torch.cuda.synchronize()
print(f"{2 * 10 * a.numel() / (s.elapsed_time(e) / 1e3):.4g}")
PY
)
log "device copy bandwidth: ${GPU_BW:-unknown} B/s"

# bench MODEL TAG: engine benchmark with decode graphs on and off, and B=64 serving (graphs
# on) on the CUDA backend.
BENCH_ROWS=()
bench() {
  local model=$1 tag=$2
  [ -f "$model" ] || return
  for graphs in on off; do
    printf '[model]\npath = "%s"\n\n[backend]\nplugin = "cuda"\ngraphs = "%s"\n\n[cache]\nmemory = "16GiB"\n\n[scheduler]\nmax_seqs = 64\n' \
      "$model" "$graphs" > "$OUT_DIR/bench-$tag-$graphs.toml"
    step "bench_${tag}_graphs_$graphs" 150 "$BIN/tessera" bench --config "$OUT_DIR/bench-$tag-$graphs.toml" --reps 2 --json
  done
  step "bench_${tag}_b64" 150 "$BIN/tessera" bench --serving --config "$OUT_DIR/bench-$tag-on.toml" \
    --requests 128 --concurrency 64 --prefix-len 64 --suffix-len 16 --max-tokens 64 --json
  local s=$OUT_DIR/bench_${tag}_b64.log
  for graphs in on off; do
    local e=$OUT_DIR/bench_${tag}_graphs_$graphs.log
    local roof=-
    if [ -n "$GPU_BW" ] && [ -n "$(json_field "$e" step_read_bytes)" ]; then
      roof=$(awk -v bw="$GPU_BW" -v w="$(json_field "$e" step_read_bytes)" -v t="$(json_field "$e" tg128_tok_s)" \
        'BEGIN { printf "%.0f (%.1f %%)", bw / w, 100 * t * w / bw }')
    fi
    BENCH_ROWS+=("| $tag | $graphs | $(json_field "$e" pp512_tok_s) | $(json_field "$e" tg128_tok_s) | $roof | $(json_field "$e" b1_tok_s) | $(json_field "$e" b4_tok_s) | $(json_field "$e" b16_tok_s) | $([ $graphs = on ] && json_field "$s" throughput_tok_s) |")
  done
}
if [ -x "$BIN/tessera" ]; then
  bench "$MODELS/1b-q8_0.gguf" 1b-q8_0
  [ "${GPU_CHECK_8B:-0}" = 1 ] && bench "$MODELS/8b-q8_0.gguf" 8b-q8_0
fi

{
  echo "# GPU check ($(date -u +%FT%TZ), $(($(date +%s) - T0)) s)"
  echo
  echo "Commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' + local changes')."
  echo "Device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi unavailable')."
  echo
  echo "| step | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "## tessera bench, CUDA backend (tokens/s)"
  echo
  echo "Synthetic models, built-in 260-token vocabulary (so the output head is smaller than a"
  echo "32000-token model's). B=64 is the serving benchmark at concurrency 64 (64 prompt"
  echo "tokens, 64 generated per request); the others come from the engine benchmark."
  echo
  echo "Roofline: the device copy bandwidth (${GPU_BW:-unknown} B/s, measured in this run) over"
  echo "the bytes of weights a decode step reads; in parentheses tg128 as a share of it."
  echo
  echo "| model | graphs | pp512 | tg128 | roofline | B=1 | B=4 | B=16 | B=64 (serving) |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${BENCH_ROWS[@]}"
  echo
  echo "Logs: $OUT_DIR/*.log"
} > "$REPORT"
cat "$REPORT"
exit "$FAILED"
