#!/bin/sh
# check_install.sh: `make install` into a DESTDIR, then the installed tree used
# as a user would: the binary from another directory finds the bundled model
# (and gives the same text as the build), the man page renders, the
# completion is there, the library exports only gpt2_ symbols, and the
# example program in docs/example builds against it with pkg-config and runs.
# `make uninstall` then leaves nothing. Prints cmocka-style lines.
cd "$(dirname "$0")/.." || exit 1
# the screens checked hold UTF-8 (box lines, arrows): a shell without a locale
# (a fresh container, su -) would have tmux and the chat draw them in ASCII
export LC_ALL=C.UTF-8
root=$PWD
BIN=${GPTSCOPE_BIN:-$root/gptscope}
san=; cflags=; case $BIN in */build-san/*) san=SAN=1; cflags=-fsanitize=address,undefined ;; esac
d=$(mktemp -d "${TMPDIR:-/tmp}/gptscope-install.XXXXXX")
trap 'rm -rf "$d"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "[       OK ] $1"; }
bad() { fail=$((fail + 1)); echo "[  FAILED  ] $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | head -20; }
check() { name=$1; shift; if "$@" > "$d/out" 2>&1; then ok "$name"; else bad "$name" "$d/out"; fi; }
P=$d/stage/usr/local
check "make install DESTDIR=... (PREFIX=/usr/local)" env -u MAKEFLAGS -u MAKELEVEL make -s install DESTDIR="$d/stage" $san
for f in bin/gptscope share/gptscope/models/shakespeare/model.safetensors share/gptscope/models/reverse/config.json \
         share/gptscope/themes/dark.theme share/gptscope/tokenizers/gpt2/vocab.bpe share/gptscope/tokenizers/gpt2/LICENSE \
         share/man/man1/gptscope.1 share/bash-completion/completions/gptscope \
         lib/libgpt2.a lib/pkgconfig/gpt2.pc include/gptscope/gpt2.h share/doc/gptscope/LICENSE; do
    check "installed: $f" test -s "$P/$f"
done
mkdir -p "$d/elsewhere"
cd "$d/elsewhere" || exit 1
"$BIN" generate -m "$root/models/shakespeare" -n 12 --temperature 0 -p ROMEO: > "$d/want" 2>&1
check "the installed binary, from another directory, finds the bundled model" \
    sh -c "'$P/bin/gptscope' generate -n 12 --temperature 0 -p ROMEO: > '$d/got' && cmp '$d/want' '$d/got'"
[ -e /usr/local/share/gptscope ] || check "a copy with no data anywhere says how to give a model" \
    sh -c "cp '$P/bin/gptscope' '$d/lone' && ! '$d/lone' topk -p hi 2> '$d/err'; grep -q 'give one with -m PATH or \$GPTSCOPE_MODEL' '$d/err'"
# nanoGPT's ckpt.pt for GPT-2's BPE has no tokenizer beside it (tests/ref/torch_real.py; needs python3-torch)
ng=${GPTSCOPE_FIXTURES:-$root/build/fixtures}/torch_real/nanogpt-bpe/ckpt.pt
if [ -f "$ng" ]; then
    mkdir -p out && cp "$ng" out/
    check "the installed binary reads a nanoGPT ckpt.pt with GPT-2's tokenizer it ships ('Hello, world' is 15496 11 995)" \
        sh -c "'$P/bin/gptscope' tokenize -m out/ckpt.pt --text 'Hello, world' | grep -qx '15496 11 995'"
    [ -e /usr/local/share/gptscope ] || check "a copy with no data refuses that file, saying what it lacks" \
        sh -c "! '$d/lone' tokenize -m out/ckpt.pt --text hi 2> '$d/err'; grep -q 'no GPT-2 tokenizer directory given' '$d/err'"
fi
if command -v man >/dev/null 2>&1; then
    check "man renders the installed page, DATADIR filled in" \
        sh -c "MANWIDTH=80 man -l '$P/share/man/man1/gptscope.1' 2>&1 | grep -q 'gptscope chat' && grep -q '/usr/local/share/gptscope' '$P/share/man/man1/gptscope.1'"
fi
check "libgpt2.a exports only gpt2_ symbols" \
    sh -c "nm -g --defined-only '$P/lib/libgpt2.a' | awk 'NF == 3 && \$3 !~ /^gpt2_/ {print; bad = 1} END {exit bad}'"
check "the example builds with pkg-config against the installed library" \
    sh -c "cc -std=c11 -Wall -Werror $cflags '$root/docs/example/greedy.c' -o '$d/greedy' \$(PKG_CONFIG_PATH='$P/lib/pkgconfig' pkg-config --define-variable=prefix='$P' --cflags --libs gpt2)"
check "the example runs: the greedy text gptscope gives" \
    sh -c "'$d/greedy' '$P/share/gptscope/models/shakespeare' ROMEO: 12 > '$d/ex' && head -c \$(wc -c < '$d/want' | tr -d ' ') '$d/ex' | cmp - '$d/want' && grep -q 'libgpt2 0\\.' '$d/ex'"
if command -v tmux >/dev/null 2>&1 && [ -x "$P/bin/gptscope" ] && "$P/bin/gptscope" chat --help >/dev/null 2>&1; then
    T="tmux -L gptscope-install-$$"
    $T new-session -d -s inst -x 100 -y 30 "cd '$d/elsewhere' && XDG_STATE_HOME='$d/state' '$P/bin/gptscope' chat --theme high-contrast --seed 1; sleep 30"
    i=0; while ! $T capture-pane -p -t inst 2>/dev/null | grep -q sampling && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    $T send-keys -t inst "/theme" Enter
    i=0; while ! $T capture-pane -p -t inst | grep -q "theme: high-contrast" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    $T capture-pane -p -t inst > "$d/screen"
    check "the installed chat opens with an installed theme" grep -q "theme: high-contrast" "$d/screen"
    $T kill-server 2>/dev/null
fi
cd "$root" || exit 1
check "make uninstall leaves no file" sh -c "env -u MAKEFLAGS -u MAKELEVEL make -s uninstall DESTDIR='$d/stage' && [ -z \"\$(find '$d/stage' -type f)\" ]"
echo "[==========] install: $((pass + fail)) checks"
echo "[  PASSED  ] $pass test(s)."
[ $fail -eq 0 ] || { echo "[  FAILED  ] $fail test(s)."; exit 1; }
