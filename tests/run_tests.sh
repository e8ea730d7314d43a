#!/bin/sh
# Runs each cmocka test binary given as an argument, then prints one summary
# line over all of them. Exits non-zero if any binary failed or crashed.
n_pass=0; n_fail=0; bad=""
for t in "$@"; do
    echo "== $t"
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    n_pass=$((n_pass + ${p:-0})); n_fail=$((n_fail + ${f:-0}))
    if [ $rc -ne 0 ] && [ -z "$f" ]; then n_fail=$((n_fail + 1)); fi
    [ $rc -ne 0 ] && bad="$bad $t"
done
echo
[ -n "$bad" ] && echo "failing binaries:$bad"
echo "$n_pass passed, $n_fail failed"
[ -z "$bad" ]
