// hf_tokenize.js — the reference ids for tests/test_tokenizer_json.c: transformers.js's
// tokenizers (npm @lenml/tokenizers, fetched by scripts/fetch-hf-tokenizers.sh) encoding each
// text of a JSON list, special tokens matched, nothing added (no BOS); and again with the
// post-processor's tokens added (add_special_tokens, a prompt as the model reads it).
//   node tests/ref/hf_tokenize.js LENML_DIST_MAIN_JS TOKENIZER_DIR TEXTS.json OUT.json
// OUT.json: {"ids": [[id, ...], ...], "with_special": [[id, ...], ...], "nfc": [text, ...]}:
// each text's ids, those with the added tokens, and the text in
// Unicode's NFC (JavaScript's String.prototype.normalize), what a tokenizer with an NFC
// normalizer's ids decode to.
"use strict";
const fs = require("fs");
const [lib, dir, textsPath, outPath] = process.argv.slice(2);
const { TokenizerLoader } = require(lib);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8")),
});
const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
const ids = texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: false })));
const withSpecial = texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: true })));
fs.writeFileSync(outPath, JSON.stringify({ ids: ids, with_special: withSpecial, nfc: texts.map((t) => t.normalize("NFC")) }));
