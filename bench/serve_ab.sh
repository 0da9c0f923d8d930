#!/usr/bin/env bash
# Two `tessera` builds served in turn on one model, `tessera bench --url` against each at
# concurrency 1, 16 and 256, ROUNDS rounds alternating (A, B, A, B, ...) in one run so
# that the machine's noise falls on both; prints each level's median tok/s and TTFT p50
# per build and B's ratio to A. For a change to the server: A the old binary, B the new.
#   bench/serve_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR   (each with bin/tessera and lib/tessera)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR" >&2; exit 2; }
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-256}
MODEL=${MODEL:-$SHARED/models/stories260K.gguf}
port=${PORT:-18461}
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
ulimit -n 8192 2>/dev/null || true
run() {  # build-dir label round
  "$1/bin/tessera" serve -m "$MODEL" --port "$port" -t 1 >/dev/null 2>"$work/serve.log" &
  pid=$!
  for _ in $(seq 100); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.1; done
  "$1/bin/tessera" bench --url "http://127.0.0.1:$port" --concurrency 1,16,256 --requests "$REQUESTS" 2>/dev/null |
    awk -v l="$2" '$1 ~ /^[0-9]+$/ { print l, $1, $5, $7 }' >> "$work/results.txt"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}
for round in $(seq "$ROUNDS"); do
  run "$1" A "$round"
  run "$2" B "$round"
  echo "round $round of $ROUNDS" >&2
done
python3 - "$work/results.txt" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
levels = sorted({int(r[1]) for r in rows})
print(f"{'concurrency':>11} {'A tok/s':>9} {'B tok/s':>9} {'B/A':>5} {'A ttft_p50':>10} {'B ttft_p50':>10} {'B/A':>5}")
for c in levels:
    get = lambda label, col: st.median(float(r[col]) for r in rows if r[0] == label and int(r[1]) == c)
    ta, tb, fa, fb = get("A", 2), get("B", 2), get("A", 3), get("B", 3)
    print(f"{c:>11} {ta:>9.1f} {tb:>9.1f} {tb/ta:>5.2f} {fa:>10.1f} {fb:>10.1f} {fb/fa:>5.2f}")
PY
