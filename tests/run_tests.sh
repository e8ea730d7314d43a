#!/bin/sh
# Runs each test given as an argument, then prints one summary line over all
# of them. Exits non-zero if any failed or crashed. The cmocka binaries run
# TEST_JOBS at a time (default: one per CPU; each uses its own temporary
# files); their outputs are printed whole, in order. Shell suites (*.sh: the
# tmux tests, which time their waits) run after them, one at a time.
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
out=$(mktemp -d "${TMPDIR:-/tmp}/gptscope-tests.XXXXXX")
trap 'rm -rf "$out"' EXIT
bins=""; suites=""
for t in "$@"; do case $t in *.sh) suites="$suites $t" ;; *) bins="$bins $t" ;; esac; done
# each binary: its output and exit status under its own name
[ -n "$bins" ] && printf '%s\n' $bins | xargs -P "$jobs" -I{} sh -c \
    'n=$(echo "$1" | tr / _); "$1" > "$2/$n.out" 2>&1; echo $? > "$2/$n.rc"' sh {} "$out"
n_pass=0; n_fail=0; n_skip=0; bad=""
tally() { # name output-file status
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
    k=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
    n_pass=$((n_pass + ${p:-0})); n_fail=$((n_fail + ${f:-0})); n_skip=$((n_skip + ${k:-0}))
    if [ "$3" -ne 0 ] && [ -z "$f" ]; then n_fail=$((n_fail + 1)); fi
    [ "$3" -ne 0 ] && bad="$bad $1"
}
for t in $bins; do
    n=$(echo "$t" | tr / _)
    echo "== $t"; cat "$out/$n.out"
    tally "$t" "$out/$n.out" "$(cat "$out/$n.rc" 2>/dev/null || echo 1)"
done
for t in $suites; do
    echo "== $t"
    sh "$t" > "$out/suite.out" 2>&1; rc=$?
    cat "$out/suite.out"
    tally "$t" "$out/suite.out" $rc
done
echo
[ -n "$bad" ] && echo "failing:$bad"
echo "$n_pass passed, $n_fail failed, $n_skip skipped"
[ -z "$bad" ]
