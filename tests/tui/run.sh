#!/bin/sh
# End-to-end tests of `gptscope chat`: the real binary in a tmux pane, driven
# with send-keys and read back with capture-pane, on the tiny models/reverse
# model (raw template, temperature 0: "12 7 99 3 45 0 8 61" must stream
# " 61 8 0 45 3 99 7 12"). Each check prints ok/FAIL, then a summary in
# cmocka's format (`make test` runs this through tests/run_tests.sh). Needs
# tmux. Usage: GPTSCOPE_BIN=./gptscope sh tests/tui/run.sh (or make test-tui)
set -u
# the screens checked hold UTF-8 (box lines, arrows): a shell without a locale
# (a fresh container, su -) would have tmux and the chat draw them in ASCII
export LC_ALL=C.UTF-8
BIN=${GPTSCOPE_BIN:-./gptscope}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL="$ROOT/models/reverse"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gptscope-tui.XXXXXX")
SOCK="gptscope-tui-$$"
T="tmux -L $SOCK -f /dev/null"
pass=0; fail=0
trap '$T kill-server >/dev/null 2>&1; rm -rf "$TMP"' EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() {
    fail=$((fail + 1)); echo "FAIL $1"
    echo "---- screen ----"; $T capture-pane -p -t app 2>/dev/null | sed 's/^/| /'
    echo "---- log ----"; sed 's/^/| /' "$TMP/log" 2>/dev/null | tail -20
}
screen() { $T capture-pane -p -t app 2>/dev/null; }
# wait_for PATTERN [SECONDS]: until the screen matches the fixed string
wait_for() {
    i=0; n=$(( ${2:-5} * 20 ))
    while [ $i -lt $n ]; do
        screen | grep -qF -- "$1" && return 0
        sleep 0.05; i=$((i + 1))
    done
    return 1
}
# wait_log PATTERN [SECONDS]: until the --log file has a line matching the regex
wait_log() {
    i=0; n=$(( ${2:-5} * 20 ))
    while [ $i -lt $n ]; do
        grep -qE -- "$1" "$TMP/log" 2>/dev/null && return 0
        sleep 0.05; i=$((i + 1))
    done
    return 1
}
check() { name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# for sh -c checks: until the pane's shell has written the tty modes after the app exited
WAIT_STTY="i=0; while ! grep -q icanon '$TMP/stty' 2>/dev/null && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done"
keys() { $T send-keys -t app "$@"; }
# start [ENV...]: a fresh app in a 100x30 pane (with the options in $EXTRA);
# the exit status and the tty modes after it land in $TMP/exit and $TMP/stty
EXTRA=""
start() {
    rm -f "$TMP/exit" "$TMP/stty" "$TMP/log"
    $T kill-server >/dev/null 2>&1
    sleep 0.2 # let the old server go before a new one takes the socket
    $T new-session -d -s app -x 100 -y 30 \
        "env XDG_STATE_HOME='$TMP/state' $* '$BIN' chat -m '$MODEL' $EXTRA --template raw --temperature 0 --seed 1 --log '$TMP/log'; echo \$? > '$TMP/exit'; stty -a > '$TMP/stty'; sleep 60"
    wait_for "sampling" 10 && wait_for "attention"
}
# the pid of the app: the child of the pane's shell (no pgrep needed)
app_pid() { # tried for up to 2 s: under load the lookup has come back empty once
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sh_pid=$($T display-message -p -t app '#{pane_pid}')
        pid=$(awk -v pp="$sh_pid" '$4 == pp && $2 == "(gptscope)" { print $1 }' /proc/[0-9]*/stat 2>/dev/null | head -1)
        [ -n "$pid" ] && { echo "$pid"; return; }
        sleep 0.2
    done
}
# quit_app: /quit, then wait (5 s at most) until the app has exited. The next
# kill-server hangs up the pane, and the hangup's SIGHUP+SIGCONT must not land
# in the app's exit: under SAN=1 LeakSanitizer's stop-the-world runs there, and
# a SIGCONT cancels the SIGSTOP it waits for (the process spins for ever)
quit_app() {
    qpid=$(app_pid)
    keys "/quit" Enter
    i=0; while [ -n "$qpid" ] && [ -d "/proc/$qpid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}

# 1. start, send a message, the streamed reply
check "starts and draws every pane" start
check "status bar names the model and context" wait_for "reverse │ ctx 0/16"
keys "12 7 99 3 45 0 8 61" Enter
check "reply streams in the conversation" wait_for " 61 8 0 45 3 99 7 12"
check "log: prefill 8 tokens, reply 8 tokens" sh -c "wait_log() { :; }; grep -q 'send: prefill 8 tokens' '$TMP/log' && grep -q 'reply: 8 tokens' '$TMP/log'"
check "next-token panel lists candidates" wait_for "99.6%"
check "status shows tokens computed by the turn" wait_for "turn: prefill 8, reply 8"
check "a reply ended by the full context says so, without claiming it was cut" wait_for "the context window of 16 tokens is full: the reply ends here, perhaps"

# 2. layers and heads
keys F4 F6
check "F4/F6: layer 1, head 1" wait_for "attention heatmap  L1 H1  (layers 0-1"
keys "/head avg" Enter
check "/head avg: average of heads" wait_for "L1 mean of heads"
keys "/layer 0" Enter "/head 2" Enter
check "/layer 0 /head 2" wait_for "attention heatmap  L0 H2  (layers 0-1"
keys "/layer 9" Enter
check "/layer out of range: usage message" wait_for "usage: /layer N (0..1)"
keys "/layer 1" Enter
check "/layer 1 after an error: confirmed" wait_for "inspector: layer 1 (layers 0-1)"
check "/layer 1 after an error: the error is gone" sh -c "! $T capture-pane -p -t app | grep -qF 'usage: /layer'"
keys "/layer 0" Enter

# focus and the panes' own keys
keys Tab Tab Right
check "sampling panel: Right raises the temperature" wait_for "temp    0.05"
keys Left Tab Up
check "inspector: the cursor on an earlier token shows its candidates" wait_for "#14 then: T 0.00"
keys End Tab
keys "/regen" Enter
check "/regen: evaluated 1 token" wait_log "^regen: evaluated 1$"
check "/regen: the same reply at temperature 0" wait_log "^reply: 8 tokens .*evaluated 9, context 16/16"

# 3. /save, /reset, /load
keys "/save $TMP/s.json" Enter
check "/save writes the session" wait_for "saved to $TMP/s.json"
cp "$TMP/s.json" "$TMP/s.orig"; echo mine > "$TMP/s.json"
keys "/save $TMP/s.json" Enter
check "/save over a file: asks first" wait_for "$TMP/s.json exists: the same /save again (Up, Enter) replaces it"
check "/save over a file: the file is kept until asked again" grep -qx mine "$TMP/s.json"
keys Up Enter
check "/save again at once: replaced" sh -c "sleep 0.3; cmp -s '$TMP/s.json' '$TMP/s.orig'"
keys "/reset" Enter
check "/reset clears the conversation" wait_for "conversation cleared"
check "/reset: reply gone" sh -c "! $T capture-pane -p -t app | grep -qF ' 61 8 0 45 3 99 7 12'"
keys "/load $TMP/nosuch.json" Enter
check "/load of a missing file: clear error" wait_for "nosuch.json"
keys "/load $TMP/s.json" Enter
check "/load restores the conversation" wait_for " 61 8 0 45 3 99 7 12"
check "/load message" wait_for "loaded $TMP/s.json (2 turns, 16 tokens)"
keys Tab Tab Tab Up
check "/load keeps each reply token's candidates (the session file holds them)" wait_for "#14 then: T 0.00"
keys Up Up Up Up Up Up Up
check "on a prompt token: the model's guesses for it" wait_for '#7 "·61": the model'"'"'s guesses (T 1)'
keys Home
check "on the first token, which nothing predicts: the panel says it has none" wait_for "#0: no candidates recorded"
keys End Tab
keys "/save $TMP/s2.json" Enter "/undo" Enter
check "/undo removes the exchange" wait_for "ctx 0/16"
keys "/load $TMP/s2.json" Enter
wait_for "loaded $TMP/s2.json"

# 4. resize: too small, then back
$T resize-window -t app -x 40 -y 10
check "tiny window: 'window too small'" wait_for "window too small"
$T resize-window -t app -x 120 -y 35
check "resized back: panes redrawn" wait_for "sampling"
check "resized back: conversation kept" wait_for " 61 8 0 45 3 99 7 12"

# 5. help
keys F1
check "F1 opens the help" wait_for "keys and commands"
keys End
check "the help scrolls to its end: the commands, listed from the command table" wait_for "/draft on|off|DIR       speculative sampling with a draft model"
keys x
check "a key closes the help: the panes are back" wait_for "attention heatmap"
check "a key closes the help: the help is gone" sh -c "! $T capture-pane -p -t app | grep -qF 'keys and commands'"

# 6. themes, a multi-line message, /quit: exit status 0, terminal restored
keys "/theme light" Enter
check "/theme light" wait_for "theme: light"
keys "/theme nosuch" Enter
check "/theme of a missing theme names the file" wait_for "nosuch.theme: cannot open theme"
keys "a" C-j "b"
check "Ctrl-J puts a new line in the message" wait_for "a↵b"
keys C-c C-r "3 45" # a space: no temporary path in the history holds one (a random "99" did)
check "Ctrl-R searches the history" wait_for "(reverse-i-search)\`3 45': 12 7 99 3 45 0 8 61"
keys C-g C-a C-k Up
check "Up recalls the last line" wait_for "> /theme nosuch"
keys C-a M-f "X"
check "emacs keys: Alt-F moves by word" wait_for "> /themeX nosuch"
keys C-u "a" C-j "b"
check "Ctrl-J again after editing" wait_for "a↵b"
keys C-c "z"
check "Ctrl-C clears the line: typing starts afresh" wait_for "> z"
check "Ctrl-C clears the line" sh -c "! $T capture-pane -p -t app | grep -qF 'a↵b'"
keys C-u C-c
check "Ctrl-C on an empty line says how to quit" wait_for "/quit (or Ctrl-D on an empty line) quits"

keys "/quit" Enter
check "/quit exits with status 0" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 0 ]"
check "/quit restores the tty (icanon, echo)" sh -c "$WAIT_STTY; grep -q ' icanon' '$TMP/stty' && grep -q ' echo ' '$TMP/stty'"
check "history kept under XDG_STATE_HOME" grep -qF "12 7 99 3 45 0 8 61" "$TMP/state/gptscope/history"

# 7. mid-reply: slowed to 150 ms a token (keys are read while it waits)
start GPTSCOPE_TEST_STEP_DELAY_MS=150 >/dev/null
keys "12 7 99 3 45 0 8 61" Enter
wait_log "^token " 5
keys "/set temperature 1.5" Enter
check "temperature changed mid-reply" wait_log "^reply: " 10
check "tokens before at 0.00, after at 1.50" sh -c "grep -q '^token .* temperature 0.00' '$TMP/log' && grep -q '^token .* temperature 1.50' '$TMP/log' && [ \$(grep -n '^token .* temperature 1.50' '$TMP/log' | head -1 | cut -d: -f1) -lt \$(grep -n '^reply:' '$TMP/log' | head -1 | cut -d: -f1) ]"
check "sampling panel shows the new temperature" wait_for "temp    1.50"
keys "/set top-p 2" Enter
check "/set out of range: refused with the option's range" wait_for "/set top-p: expected a number in [1e-09, 1], found '2'"
check "/set out of range: the panel keeps the old value" wait_for "top-p   0.95"
keys "/set temperature 1e9" Enter
check "/set temperature 1e9: refused as --temperature refuses it" wait_for "/set temperature: expected a number in [0, 100], found '1e9'"

# 8. cancel a reply with Esc: text kept, fewer than 8 tokens
keys "/set temperature 0" Enter "/reset" Enter
wait_for "conversation cleared"
: > "$TMP/log"
keys "12 7 99 3 45 0 8 61" Enter
wait_log "^token " 5
keys Escape
check "Esc stops the reply" wait_for "reply stopped (text kept)"
check "the stopped reply is shorter" sh -c "grep -qE '^reply: [0-7] tokens \(stopped\)' '$TMP/log'"
check "the kept text is the reply's start" sh -c "grep -qE '^reply-text:  61' '$TMP/log'"

# 9. a prefill (in batches of 4 on this model) shows progress and Esc cancels it
: > "$TMP/log"
keys "/reset" Enter "12 7 99 3 45 0 8 61" Enter
check "prefill shows progress" wait_for "prefill 4/8 tokens"
keys Escape
check "Esc cancels the prefill" wait_for "prefill cancelled; the message was not sent"
check "cancelled: nothing was sent" sh -c "! grep -q '^send:' '$TMP/log'"
check "cancelled: the context is unchanged" wait_for "ctx 0/16"

# 10. SIGTERM: the terminal is restored
pid=$(app_pid)
if [ -n "$pid" ]; then kill -TERM "$pid"; fi
check "SIGTERM: exits 143" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 143 ]"
check "SIGTERM: tty restored" sh -c "$WAIT_STTY; grep -q ' icanon' '$TMP/stty' && grep -q ' echo ' '$TMP/stty'"

# 10b. SIGBUS (a mapped file cut short under the process): the terminal restored, a line, exit 135
start >/dev/null
pid=$(app_pid)
if [ -n "$pid" ]; then kill -BUS "$pid"; fi
check "SIGBUS: exits 135" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 135 ]"
check "SIGBUS: tty restored" sh -c "$WAIT_STTY; grep -q ' icanon' '$TMP/stty' && grep -q ' echo ' '$TMP/stty'"
check "SIGBUS: says what happened" wait_for "gptscope: bus error (SIGBUS)"

# 11. gptscope with no arguments on a terminal opens the chat
#     (models/reverse plus a chat_template.json: the default "transcript" template does not fit its 16 positions)
mkdir -p "$TMP/model" && for f in "$MODEL"/*; do ln -s "$f" "$TMP/model/"; done
echo '{"name": "plain"}' > "$TMP/model/chat_template.json"
$T kill-server >/dev/null 2>&1; sleep 0.2; rm -f "$TMP/exit"
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' GPTSCOPE_MODEL='$TMP/model' '$BIN'; echo \$? > '$TMP/exit'; sleep 60"
check "no arguments on a terminal: the chat" wait_for "attention heatmap  L0 H0" 10
keys "/load $TMP/s.json" Enter
check "/load of another model's session: asks first, naming both models" wait_for "was saved with model 'reverse', and this chat runs 'model'"
check "/load of another model's session: nothing loaded yet" wait_for "ctx 0/16"
keys "/load $TMP/s.json" Enter
check "/load again: loaded" wait_for "loaded $TMP/s.json (2 turns, 16 tokens)"
keys "/quit" Enter
check "no arguments: /quit exits 0" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 0 ]"

# 12. draft mode: models/reverse as its own draft (same tokenizer; at temperature 0
#     every draft is accepted: r = 1). 8 reply tokens in a 16-position window: with
#     K = 4 passes of 5 and 3 tokens (K shrinks at the window's end), with K = 2 of 3, 3, 2.
EXTRA="--draft '$MODEL'" start >/dev/null
check "--draft: the status bar shows draft mode" wait_for "draft k4 │ F1 help"
keys "12 7 99 3 45 0 8 61" Enter
check "--draft: the same reply" wait_for " 61 8 0 45 3 99 7 12"
check "--draft: status shows r and tokens per target pass" wait_for "draft k4 r 1.00 4.0 tok/pass"
check "--draft: log: accepted drafts and bonus tokens" sh -c "grep -q '^token .* origin accepted' '$TMP/log' && grep -q '^token .* origin bonus' '$TMP/log' && grep -q '^reply: 8 tokens .*draft k4 r 1.00 4.00 tok/pass' '$TMP/log'"
check "--draft: accepted drafts drawn in the theme's draft colour" sh -c "$T capture-pane -e -p -t app | grep -q '38;5;152m 61 8 0 45'"
keys "/set draft_k 2" Enter
check "/set draft_k 2" wait_for "draft_k = 2"
check "/set draft_k 2: the sampling panel" wait_for "draft-k 2"
keys "/regen" Enter
check "/set draft_k 2: same reply, 2.7 tokens per pass" wait_for "draft k2 r 1.00 2.7 tok/pass"
check "/set draft_k 2: log" wait_log "^reply: 8 tokens .*draft k2 r 1.00 2.67 tok/pass"
check "draft mode: the status bar counts the reply's tokens, not the evaluated ones; /regen's prefill is its own" wait_for "turn: prefill 1, reply 8 │"
keys "/set draft_k 17" Enter
check "/set draft_k 17: out of range" wait_for "/set draft_k: K = 17 is outside 1..16"
keys "/draft off" Enter
check "/draft off: status bar" wait_for "draft off │ F1 help"
: > "$TMP/log"
keys "/regen" Enter
check "/draft off: the same reply, sampled by the model alone" sh -c "i=0; while ! grep -q '^reply:' '$TMP/log' && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; grep -q '^reply: 8 tokens' '$TMP/log' && ! grep -q 'origin accepted' '$TMP/log' && grep -qF 'reply-text:  61 8 0 45 3 99 7 12' '$TMP/log'"
keys "/draft on" Enter
check "/draft on" wait_for "draft k2 │ F1 help"
keys "/draft $ROOT/models/shakespeare" Enter
check "/draft with another tokenizer: clear error" wait_for "draft model 'shakespeare' has 2048 vocabulary rows, target 'reverse' has 447"
check "/draft with another tokenizer: the draft is kept" wait_for "draft k2 │ F1 help"
$T kill-server >/dev/null 2>&1; sleep 0.2; rm -f "$TMP/exit"
$T new-session -d -s app -x 100 -y 30 "'$BIN' chat -m '$MODEL' --template raw --draft '$ROOT/models/shakespeare'; echo \$? > '$TMP/exit'; sleep 60"
check "--draft with another tokenizer: exit 1 with the message, terminal untouched" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 1 ] && $T capture-pane -pJ -t app | grep -qF \"draft model 'shakespeare' has 2048 vocabulary rows, target 'reverse' has 447; they must share one tokenizer\""

# 13. --quantize q8: the model runs on 8-bit weights and still reverses
EXTRA="--quantize q8" start >/dev/null
keys "12 7 99 3 45 0 8 61" Enter
check "--quantize q8: the same reply" wait_for " 61 8 0 45 3 99 7 12"
check "--quantize q8: the log names the 8-bit weights" wait_log "^start: model reverse \\(q8\\)"

# 14. the user's files: ~ in /save and /load, a FIFO and a missing directory
#     refused with the reason, a log on a full disk told on screen and in the
#     exit status
mkdir -p "$TMP/home" && mkfifo "$TMP/fifo"
start HOME="$TMP/home" >/dev/null
keys "/save ~/s.json" Enter
check "/save ~/s.json: the message names the expanded path" wait_for "saved to $TMP/home/s.json"
check "/save ~/s.json: the file is in \$HOME" test -s "$TMP/home/s.json"
keys "/load ~/s.json" Enter
check "/load ~/s.json" wait_for "loaded $TMP/home/s.json"
keys "/save $TMP/fifo" Enter
check "/save onto a FIFO: refused, saying what is there" wait_for "$TMP/fifo: is a FIFO, not a regular file"
check "/save onto a FIFO: it is still a FIFO" test -p "$TMP/fifo"
keys "/save nodir/s.json" Enter
check "/save into a missing directory names it" wait_for "in directory nodir: No such file or directory"
$T kill-server >/dev/null 2>&1; sleep 0.2; rm -f "$TMP/exit"
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$MODEL' --template raw --temperature 0 --log /dev/full; echo \$? > '$TMP/exit'; sleep 60"
check "--log /dev/full: told on the message line" wait_for "log /dev/full: cannot write: No space left on device" 10
keys "12 7 99 3 45 0 8 61" Enter
check "--log /dev/full: the chat goes on" wait_for " 61 8 0 45 3 99 7 12"
keys "/quit" Enter
check "--log /dev/full: exit status 1" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 1 ]"
check "--log /dev/full: said again on stderr" sh -c "$T capture-pane -pJ -t app | grep -qF 'gptscope: log /dev/full: cannot write: No space left on device'"


# 15. a paste with a byte that is not UTF-8 keeps every other byte (ncurses' get_wch dropped the rest)
start >/dev/null
$T send-keys -t app -H 41 42 ff 43 44
check "paste with an invalid byte: every valid byte kept, the bad one shown" wait_for "> AB�CD"
check "paste with an invalid byte: a notice says so" wait_for "not UTF-8"

# 16. options without a command open the chat; a model too small for the
#     default template's preamble falls back to raw and says so
$T kill-server >/dev/null 2>&1; sleep 0.2; rm -f "$TMP/exit"
$T new-session -d -s app -x 160 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' -m '$MODEL'; echo \$? > '$TMP/exit'; sleep 60"
check "gptscope -m DIR: the chat" wait_for "attention heatmap" 10
check "too small for the transcript template: raw, with a notice" wait_for "template raw: the transcript template's preamble does not fit the 16 positions of reverse"
keys "/quit" Enter
check "gptscope -m DIR: /quit exits 0" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 0 ]"

# 17. the template's speakers label the turns; the confidence view has a legend
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$ROOT/models/shakespeare' --seed 1; sleep 60"
check "the speakers the template names" wait_for "you speak as ROMEO, shakespeare as JULIET" 10
keys F2
check "the confidence view's legend" wait_for "confidence (F2): p < 20%  20-60%  p >= 60%"
quit_app

# 18. outside tmux: option errors come before the terminal is touched
printf 'name = bad\nuser = blu\n' > "$TMP/bad.theme"
"$BIN" chat -m "$MODEL" --theme "$TMP/bad.theme" < /dev/null > "$TMP/out" 2>&1; rc=$?
check "malformed theme: exit 1 naming file and line" sh -c "[ $rc = 1 ] && grep -qF '$TMP/bad.theme:2: user:' '$TMP/out'"
"$BIN" chat -m "$MODEL" < /dev/null > "$TMP/out" 2>&1; rc=$?
check "chat without a terminal: exit 1 with a message" sh -c "[ $rc = 1 ] && grep -qF 'needs a terminal' '$TMP/out'"
"$BIN" chat -m "$MODEL" --draft "$MODEL" --draft-k 17 < /dev/null > "$TMP/out" 2>&1; rc=$?
check "--draft-k 17: usage error naming the option" sh -c "[ $rc = 2 ] && grep -qF -- '--draft-k' '$TMP/out'"
"$BIN" chat -m "$MODEL" --quantize q3 < /dev/null > "$TMP/out" 2>&1; rc=$?
check "--quantize q3: usage error" sh -c "[ $rc = 2 ] && grep -qF -- \"--quantize: expected q8, q4, q8_0, q4_0 or q4_k, found 'q3'\" '$TMP/out'"

# 19. the microscope: the zoomed heatmap's labels and scale, the overview, the
#     text view (the cursor moves the shading), ablation, prompt mode
shot() { $T capture-pane -e -p -t app 2>/dev/null; }
start GPTSCOPE_TEST_STEP_DELAY_MS=100 >/dev/null
keys "12 7 99 3 45 0 8 61" Enter
wait_for " 61 8 0 45 3 99 7 12" 10
check "heatmap: key labels and query labels" sh -c "$T capture-pane -p -t app | grep -qF 'keys→' && $T capture-pane -p -t app | grep -qF 'q↓ #'"
check "heatmap: the colour scale with its numbers and how it bins" wait_for "scale 0 >0 .05 .20 .44 .79 1"
check "heatmap: two queries per row with half blocks" wait_for "1 token/col, 2 queries/row ▀"
check "readout: the query, its top keys with positions, escaped" wait_for 'q #15 "·12" → #2 "·99" 0.72'
keys F8
check "overview: says how it bins" wait_for "1 token/cell, max"
$T resize-window -t app -x 200 -y 50
keys F10
check "overview zoomed: a short context fills the view (16 tokens, 3 cells each)" sh -c "sleep 0.5; $T capture-pane -p -t app | grep -qE '▀{48}' && ! $T capture-pane -p -t app | grep -qE '▀{49}'"
keys F10
wait_for "zoom off"
$T resize-window -t app -x 120 -y 35
keys F8
check "text view: the context as the model sees it" wait_for "text view: the model's context, 16 tokens"
shot > "$TMP/t1"
keys Tab Tab Tab Up
check "text view: the cursor moves the query" wait_for "shade = attention of query #14"
shot > "$TMP/t2"
check "text view: moving the cursor moves the shading" sh -c "! cmp -s '$TMP/t1' '$TMP/t2' && [ \"\$(grep -c '48;5;' '$TMP/t2')\" -gt 0 ]"
keys m
check "m: the mean of the layer's heads" wait_for "L0 mean of heads"
keys m
check "m again: the max over them" wait_for "L0 max of heads"
keys s
check "s: the per-row scale, said on screen" wait_for "per row (1 = row max)"
keys End F8
check "logit lens: a view of the inspector, every block's guess" wait_for "logit lens  (layers 0-1; F8 next view)"
check "logit lens: says what the last column is" wait_for ", the final choice"
check "logit lens: the last block ranks the model's choice first" sh -c "$T capture-pane -p -t app | grep -qE '│L1 .* #1 '"
keys F8 Tab
: > "$TMP/log"
keys "/ablate 0.*" Enter
check "ablation: progress while the context is re-evaluated" wait_for "ablation: re-evaluating the whole context under the new set 4/16"
check "ablation: the next-token panel before and after" wait_for "next token at #16, before → after"
check "ablation: the message says what happened to the KV cache" wait_for "the KV cache was re-evaluated under ablation 0.*"
check "ablation: the status bar names the ablated heads" wait_for "ablated 0.* │"
check "ablation: the log" wait_log "^ablate 0.\\*: evaluated 16"
keys "/ablate 9.1" Enter
check "/ablate out of range: refused with the model's shape" wait_for "layer 9 is out of range: the model has 2 layers (0..1) of 4 heads (0..3)"
keys "/ablate off" Enter
check "/ablate off" wait_for "ablation lifted: the KV cache was re-evaluated under no ablation"
keys F9
check "model view: every head, its thumbnail and scores" wait_for "model view: 2 layers x 4 heads over 16 tokens"
check "model view: the scores table" wait_for "head    prev  first   self  entr.  induc"
keys s
check "model view: s sorts by the next score" wait_for "sorted by prev (s)"
# the table's first two heads (L.H), as drawn
table_heads() { screen | awk '/sorted by prev/ { on = 1; next } on && match($0, /[0-9]+\.[0-9]+ +(-|[0-9]+\.[0-9]+) /) { split(substr($0, RSTART), f, " "); print f[1]; if (++n == 2) exit }'; }
first=$(table_heads | sed -n 1p); second=$(table_heads | sed -n 2p)
check "model view: sorting selects the table's top row" wait_for " L${first%.*} H${first#*.}  prev"
keys Down
check "model view: sorted, Down walks the table" wait_for " L${second%.*} H${second#*.}  prev"
keys Enter
check "model view: Enter opens the selected head in the inspector" wait_for "inspector: layer ${second%.*}, head ${second#*.}"
keys F9 s s s s s s
wait_for "sorted by layer (s)"
keys Down Right Enter
check "model view: sorted by layer, the arrows walk the grid" wait_for "inspector: layer $(( (${second%.*} + 1) % 2 )), head $(( (${second#*.} + 1) % 4 ))"
check "model view: closed, the inspector shows the head it opened" wait_for "L$(( (${second%.*} + 1) % 2 )) H$(( (${second#*.} + 1) % 4 ))"
keys Tab Tab Tab "/layer 0" Enter "/head 1" Enter F9 x
check "model view: x ablates the selected head, the view follows" wait_for " L0 H1 (ablated)  prev"
keys x
check "model view: x again lifts it" wait_for " L0 H1  prev"
keys q
check "model view: q closes it; the message says what happened" wait_for "restored L0 H1: the KV cache was re-evaluated"
keys "/inspect 5 4 3" Enter
check "/inspect: prompt mode on the text, nothing generated" wait_for "prompt mode: 3 tokens evaluated as typed (raw template), nothing generated"
check "/inspect: no reply" sh -c "sleep 0.3; ! grep -q '^token ' '$TMP/log'"
check "/inspect: the next-token panel shows the model's distribution" wait_for "next token"
keys "/chat" Enter
check "/chat: back to the conversation" wait_for " 61 8 0 45 3 99 7 12"
quit_app

# 20. gptscope inspect: the prompt, no reply until /generate
$T kill-server >/dev/null 2>&1; sleep 0.2; rm -f "$TMP/log"
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' inspect -m '$MODEL' -p '12 7 99 3'; sleep 60"
check "inspect: opens on the prompt in the text view" wait_for "prompt mode: 4 tokens evaluated as typed" 10
check "inspect: no reply" wait_for "turn: prefill 4, reply 0"
check "inspect: the text is there" sh -c "$T capture-pane -p -t app | grep -q '^12 7 99 3 *│'"
# /export: each file checked against the numpy reference by tests/ref/microscope_check.py
MC="${PYTHON:-/usr/bin/python3} tests/ref/microscope_check.py"
keys "/export lens $TMP/lens.json" Enter
check "/export lens: written" wait_for "exported lens to $TMP/lens.json"
check "/export lens: the numpy reference's lens" sh -c "$MC lens '$MODEL' '$TMP/lens.json' > '$TMP/mc' 2>&1 || { cat '$TMP/mc'; false; }"
ids=$(${PYTHON:-/usr/bin/python3} -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['ids'])))" "$TMP/lens.json")
keys "/export heads $TMP/heads.json" Enter
check "/export heads: written" wait_for "exported heads to $TMP/heads.json"
check "/export heads: the numpy reference's scores" sh -c "$MC heads '$MODEL' '$TMP/heads.json' --ids '$ids' > '$TMP/mc' 2>&1 || { cat '$TMP/mc'; false; }"
keys "/export heads $TMP/heads.csv" Enter
check "/export heads as CSV: the same numbers" sh -c "sleep 0.5; $MC csv '$MODEL' '$TMP/heads.csv' '$TMP/heads.json' > '$TMP/mc' 2>&1 || { cat '$TMP/mc'; false; }"
keys "/export attention $TMP/att.json" Enter "/export attention $TMP/att.svg" Enter
check "/export attention as a picture: written" wait_for "exported attention to $TMP/att.svg"
check "/export attention: the SVG's labels, scale and colours" sh -c "$MC svg '$MODEL' '$TMP/att.svg' '$TMP/att.json' > '$TMP/mc' 2>&1 || { cat '$TMP/mc'; false; }"
keys "/export topk $TMP/topk.csv" Enter
check "/export topk: written" wait_for "exported topk to $TMP/topk.csv"
echo mine > "$TMP/topk.csv"
keys "/export topk $TMP/topk.csv" Enter
check "/export over a file: asks first" wait_for "$TMP/topk.csv exists: the same /export again (Up, Enter) replaces it"
keys "/conf" Enter "/conf" Enter
wait_for "confidence view off"
keys "/export topk $TMP/topk.csv" Enter
check "/export: asked again after another command" wait_for "$TMP/topk.csv exists: the same /export again (Up, Enter) replaces it"
check "/export over a file: kept until asked again" grep -qx mine "$TMP/topk.csv"
keys Up Enter
check "/export again at once: replaced" wait_for "exported topk to $TMP/topk.csv"
check "/export again at once: the file is the table" sh -c "head -1 '$TMP/topk.csv' | grep -q rank"
keys "/export lens $TMP/x.txt" Enter
check "/export to an unknown kind of file: says which" wait_for "the name must end in .json or .csv"
keys "/generate 3" Enter
check "/generate 3: three tokens after the prompt" wait_for "turn: prefill 4, reply 3"
check "/generate 3: its message goes when the tokens are out" sh -c "sleep 0.3; ! $T capture-pane -p -t app | grep -qF 'generating 3 tokens'"
check "/generate 3: the max-new knob is as it was" sh -c "$T capture-pane -p -t app | grep -qE 'max-new +256'"
quit_app
printf '1 2 3' | "$BIN" inspect -m "$MODEL" -p x -f y > "$TMP/out" 2>&1; rc=$?
check "inspect -p and -f: usage error" sh -c "[ $rc = 2 ] && grep -qF -- '-p and -f both given' '$TMP/out'"

# 20b. prompt mode: on an earlier token, the model's guesses for it (its probability the
# CLI's topk history's, independently computed)
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' inspect -m '$MODEL' -p '12 7 99 3 45 0 8 61 61 8 0'; sleep 60"
wait_for "prompt mode" 10
keys Tab Tab Tab Up Up
check "prompt mode, an earlier token: the model's guesses for it" wait_for '#8 "·61": the model'"'"'s guesses (T 1)'
"$BIN" topk -m "$MODEL" -p '12 7 99 3 45 0 8 61 61 8 0' -k 1 --export "$TMP/h.json" > /dev/null
pct=$(${PYTHON:-/usr/bin/python3} -c "import json,sys; print('%.1f%%' % (100 * json.load(open(sys.argv[1]))['positions'][7]['next']['prob']))" "$TMP/h.json")
check "prompt mode, an earlier token: its probability as topk's history gives it" sh -c "$T capture-pane -p -t app | grep '\\*·61 ' | grep -qF '$pct'"
keys Escape
sleep 0.3 # else the next key makes Esc an Alt combination
keys "/chat" Enter
check "/chat from inspect, no conversation: the text view says the context is empty" wait_for "text view: the model's context is empty"
check "/chat from inspect, no conversation: no query #-1" sh -c "! $T capture-pane -p -t app | grep -qF '#-1'"

# 20c. why this token (w, /why): the attribution at the query, its parts against the
# float64 reference (tests/ref/attribute_ref.py), the runner-up, Enter opens a head
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' inspect -m '$MODEL' -p '12 7 99 3 45 0 8 61 61 8 0'; sleep 60"
wait_for "prompt mode" 10
keys Tab Tab Tab w
check "w: the why view, the model's next token at the newest position" wait_for 'why "·45" after #10 "·0"'
check "why: the parts add up to the logit" sh -c "$T capture-pane -p -t app | grep -qE 'logit 14\.7[0-9]*; parts sum 14\.7'"
check "why: the largest part first, selected: a mirror head of layer 0" sh -c "$T capture-pane -p -t app | grep -qE '│>L0 H[0-3] +\+[0-9.]+ +\|█'"
check "why: the layer x head grid" sh -c "$T capture-pane -p -t app | grep -qE '│L1  ([░▒▓█ ][-+ ]){4}'"
keys "/export why $TMP/why.json" Enter
check "/export why: written" wait_for "exported why to $TMP/why.json"
check "/export why: every part the float64 reference's" sh -c "${PYTHON:-/usr/bin/python3} tests/ref/attribute_ref.py check '$MODEL' '$TMP/why.json' --top1 > '$TMP/ar' 2>&1 || { cat '$TMP/ar'; false; }"
keys Tab Tab Tab b
check "b: against the runner-up" wait_for 'why "·45" rather than'
check "b: a logit difference" wait_for "logit difference"
keys "/export why $TMP/why-vs.csv" Enter "/export why $TMP/why-vs.json" Enter
check "/export why, vs: the reference's" sh -c "sleep 0.5; ${PYTHON:-/usr/bin/python3} tests/ref/attribute_ref.py check '$MODEL' '$TMP/why-vs.json' > '$TMP/ar' 2>&1 || { cat '$TMP/ar'; false; }"
check "/export why as CSV: the JSON's rows" sh -c "${PYTHON:-/usr/bin/python3} tests/ref/attribute_ref.py csv '$TMP/why-vs.csv' '$TMP/why-vs.json' > '$TMP/ar' 2>&1 || { cat '$TMP/ar'; false; }"
keys Tab Tab Tab b Up
check "why: the cursor moves the query, the token that follows it is explained" wait_for 'why "·0" after #9 "·8"'
selected() { screen | sed -n 's/.*│>\([^ ]* [^ ]*\) .*/\1/p' | head -1; }
first=$(selected)
keys ']'
check "why: ] selects the next part" sh -c "sleep 0.3; [ \"\$($T capture-pane -p -t app | sed -n 's/.*│>\\([^ ]* [^ ]*\\) .*/\\1/p' | head -1)\" != '$first' ]"
keys '['
check "why: [ the one before" wait_for "│>$first "
keys Enter
check "why, Enter: the selected head opens in the heatmap" wait_for "attention heatmap  $first"
keys "/why vs" Enter
check "/why vs: the why view against the runner-up" wait_for 'rather than'
keys "/why what" Enter
check "/why with another word: its usage" wait_for "usage: /why [vs]"
quit_app

# 21. 8 colours and NO_COLOR: shade glyphs, one query per row, the scale as glyphs
for envv in TERM=screen NO_COLOR=1; do
    $T kill-server >/dev/null 2>&1; sleep 0.2
    $T new-session -d -s app -x 100 -y 30 "env $envv XDG_STATE_HOME='$TMP/state' '$BIN' inspect -m '$MODEL' -p '12 7 99 3 45'; sleep 60"
    wait_for "prompt mode" 10
    keys F8 F8
    check "$envv: the heatmap in shade glyphs with a glyph scale" wait_for "scale 0 ░>0 ▒.06 ▓.25 █.56 1"
    check "$envv: one token per cell" wait_for "1 token/cell"
    keys F8 F8
    check "$envv: the text view marks the query" wait_for "shade = attention of query #4"
done

# 22. the terminal goes away with no SIGHUP reaching the app (it runs in its own session,
# as after a dropped ssh with the signal lost): it notices, saves the conversation, quits
MODEL_SAVED=$MODEL
$T kill-server >/dev/null 2>&1; sleep 0.2; rm -f "$TMP/log"
# the shell that setsid starts writes its pid, then becomes the app (exec keeps the pid)
rm -f "$TMP/app.pid"
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state2' setsid -w sh -c 'echo \$\$ > \"$TMP/app.pid\"; exec \"$BIN\" chat -m \"$MODEL\" --template raw --temperature 0 --seed 1 --log \"$TMP/log\"'; sleep 60"
wait_for "sampling" 10
keys "12 7 99 3 45 0 8 61" Enter
check "lost terminal: the reply came first" wait_for " 61 8 0 45 3 99 7 12"
pid=$(cat "$TMP/app.pid" 2>/dev/null)
$T kill-server >/dev/null 2>&1
# a sanitizer build's exit (LeakSanitizer) on a busy machine can take seconds: wait up to 30
i=0; while [ -n "$pid" ] && [ -d /proc/$pid ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
check "lost terminal: the app quits instead of spinning" sh -c "[ -n '$pid' ] && [ ! -d /proc/$pid ]"
if [ -n "$pid" ] && [ -d /proc/$pid ]; then
    echo "  still running after 30 s: pid $pid, state $(awk '{print $3}' /proc/$pid/stat 2>/dev/null), wchan $(cat /proc/$pid/wchan 2>/dev/null); the log ends:"
    tail -n 3 "$TMP/log" | sed 's/^/    /'
elif [ -z "$pid" ]; then echo "  no pid was written to $TMP/app.pid"; fi
check "lost terminal: the log says why" wait_log "the terminal is gone: quitting"
check "lost terminal: the conversation is kept" sh -c "f=\$(sed -n 's|^the conversation is kept in ||p' '$TMP/log'); case \$f in '$TMP/state2/gptscope/chats/'*.json) grep -q '61 8 0 45' \"\$f\" ;; *) false ;; esac"
[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null

# 23. a model file of another format (nanoGPT's ckpt.pt): the message line says how it was
# read, the status bar tags it (needs `make fixtures`)
NG=${GPTSCOPE_FIXTURES:-build/fixtures}/formats/nanogpt/out/ckpt.pt
case $NG in /*) ;; *) NG=$ROOT/$NG ;; esac
if [ -f "$NG" ]; then
    MODEL=$NG
    start
    check "nanoGPT ckpt.pt: the message line says how it was read" wait_for "nanoGPT checkpoint (ckpt.pt, iter 5000, val loss 1.4697), bias=True"
    check "nanoGPT ckpt.pt: the status bar tags the format" wait_for "ckpt.pt [nanoGPT] │ ctx"
    keys "/quit" Enter
    check "nanoGPT ckpt.pt: /quit exits 0" sh -c "i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 0 ]"
fi

# 24. the bundled model in an 80x24 terminal, default settings: ten exchanges
# stay in its context (no turn dropped). Positive sign first: ten replies logged.
rm -f "$TMP/log"
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 80 -y 24 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$ROOT/models/shakespeare' --seed 1 --log '$TMP/log'; sleep 60"
wait_for "you speak as ROMEO" 10
for i in 1 2 3 4 5 6 7 8 9 10; do
    keys "Tell me, sweet lady, what news from Verona, number $i?" Enter
    j=0; while [ "$(grep -c 'reply: ' "$TMP/log" 2>/dev/null)" -lt $i ] && [ $j -lt 1200 ]; do sleep 0.05; j=$((j + 1)); done
done
check "80x24, bundled model: ten replies" sh -c "[ \"\$(grep -c 'reply: ' '$TMP/log')\" -eq 10 ]"
check "80x24, bundled model: no turn dropped from the context" sh -c "! grep -q 'context full: dropped' '$TMP/log'"
# each reply's line says "context N/1024": N grows with every exchange (a drop would shrink it)
# the views fit 80x24, a message of three rows over the input too: the lens shows every layer
# (L0-L5; the attention readout left out); F10 gives the inspector the whole width, and back
keys "/load $TMP/no/such/directory/holds/this/conversation/that/was/never/saved/anywhere/at/all.json" Enter
wait_log "^message: .*all.json"
keys F8 F8 F8
check "80x24: the lens shows its first layer" wait_for "L0 "
check "80x24: the lens shows its last layer, the model's prediction" wait_for "L5 "
keys F10
check "80x24, F10: the inspector over the whole width" sh -c "sleep 0.3; $T capture-pane -p -t app | head -1 | grep -q '^ *logit lens' && ! $T capture-pane -p -t app | grep -q 'sampling'"
keys F10
check "80x24, F10 again: the panes are back" wait_for "sampling"
keys F8
check "80x24, bundled model: the context holds all ten exchanges" sh -c "grep '^reply: ' '$TMP/log' | grep -oE 'context [0-9]+/1024' | tr -dc '0-9/\n' | cut -d/ -f1 | awk 'NR > 1 && \$1 <= prev { bad = 1 } { prev = \$1; n++ } END { exit !(n == 10 && !bad) }'"
quit_app

# 25. nothing a user has is lost: every way out keeps the conversation in a
# file of its own under the state directory's chats/ and says where; keys in
# overlays never quit; a paste is one message; Ctrl-Z suspends
MODEL=$MODEL_SAVED
ST=$TMP/state25
LOG25=$TMP/log
# start25 [ENV...]: as start, with its own state directory and stderr in $TMP/err
start25() {
    rm -f "$TMP/exit" "$TMP/stty" "$TMP/log" "$TMP/err"
    $T kill-server >/dev/null 2>&1
    sleep 0.2
    $T new-session -d -s app -x 100 -y 30 \
        "env XDG_STATE_HOME='$ST' $* '$BIN' chat -m '$MODEL' $EXTRA --template raw --temperature 0 --seed 1 --log '$LOG25' 2>'$TMP/err'; echo \$? > '$TMP/exit'; stty -a > '$TMP/stty'; sleep 60"
    wait_for "sampling" 10 && wait_for "attention"
}
wait_exit() { i=0; while [ ! -s "$TMP/exit" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; [ -s "$TMP/exit" ]; }
# kept_with TEXT: how many kept conversations hold a turn whose text is exactly TEXT
kept_with() { grep -lF "\"$1\"" "$ST"/gptscope/chats/*.json 2>/dev/null | wc -l; }

start25
keys "12 7 99 3 45 0 8 61" Enter
wait_for " 61 8 0 45 3 99 7 12"
keys F9
check "F9 opens the model view" wait_for "model view: 2 layers"
keys C-c
check "Ctrl-C in the model view closes it" wait_for "sampling"
check "Ctrl-C in the model view: the app runs on with the conversation" sh -c "sleep 0.3; [ ! -s '$TMP/exit' ] && $T capture-pane -p -t app | grep -qF ' 61 8 0 45 3 99 7 12'"
keys F8 F8 F8
wait_for "logit lens"
keys F9 Enter
check "F9, Enter from the lens: the head shows in the heatmap" wait_for "attention heatmap"
check "the reply is kept as soon as it ends" sh -c "[ \$(grep -lF '\" 61 8 0 45 3 99 7 12\"' '$ST'/gptscope/chats/*.json | wc -l) = 1 ]"
quit_app
check "/quit: exit status 0" sh -c "wait_exit() { :; }; i=0; while [ ! -s '$TMP/exit' ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \"\$(cat '$TMP/exit')\" = 0 ]"
check "/quit: stderr names the conversation's file" grep -qE "the conversation is kept in $ST/gptscope/chats/[0-9]{8}-[0-9]{6}-[0-9]+-0\.json \(gptscope chat -m $MODEL --continue goes on\)" "$TMP/err"
first=$(sed -n 's|.*the conversation is kept in \([^ ]*\) .*|\1|p' "$TMP/err")

EXTRA="--continue"
start25
EXTRA=""
check "--continue: says which conversation it continues" wait_log "^message: continued $first \(2 turns, 16 tokens\)$"
check "--continue: the conversation is back" wait_for " 61 8 0 45 3 99 7 12"
check "--continue: its context too" wait_for "ctx 16/16"
keys "/reset" Enter
check "/reset: the cleared conversation is kept, and where (the continued file: nothing had changed)" wait_log "^message: conversation cleared; it is kept in $first\$"
check "--continue, nothing changed: no copy of its file" sh -c "[ \$(ls '$ST/gptscope/chats' | wc -l) = 1 ]"
# a second chat at once, on the same state directory
$T new-session -d -s app2 -x 100 -y 30 "env XDG_STATE_HOME='$ST' '$BIN' chat -m '$MODEL' --template raw --temperature 0 --seed 1; sleep 60"
i=0; while ! $T capture-pane -p -t app2 | grep -qF sampling && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
$T send-keys -t app2 "1 2 3" Enter
keys "4 5 6" Enter
check "two chats at once: both replied" sh -c "i=0; while [ \$i -lt 100 ] && ! grep -q '^reply: ' '$TMP/log'; do sleep 0.05; i=\$((i+1)); done; sleep 0.5; $T capture-pane -p -t app2 | grep -q 'ctx [1-9]'"
keys "/draft $TMP/nosuch" Enter
wait_for "nosuch"
$T send-keys -t app2 "/quit" Enter
quit_app
wait_exit
check "two chats at once: each conversation in its own file" sh -c "[ \$(grep -lF '\"1 2 3\"' '$ST'/gptscope/chats/*.json | wc -l) = 1 ] && [ \$(grep -lF '\"4 5 6\"' '$ST'/gptscope/chats/*.json | wc -l) = 1 ] && ! grep -qF '\"1 2 3\"' \$(grep -lF '\"4 5 6\"' '$ST'/gptscope/chats/*.json)"
check "two chats at once: the input history keeps the lines of both" sh -c "grep -qx '1 2 3' '$ST/gptscope/history' && grep -qx '4 5 6' '$ST/gptscope/history'"
check "a failed /draft and later sessions leave the first conversation as it was" sh -c "grep -qF '\" 61 8 0 45 3 99 7 12\"' '$first' && ! grep -qF '\"4 5 6\"' '$first'"

# signals with an unusable XDG_STATE_HOME: HOME's state directory, and stderr says so
: > "$TMP/notadir"
mkdir -p "$TMP/home25"
start25 "XDG_STATE_HOME='$TMP/notadir'" "HOME='$TMP/home25'"
keys "12 7 99 3 45 0 8 61" Enter
wait_for " 61 8 0 45 3 99 7 12"
kill -TERM "$(app_pid)"
wait_exit
check "SIGTERM: exit status 143" sh -c "[ \"\$(cat '$TMP/exit')\" = 143 ]"
check "SIGTERM, unusable XDG_STATE_HOME: stderr names the fallback" grep -qF "state directory: $TMP/notadir/gptscope" "$TMP/err"
check "SIGTERM, unusable XDG_STATE_HOME: kept under HOME, and said" sh -c "f=\$(sed -n 's|.*the conversation is kept in \([^ ]*\) .*|\1|p' '$TMP/err'); case \$f in '$TMP/home25/.local/state/gptscope/chats/'*) grep -qF '61 8 0 45' \"\$f\" ;; *) false ;; esac"

# too small a window: Ctrl-C does not quit; Ctrl-D quits, keeping the chat
start25
keys "12 7 99 3 45 0 8 61" Enter
wait_for " 61 8 0 45 3 99 7 12"
$T resize-window -t app -x 40 -y 10
wait_for "window too small"
keys C-c
check "too small a window: it says Ctrl-D quits" wait_for "Ctrl-D quits; the chat is kept"
check "too small a window: Ctrl-C does not quit" sh -c "sleep 0.3; [ ! -s '$TMP/exit' ]"
keys C-d
wait_exit
check "too small a window: Ctrl-D quits and keeps the conversation" grep -qF "the conversation is kept in $ST/gptscope/chats/" "$TMP/err"

# --log on a FIFO whose reader goes away: the chat goes on, the log stops
rm -f "$TMP/fifo"; mkfifo "$TMP/fifo"
cat "$TMP/fifo" > /dev/null &
reader=$!
LOG25=$TMP/fifo
start25
LOG25=$TMP/log
kill $reader 2>/dev/null; wait $reader 2>/dev/null
keys "12 7 99 3 45 0 8 61" Enter
check "--log reader gone: the reply still streams" wait_for " 61 8 0 45 3 99 7 12"
quit_app
wait_exit
check "--log reader gone: stderr says the log stopped" grep -qF "log $TMP/fifo: cannot write: Broken pipe; logging stopped" "$TMP/err"
check "--log reader gone: no SIGPIPE death (status 1 for the lost log), the conversation kept" sh -c "[ \"\$(cat '$TMP/exit')\" = 1 ] && grep -qF 'the conversation is kept in' '$TMP/err'"
check "--log reader gone: the terminal restored" sh -c "$WAIT_STTY; grep -q ' icanon' '$TMP/stty'"

# the history file is a FIFO: the chat starts at once and says so
rm -f "$ST/gptscope/history"; mkfifo "$ST/gptscope/history"
start25
check "history file is a FIFO: the chat starts, and says the history is not kept" wait_log "^message: $ST/gptscope/history is not a regular file: the input history is not read or kept$"
quit_app
wait_exit
check "history file is a FIFO: /quit exits 0" sh -c "[ \"\$(cat '$TMP/exit')\" = 0 ]"
rm -f "$ST/gptscope/history"

# pastes (bracketed: tmux paste-buffer -p) arrive whole in the input line
start25
printf '12 7 99 3\n45 0 8 61' > "$TMP/paste2"
$T load-buffer "$TMP/paste2"
$T paste-buffer -p -t app
check "a 2-line paste: one editable message, newlines shown" wait_for "> 12 7 99 3↵45 0 8 61"
check "a 2-line paste: the message line says Enter sends it" wait_for "pasted 2 lines into the input line: Enter sends them as one message"
check "a 2-line paste: nothing sent yet" sh -c "sleep 0.3; ! grep -q '^send: ' '$TMP/log'"
keys Enter
check "a 2-line paste, Enter: sent once, as one message" sh -c "i=0; while [ \$i -lt 100 ] && ! grep -q '^reply: ' '$TMP/log'; do sleep 0.05; i=\$((i+1)); done; [ \$(grep -c '^send: ' '$TMP/log') = 1 ]"
keys "/reset" Enter
seq -f "%g 7" 0 59 > "$TMP/paste60"
$T load-buffer "$TMP/paste60"
$T paste-buffer -p -t app
check "a 60-line paste: all of it in the input line" wait_for "pasted 60 lines into the input line"
check "a 60-line paste: its last line is there" wait_for "58 7↵59 7↵"
keys Enter
check "a 60-line paste too long for the context: refused, and said" wait_for "does not fit the context even on its own"
check "a refused message goes back to the input line, whole" sh -c "sleep 0.2; $T capture-pane -p -t app | grep -qF '58 7↵59 7↵' && ! grep -q '^send: prefill [0-9]* tokens, context [0-9]*/16' '$TMP/log.60' 2>/dev/null"
keys C-u C-c
quit_app
wait_exit

# typing during a prefill is kept (it was read and dropped)
start25 GPTSCOPE_TEST_STEP_DELAY_MS=150
keys "12 7 99 3 45 0 8 61" Enter "abc"
check "typed during the prefill: the reply came" wait_for " 61 8 0 45 3 99 7 12" 10
check "typed during the prefill: kept in the input line" wait_for "> abc"
keys C-u
quit_app
wait_exit

# Ctrl-Z: suspended with the terminal restored (the shell's prompt), fg redraws
$T kill-server >/dev/null 2>&1; sleep 0.2
rm -f "$TMP/log"
$T new-session -d -s app -x 100 -y 30 "env PS1='shell> ' bash --norc --noprofile -i"
wait_for "shell>" 5
keys "XDG_STATE_HOME='$ST' '$BIN' chat -m '$MODEL' --template raw --temperature 0 --seed 1 --log '$TMP/log'" Enter
wait_for "sampling" 10
keys "12 7 99 3 45 0 8 61" Enter
wait_for " 61 8 0 45 3 99 7 12"
keys "abc"
wait_for "> abc"
keys C-z
check "Ctrl-Z: the shell has the terminal, the job stopped" wait_for "Stopped" 5
keys "fg" Enter
check "fg: the app redrawn, the conversation and the line as they were" sh -c "i=0; while [ \$i -lt 100 ] && ! $T capture-pane -p -t app | grep -qF 'sampling'; do sleep 0.05; i=\$((i+1)); done; $T capture-pane -p -t app | grep -qF ' 61 8 0 45 3 99 7 12' && $T capture-pane -p -t app | grep -qF '> abc'"
check "fg: nothing was sent while it was stopped" sh -c "[ \$(grep -c '^send: ' '$TMP/log') = 1 ] && grep -q '^suspended' '$TMP/log' && grep -q '^resumed' '$TMP/log'"
keys C-u "/quit" Enter
wait_for "shell>" 5

# bench stopped by Ctrl-C (sent to the whole process group, its probe child too) says so once
keys "clear; '$BIN' bench -m '$MODEL'" Enter
sleep 1.5
keys C-c
check "bench, Ctrl-C: says it stopped" wait_for "bench interrupted while measuring" 10
check "bench, Ctrl-C: says it once" sh -c "sleep 0.5; [ \$($T capture-pane -p -t app | grep -c 'bench interrupted') = 1 ]"

# prompt mode at 80x24 on the bundled model: its notice (two rows on a short screen) leaves
# the heatmap at least three rows of queries
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 80 -y 24 "env XDG_STATE_HOME='$TMP/state' '$BIN' inspect -m '$ROOT/models/shakespeare' -p 'ROMEO: What light through yonder window breaks? It is the east, and Juliet is the sun.'; sleep 60"
wait_for "prompt mode" 10
keys F8 F8
wait_for "attention heatmap"
check "80x24 prompt mode: the heatmap keeps three rows of queries beside the notice" sh -c "[ \$($T capture-pane -p -t app | cut -c45- | grep -cE '^│ ?[0-9]+ ') -ge 3 ]"

# prompt mode, a token far down the model's guesses: marked on the panel's last row with its
# rank, as topk's history ranks it
P='But soft, what light through yonder window breaks? It is the east'
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' inspect -m '$ROOT/models/shakespeare' -p '$P'; sleep 60"
wait_for "prompt mode" 10
keys Tab Tab Tab Up
"$BIN" topk -m "$ROOT/models/shakespeare" -p "$P" -k 1 --export "$TMP/h2.json" > /dev/null
rank=$(${PYTHON:-/usr/bin/python3} -c "import json,sys; print(json.load(open(sys.argv[1]))['positions'][17]['next']['rank'])" "$TMP/h2.json")
check "prompt mode: a token outside the guesses shown is marked with its rank" sh -c "sleep 0.3; $T capture-pane -p -t app | grep -E '\\*·e +.*#$rank\$' >/dev/null"

# 80x24 with a random seed: the knobs panel shows all of it (the log's start line names it)
rm -f "$TMP/log"
$T kill-server >/dev/null 2>&1; sleep 0.2
$T new-session -d -s app -x 80 -y 24 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$ROOT/models/shakespeare' --log '$TMP/log'; sleep 60"
wait_for "you speak as ROMEO" 10
seed=$(sed -n 's/^start: .*, seed \([0-9]*\)$/\1/p' "$TMP/log")
check "80x24, a random seed: the log names it" sh -c "[ -n '$seed' ]"
check "80x24, a random seed: shown whole" sh -c "$T capture-pane -p -t app | grep -qE 'seed +$seed\$'"
quit_app

# forking a reply at a token: /fork 2 puts the next-token panel's second candidate in place of
# the reply's last token (the inspector's query follows the latest token), evaluating only it;
# the status bar names the branch, /branch lists where they part and /branch 0 brings the
# first reply back
check "fork: starts" start
keys "12 7 99 3 45 0 8 61" Enter
check "fork: the reply" wait_for " 61 8 0 45 3 99 7 12"
keys "/fork 2" Enter
check "fork: one token evaluated" wait_log "^fork: turn 1 token 7 -> [0-9]+, evaluated 1"
check "fork: the status bar names the branch" wait_for "branch 1 of 0-1"
check "fork: the reply's label says where the other branch parts" wait_for "reverse [branch 0 parts at token 7]"
check "fork: the reply changed at its last token" sh -c "$T capture-pane -p -t app | grep -qE '^ *61 8 0 45 3 99 7 ' && ! $T capture-pane -p -t app | grep -qF ' 61 8 0 45 3 99 7 12'"
keys "/branch" Enter
check "/branch lists where they part" wait_for "branches 0-1, this is 1; 0 parts from it at turn 1, token 7"
keys "/branch 0" Enter
check "/branch 0: the first reply again" wait_for " 61 8 0 45 3 99 7 12"
check "/branch 0: the status bar" wait_for "branch 0 of 0-1"
quit_app

# a Qwen3-architecture model (random weights, make fixtures) with its own Jinja template
# (ChatML in tokenizer_config.json): the chat opens on it, a message is sent as ChatML
# renders it, and every microscope view names the key/value head each query head reads
QW=${GPTSCOPE_FIXTURES:-build/fixtures}/arch/models/qwen3
case $QW in /*) ;; *) QW=$ROOT/$QW ;; esac
if [ -d "$QW" ]; then
    rm -f "$TMP/log"
    $T kill-server >/dev/null 2>&1; sleep 0.2
    $T new-session -d -s app -x 100 -y 30 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$QW' --temperature 0 --seed 1 -n 4 --log '$TMP/log'; sleep 60"
    wait_for "sampling" 10
    check "the model's own template: the log names it" wait_log "template model"
    keys "hi" Enter
    n=$("$BIN" template -m "$QW" --messages - --ids <<'EOF2' | wc -w
[{"role": "user", "content": "hi"}]
EOF2
)
    check "the model's own template: the message is sent as ChatML renders it ($n tokens)" wait_log "send: prefill $n tokens"
    keys "/template" Enter
    check "/template names the model's" wait_for "template: model"
    keys F9
    check "model view: a head reads a key/value head of its group" wait_for "L0 H0 (KV 0)"
    quit_app
fi

# a model made to answer "Hi" and end its turn with ChatML's <|im_end|>, which is neither
# its end of text nor an end id of its config (tests/ref/make_chat_fixtures.py): the reply
# stops there, the log says why; a system message given with --system is shown above the
# conversation and sent first, as ChatML renders it; /system off removes it
TE=${GPTSCOPE_FIXTURES:-build/fixtures}/chat/turn-end
case $TE in /*) ;; *) TE=$ROOT/$TE ;; esac
if [ -d "$TE" ]; then
    rm -f "$TMP/log"
    $T kill-server >/dev/null 2>&1; sleep 0.2
    $T new-session -d -s app -x 80 -y 24 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$TE' --temperature 0 --system 'Be brief.' --log '$TMP/log'; sleep 60"
    wait_for "sampling" 10
    check "--system: shown above the conversation" wait_for "(/system changes it)"
    check "--system: its text" wait_for "Be brief."
    keys "Hello" Enter
    n=$("$BIN" template -m "$TE" --messages - --ids <<'EOF2' | wc -w
[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
EOF2
)
    check "the system message is sent first ($n tokens)" wait_log "send: prefill [0-9]+ tokens, context $n/"
    check "the reply ends at the template's end of turn" wait_log "reply: 2 tokens \(end of text\)"
    check "the reply reads Hi" sh -c "$T capture-pane -p -t app | grep -qE '^ *Hi *(│|$)'"
    keys "/system off" Enter
    check "/system off" wait_for "system message removed"
    check "/system off: the system message is gone" sh -c "! $T capture-pane -p -t app | grep -qF 'Be brief.'"
    quit_app
fi

# every family with a real tokenizer and its own chat template, as a Hugging Face directory and
# as a GGUF file (tests/ref/make_chat_fixtures.py: random weights made to answer "Hi" and end
# the turn): the chat renders the message with the template, streams "Hi" and stops at the
# template's end-of-turn token
RD=${GPTSCOPE_FIXTURES:-build/fixtures}/chat/real
case $RD in /*) ;; *) RD=$ROOT/$RD ;; esac
if [ -f "$RD/cases.tsv" ]; then
    while IFS="$(printf '\t')" read -r name family endtok; do
        for m in "$RD/$name" "$RD/$name.gguf"; do
            rm -f "$TMP/log"
            $T kill-server >/dev/null 2>&1; sleep 0.2
            $T new-session -d -s app -x 80 -y 24 "env XDG_STATE_HOME='$TMP/state' '$BIN' chat -m '$m' --temperature 0 -n 8 --log '$TMP/log'; sleep 60"
            wait_for "sampling" 10
            keys "Hello" Enter
            what="$family, $(basename "$m"), its own template"
            check "$what: the reply ends at $endtok" wait_log "reply: 1 tokens \\(end of text\\)"
            check "$what: the reply reads Hi" sh -c "$T capture-pane -p -t app | grep -qE '^ *Hi *(│|\$)'"
            quit_app
        done
    done < "$RD/cases.tsv"
fi

echo
echo "tui: $pass passed, $fail failed"
# cmocka-style lines, so that tests/run_tests.sh counts these checks too
echo "[  PASSED  ] $pass test(s)."
[ $fail -eq 0 ] || echo "[  FAILED  ] $fail test(s), listed above."
[ $fail -eq 0 ]
