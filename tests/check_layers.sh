#!/bin/sh
# check_layers.sh — the layers include only what they may, read off the
# #include lines of the tree:
#   include/      public headers: only each other (and system headers)
#   src/core      the library: its own private headers, never train/cli/ui
#   src/train     the library's trainers: core's private headers allowed
#                 (src/core and src/train together are libgpt2)
#   src/cli, src/main.c   public headers, cli/, ui/ (the commands drive the chat) and viz/
#   src/ui        public headers, ui/ and viz/ only: never cli/, core/ or train/
#   src/viz       the exports and pictures (no curses): public headers and viz/ only
# Prints one cmocka-style line per rule and a total for tests/run_tests.sh.
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0
# rule NAME FILES... -- ALLOWED-REGEX: every quoted include must match
rule() {
    name=$1; shift
    files=""; while [ "$1" != "--" ]; do files="$files $1"; shift; done; shift
    allowed=$1
    bad=$(grep -Hn '^#include "' $files 2>/dev/null | grep -Ev "#include \"($allowed)\"")
    if [ -z "$bad" ]; then pass=$((pass + 1)); echo "[       OK ] $name"
    else fail=$((fail + 1)); echo "[  FAILED  ] $name:"; echo "$bad" | sed 's/^/    /'; fi
}
rule "include/ uses only public headers" include/*.h -- 'gpt2[a-z_]*\.h'
rule "src/core stays inside the library" src/core/*.c src/core/*.h -- 'gpt2[a-z_]*\.h|[a-z_0-9]+\.h'
rule "src/train uses the library only" src/train/*.c src/train/*.h -- 'gpt2[a-z_]*\.h|core/[a-z_0-9]+\.h|train/[a-z_0-9]+\.h'
rule "src/cli uses public headers, cli/, ui/ and viz/" src/cli/*.c src/cli/*.h src/main.c -- 'gpt2[a-z_]*\.h|cli/[a-z_0-9]+\.h|ui/[a-z_0-9]+\.h|viz/[a-z_0-9]+\.h'
rule "src/ui uses public headers, ui/ and viz/" src/ui/*.c src/ui/*.h -- 'gpt2[a-z_]*\.h|ui/[a-z_0-9]+\.h|viz/[a-z_0-9]+\.h'
rule "src/viz uses public headers and viz/" src/viz/*.c src/viz/*.h -- 'gpt2[a-z_]*\.h|viz/[a-z_0-9]+\.h'
echo "[==========] layers: $pass rules"
if [ "$fail" -eq 0 ]; then echo "[  PASSED  ] $pass test(s)."; else echo "[  PASSED  ] $pass test(s)."; echo "[  FAILED  ] $fail test(s)."; fi
[ "$fail" -eq 0 ]
