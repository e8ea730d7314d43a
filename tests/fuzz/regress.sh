#!/bin/sh
# regress.sh — `make test`'s run of the fuzz harnesses, built without libFuzzer
# (standalone_main.c, the project's compiler and flags, ASan/UBSan under SAN=1):
# each over its regression inputs, tests/fuzz/regress/NAME/, and its seeds
# (gen_seeds.py; FUZZ_N_SEEDS=N takes the first N of each: all of them, 130
# inputs, take under 2 s with ASan). Prints each harness's cmocka lines, then a
# total that tests/run_tests.sh counts. Usage, from `make test`:
#   FUZZ_BIN_DIR=build/tests/fuzz FUZZ_SEEDS=build/tests/fuzz/seeds sh tests/fuzz/regress.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BIN=${FUZZ_BIN_DIR:-build/tests/fuzz}
SEEDS=${FUZZ_SEEDS:-build/tests/fuzz/seeds}
N_SEEDS=${FUZZ_N_SEEDS:-0}
export OPENBLAS_NUM_THREADS=1
pass=0; fail=0; bad=""
for n in safetensors shards config vocab merges encode session template theme checkpoint zip pickle llmc gguf tokjson jinja; do
    args=""
    [ -d tests/fuzz/regress/$n ] && args=tests/fuzz/regress/$n
    [ -d "$SEEDS/$n" ] && args="$args -n $N_SEEDS $SEEDS/$n"
    echo "== fuzz_$n"
    out=$("$BIN/fuzz_$n" $args 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
    if [ $rc -ne 0 ]; then
        bad="$bad fuzz_$n"
        [ -z "$f" ] && fail=$((fail + 1)) # it died before its summary
    fi
done
echo "[==========] fuzz regression inputs and seeds: $((pass + fail)) test(s) run."
echo "[  PASSED  ] $pass test(s)."
if [ -n "$bad" ]; then
    echo "[  FAILED  ] $fail test(s), in:$bad"
    exit 1
fi
