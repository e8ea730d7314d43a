#!/bin/sh
# check-bench-probe.sh — checks `gptscope bench`'s two machine probes against
# an independent measurement (tests/ref/machine_limits.c: OpenMP, integer
# sums, GCC vector FMAs): ROUNDS rounds (default 5) alternating
# `gptscope bench --machine --json` and machine_limits on as many threads,
# then each pair's ratio. Agreement within a few percent on a host is what
# lets bench's decode and prefill ratios stand there (docs/performance.md).
#   sh scripts/check-bench-probe.sh [ROUNDS] [THREADS]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-5}
threads=${2:-$(getconf _NPROCESSORS_ONLN)}
bin=${GPTSCOPE_BIN:-./gptscope}
[ -x "$bin" ] || { echo "check-bench-probe: $bin not built (make)" >&2; exit 1; }
mkdir -p build
cc -O3 -march=native -fopenmp -ffp-contract=fast tests/ref/machine_limits.c -o build/machine_limits
echo "round  bench read GB/s  independent  ratio   bench peak GFLOP/s  independent  ratio"
i=1
while [ "$i" -le "$rounds" ]; do
    b=$("$bin" bench --machine --json --threads "$threads")
    r=$(OMP_NUM_THREADS=$threads build/machine_limits)
    python3 -c '
import json, sys
b, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rd = b["machine_read_gb_s"]
rr = "%.3f" % (rd / r["read_gb_s"]) if rd else "unsteady"
print("%5s  %15s  %11.2f  %5s   %18.1f  %11.1f  %.3f" % (sys.argv[3], rd if rd else "-", r["read_gb_s"], rr,
      b["machine_peak_gflops"], r["peak_gflops"], b["machine_peak_gflops"] / r["peak_gflops"]))
' "$b" "$r" "$i"
    i=$((i + 1))
done
