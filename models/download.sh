#!/bin/sh
# Downloads a GPT-2-family model from the Hugging Face hub into a model directory
# that gptscope loads, and verifies it.
#
#   models/download.sh [NAME] [DEST] [--revision REV]
#
# NAME: gpt2 (default), gpt2-medium, gpt2-large, gpt2-xl, distilgpt2,
#       DialoGPT-small, DialoGPT-medium, DialoGPT-large, or any hub repo id
#       ("owner/name") whose files follow the GPT-2 layout.
# DEST: defaults to models/NAME (the last path part of the repo id).
#
# Verification: each LFS file (model.safetensors) is checked against the sha256
# the hub publishes for it, the small files must parse as JSON / merges, and
# finally `gptscope topk` must load the directory and run one forward pass.
# Needs curl and python3. The hub needs internet access; nothing in gptscope's
# build or tests runs this script.
set -eu

name=gpt2 dest="" rev=main
while [ $# -gt 0 ]; do
    case "$1" in
    --revision) rev=${2:?--revision needs a value}; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "download.sh: unknown option $1" >&2; exit 2 ;;
    *) if [ -z "${got_name:-}" ]; then name=$1; got_name=1; else dest=$1; fi; shift ;;
    esac
done

case "$name" in
gpt2|gpt2-medium|gpt2-large|gpt2-xl) repo="openai-community/$name" ;;
distilgpt2) repo="distilbert/distilgpt2" ;;
DialoGPT-small|DialoGPT-medium|DialoGPT-large) repo="microsoft/$name" ;;
*/*) repo=$name ;;
*) echo "download.sh: unknown model '$name' (try gpt2, gpt2-xl, distilgpt2, DialoGPT-small or owner/repo)" >&2; exit 2 ;;
esac
[ -n "$dest" ] || dest="$(dirname "$0")/${repo##*/}"
hub=${HF_ENDPOINT:-https://huggingface.co}
rev_url=$(printf %s "$rev" | sed 's|/|%2F|g') # refs/pr/1 -> refs%2Fpr%2F1
here=$(cd "$(dirname "$0")/.." && pwd)

command -v curl >/dev/null || { echo "download.sh: curl not found (apt-get install curl)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "download.sh: python3 not found" >&2; exit 1; }
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "download.sh: $repo@$rev -> $dest"
# The file list with LFS sha256s for this revision.
curl -fsSL "$hub/api/models/$repo/tree/$rev_url" -o "$tmp/tree.json" || {
    echo "download.sh: cannot list $repo at revision $rev on $hub" >&2; exit 1; }

lfs_sha() { # prints the published sha256 of an LFS file, or nothing
    python3 - "$tmp/tree.json" "$1" <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e.get("path") == sys.argv[2] and e.get("lfs"):
        print(e["lfs"].get("oid") or e["lfs"].get("sha256", ""))
PY
}
has_file() {
    python3 -c 'import json,sys; sys.exit(0 if any(e.get("path")==sys.argv[2] for e in json.load(open(sys.argv[1]))) else 1)' \
        "$tmp/tree.json" "$1"
}

has_file model.safetensors || {
    echo "download.sh: $repo@$rev has no model.safetensors (gptscope reads safetensors only);" >&2
    echo "  look for a safetensors conversion (e.g. --revision refs/pr/N) on the hub" >&2
    exit 1
}
for f in config.json vocab.json merges.txt model.safetensors; do
    has_file "$f" || { echo "download.sh: $repo@$rev lacks $f" >&2; exit 1; }
    echo "  fetching $f"
    curl -fL --progress-bar "$hub/$repo/resolve/$rev_url/$f" -o "$dest/$f.part"
    want=$(lfs_sha "$f")
    if [ -n "$want" ]; then
        got=$(sha256sum "$dest/$f.part" | cut -d' ' -f1)
        [ "$got" = "$want" ] || { echo "download.sh: $f: sha256 $got, the hub says $want" >&2; exit 1; }
        echo "  $f: sha256 verified"
    fi
    mv "$dest/$f.part" "$dest/$f"
done
python3 -c 'import json,sys; [json.load(open(p)) for p in sys.argv[1:]]' "$dest/config.json" "$dest/vocab.json" || {
    echo "download.sh: config.json or vocab.json is not valid JSON" >&2; exit 1; }

if [ -x "$here/gptscope" ]; then
    "$here/gptscope" topk -m "$dest" -p "Hello, my name is" -k 3 >/dev/null || {
        echo "download.sh: gptscope could not load $dest (see the message above)" >&2; exit 1; }
    echo "download.sh: $dest loads and runs"
else
    echo "download.sh: build gptscope (make) to check that $dest loads"
fi
