#!/bin/sh
# models/shakespeare/recipe.sh — trains the bundled model from Tiny Shakespeare
# in one command, into a directory of your choosing (never over this one):
#
#     models/shakespeare/recipe.sh tinyshakespeare.txt OUT [train options]
#
# It runs the two commands of this directory's README (the tokenizer, then
# the model) and copies the chat template. Options after OUT go to `train`
# last, so they override the recipe's (a quick look: --steps 20). The
# gptscope binary is the one built at the repository root, or $GPTSCOPE.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 tinyshakespeare.txt OUT [train options]" >&2
    exit 2
fi
corpus=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
gs=${GPTSCOPE:-$here/../../gptscope}
if [ "$(cd "$out" 2>/dev/null && pwd)" = "$here" ]; then
    echo "$0: OUT is the bundled model's own directory; choose another" >&2
    exit 2
fi
"$gs" train-tokenizer --vocab-size 2048 --train-fraction 0.9 -o "$out" "$corpus"
"$gs" train --tokenizer "$out" -o "$out" \
    --layers 6 --heads 6 --embd 384 --block 1024 --batch 4 --steps 2800 \
    --short-block 256 --short-steps 2200 --short-init-positions \
    --bpe-dropout 0.1 --bpe-copies 32 --bpe-dropout-steps 2200 \
    --lr 1e-3 --min-lr 1e-4 --warmup 100 --dropout 0.2 --attn-dropout 0.2 --weight-decay 0.1 --beta2 0.99 \
    --seed 1337 --threads 2 --eval-every 100 --eval-batches 10 --log-every 10 "$@" "$corpus"
cp "$here/chat_template.json" "$out/"
