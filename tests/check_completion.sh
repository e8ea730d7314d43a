#!/bin/bash
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
# check_completion.sh: completions/gptscope in bash, against the binary's own
# --help: commands by prefix, every option of a command, values of the options
# that take a fixed set, files after -m. Prints cmocka-style lines.
cd "$(dirname "$0")/.." || exit 1
BIN=${GPTSCOPE_BIN:-$PWD/gptscope}
command -v bash >/dev/null || { echo "[  PASSED  ] 0 test(s)."; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/gptscope-compl.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ln -s "$BIN" "$dir/gptscope"
mkdir -p "$dir/w/models/alpha" "$dir/w/models/beta"
pass=0; fail=0
source completions/gptscope
comp() { # the words typed, the last one being completed: prints COMPREPLY sorted, one line
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
    (cd "$dir/w" && PATH="$dir:$PATH" _gptscope && printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
}
expect() { # NAME WANT GOT
    if [ "$2" = "$3" ]; then pass=$((pass + 1)); echo "[       OK ] $1"
    else fail=$((fail + 1)); echo "[  FAILED  ] $1"; echo "    want: $2"; echo "    got:  $3"; fi
}
expect "commands by prefix" "train train-tokenizer " "$(comp gptscope tr)"
cmds=$("$BIN" --help | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p' | sort | tr '\n' ' ')
expect "every command, and --help, --version" "$(printf '%s\n' $cmds --help --version | sort | tr '\n' ' ')" "$(comp gptscope '')"
for c in heads generate train bench; do
    want=$("$BIN" $c --help 2>&1 | grep -oE -- '(^|[ [(,|])--[a-z][a-z0-9-]*' | sed 's/^[ [(,|]//' | sort -u | tr '\n' ' ')
    got=$(comp gptscope $c -p x --)
    expect "$c: every option of its --help ($(echo $want | wc -w))" "$want" "$got"
done
expect "--sort: the score names" "entropy first_token induction layer prev_token self " "$(comp gptscope heads --sort '')"
expect "--quantize: q8 q4" "q4 q8 " "$(comp gptscope generate --quantize '')"
expect "-m: files and directories" "models/alpha models/beta " "$(comp gptscope generate -m models/)"
expect "options without a command: the chat's" "--theme --threads " "$(comp gptscope -m models/alpha --th)"
expect "heads: its options, written out here" "--ablate --export --force --json --sort --special --threads " \
    "$(comp gptscope heads --)"
echo "[==========] completion: $((pass + fail)) checks"
echo "[  PASSED  ] $pass test(s)."
[ $fail -eq 0 ] || { echo "[  FAILED  ] $fail test(s)."; exit 1; }
