/* tokenizer_save.c — a loaded tokenizer written back as files (tokenizer_internal.h):
 * GPT-2's vocab.json + merges.txt (tok_save), and Hugging Face's tokenizer.json +
 * tokenizer_config.json (tok_save_hf, gpt2_tokenizer_save_hf), each replaced atomically.
 *
 * tokenizer.json says what the tokenizer runs, in the terms tokenizer_json.c reads and
 * Hugging Face's tokenizers and transformers.js run:
 *   byte-level BPE     ByteLevel with GPT-2's pattern, or Split(the model's pattern,
 *                      Isolated) then ByteLevel, or Digits(individual) then ByteLevel (SmolLM);
 *                      NFC where it normalizes; ignore_merges (Llama 3)
 *   SentencePiece BPE  byte_fallback; the prefix rule: Prepend("▁") and Replace(" ", "▁")
 *                      (Llama 2, a GGUF's add_space_prefix), Replace alone (no prefix), or
 *                      Metaspace(prepend_scheme, split); a decoder that turns "▁" back into
 *                      spaces, bytes into characters, and strips the prefix's space
 *   both               the vocabulary (model tokens only: added tokens that BPE never makes
 *                      are listed in added_tokens alone, as Llama 3's and Qwen's files do),
 *                      the merges in rank order, the added tokens (special or not, matched
 *                      on normalized text or not), and a TemplateProcessing that puts the BOS
 *                      before a text where the tokenizer adds one.
 * A SentencePiece vocabulary read from a GGUF has scores, not merges: each model token that
 * two model tokens make is their merge, ranked by its score (highest first); ties — pieces
 * of equal score, two splits of one piece — are ordered by the merged piece's id, then the
 * parts' ids, as Hugging Face's converter orders a tokenizer.model's merges. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "byte_alphabet.h"
#include "error.h"
#include "gpt2_fileio.h"
#include "json.h"
#include "tokenizer_impl.h"
#include "tokenizer_internal.h"

/* Each byte's character in GPT-2's alphabet as UTF-8 (one or two bytes, NUL-terminated). */
typedef struct {
    char utf8[256][3];
} alphabet;

static void alphabet_init(alphabet *a) {
    for (int b = 0; b < 256; b++) {
        const uint32_t c = byte_to_char(b);
        if (c < 0x80) {
            a->utf8[b][0] = (char)c, a->utf8[b][1] = '\0';
        } else { /* below U+0144: two bytes */
            a->utf8[b][0] = (char)(0xC0 | (c >> 6)), a->utf8[b][1] = (char)(0x80 | (c & 0x3F)), a->utf8[b][2] = '\0';
        }
    }
}

/* Writes a token in GPT-2's alphabet (UTF-8), escaped for a JSON string when json is set:
 * the alphabet has no control characters, so only '"' and '\\' need it. */
static void put_alphabet(FILE *f, const alphabet *a, const char *s, size_t n, int json) {
    for (size_t i = 0; i < n; i++) {
        const char *c = a->utf8[(unsigned char)s[i]];
        if (json && (c[0] == '"' || c[0] == '\\')) fputc('\\', f);
        fputs(c, f);
    }
}

/* A token's merges in rank order: each (left, right) pair of the pair table, sorted by
 * rank, then (pairs of one rank: a scored vocabulary's) merged id, left id, right id. */
static int by_rank(const void *a, const void *b) {
    const pair_slot *x = a, *y = b;
    if (x->rank != y->rank) return (x->rank > y->rank) - (x->rank < y->rank);
    if (x->merged != y->merged) return (x->merged > y->merged) - (x->merged < y->merged);
    return (x->key > y->key) - (x->key < y->key);
}

/* The pair table's entries in rank order (malloc'd, *n of them; NULL with *n 0 when none). */
static gpt2_status merges_in_order(const gpt2_tokenizer *t, pair_slot **out, size_t *n, gpt2_error *err) {
    *out = NULL, *n = 0;
    if (!t->pairs) return GPT2_OK;
    pair_slot *v = malloc(((size_t)t->pairs_mask + 1) * sizeof *v);
    if (!v) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i <= t->pairs_mask; i++)
        if (t->pairs[i].key != PAIR_EMPTY) v[(*n)++] = t->pairs[i];
    qsort(v, *n, sizeof *v, by_rank);
    *out = v;
    return GPT2_OK;
}

static int32_t pair_left(const pair_slot *p) { return (int32_t)(p->key >> 32); }
static int32_t pair_right(const pair_slot *p) { return (int32_t)(uint32_t)p->key; }

/* ---- vocab.json + merges.txt ---------------------------------------------------------- */

typedef struct {
    const tok_file_src *src;
    alphabet a;
} file_writer;

static gpt2_status put_vocab(FILE *f, void *user, gpt2_error *err) {
    const file_writer *w = user;
    const tok_file_src *src = w->src;
    int first = 1;
    fputc('{', f);
    for (int32_t id = 0; id < src->n_vocab; id++) {
        size_t n;
        const char *s = src->token(src->user, id, &n);
        if (!s) continue;
        fputs(first ? "\"" : ",\"", f);
        put_alphabet(f, &w->a, s, n, 1); /* "<|endoftext|>" too: all its bytes stand for themselves */
        fprintf(f, "\":%d", (int)id);
        first = 0;
    }
    fputs("}\n", f);
    return GPT2_OK;
}

static gpt2_status put_merges(FILE *f, void *user, gpt2_error *err) {
    const file_writer *w = user;
    const tok_file_src *src = w->src;
    fputs("#version: 0.2\n", f);
    for (int i = 0; i < src->n_merges; i++) {
        int32_t l, r;
        size_t ln, rn;
        src->merge(src->user, i, &l, &r);
        const char *ls = src->token(src->user, l, &ln), *rs = src->token(src->user, r, &rn);
        put_alphabet(f, &w->a, ls, ln, 0);
        fputc(' ', f);
        put_alphabet(f, &w->a, rs, rn, 0);
        fputc('\n', f);
    }
    return GPT2_OK;
}

gpt2_status tok_save_files(const tok_file_src *src, const char *dir, gpt2_error *err) {
    char path[4096];
    file_writer w = {src, {{{0}}}};
    alphabet_init(&w.a);
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "merges.txt", err);
    if (!st) st = gpt2_fileio_write_atomic(path, put_merges, &w, err);
    if (!st) st = gpt2_fileio_join(path, sizeof path, dir, "vocab.json", err);
    if (!st) st = gpt2_fileio_write_atomic(path, put_vocab, &w, err);
    return st;
}

/* A loaded tokenizer as tok_file_src: its tokens, and its merges in rank order. */
typedef struct {
    const gpt2_tokenizer *t;
    pair_slot *by_rank; /* (n_merges) */
} tok_saver;

static const char *saver_token(const void *user, int32_t id, size_t *len) {
    return gpt2_tokenizer_token_bytes(((const tok_saver *)user)->t, id, len);
}

static void saver_merge(const void *user, int rank, int32_t *l, int32_t *r) {
    const pair_slot *p = &((const tok_saver *)user)->by_rank[rank];
    *l = pair_left(p), *r = pair_right(p);
}

gpt2_status tok_save(const gpt2_tokenizer *t, const char *dir, gpt2_error *err) {
    if (t->spm)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: a SentencePiece-style tokenizer cannot be written as GPT-2's "
                         "vocab.json + merges.txt", dir);
    tok_saver sv = {t, NULL};
    size_t n;
    gpt2_status st = merges_in_order(t, &sv.by_rank, &n, err);
    if (st) return st;
    tok_file_src src = {t->n_vocab, (int)n, saver_token, saver_merge, &sv};
    st = tok_save_files(&src, dir, err);
    free(sv.by_rank);
    return st;
}

/* ---- tokenizer.json ------------------------------------------------------------------- */

static const char MARK[] = "\xE2\x96\x81"; /* U+2581, SentencePiece's space */

/* Whether s[0, n) is valid UTF-8 without NUL: what a JSON string can say. */
static int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        const utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0 || c == 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* s as a JSON string (s valid UTF-8: utf8_ok). */
static void put_json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fputc('\\', f), fputc(c, f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

typedef struct {
    const gpt2_tokenizer *t;
    const char *path;
    alphabet a;
    pair_slot *merges;
    size_t n_merges;
    unsigned char *added;   /* (n_vocab) 1 + TOK_ADDED_* flags of an added token, 0 for others */
} json_writer;

/* Whether id is a model token (in model.vocab): BPE may make it. */
static int in_vocab(const json_writer *w, int32_t id) {
    const gpt2_tokenizer *t = w->t;
    return t->tok_len[id] >= 0 && (!t->in_model || t->in_model[id]);
}

/* Token id as model.vocab writes it: a byte-level token's bytes in GPT-2's alphabet, a
 * piece as it is; an added token outside the vocabulary as its text. */
static void put_token(FILE *f, const json_writer *w, int32_t id) {
    const gpt2_tokenizer *t = w->t;
    const char *s = t->blob + t->tok_off[id];
    const size_t n = (size_t)t->tok_len[id];
    if (t->spm || !in_vocab(w, id)) {
        put_json_str(f, s, n);
    } else {
        fputc('"', f);
        put_alphabet(f, &w->a, s, n, 1);
        fputc('"', f);
    }
}

/* Every string the file holds as it is (pieces, added tokens' texts) must be UTF-8. */
static gpt2_status check_strings(const json_writer *w, gpt2_error *err) {
    const gpt2_tokenizer *t = w->t;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->tok_len[id] < 0 || !(t->spm || !in_vocab(w, id))) continue;
        if (!utf8_ok(t->blob + t->tok_off[id], (size_t)t->tok_len[id]) || !t->tok_len[id])
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token %d is not valid UTF-8 text: tokenizer.json cannot "
                             "hold it", w->path, id);
    }
    return GPT2_OK;
}

/* A cJSON value printed on one line; "null" when v is NULL. */
static void put_cjson(FILE *f, cJSON *v) {
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    fputs(s ? s : "null", f);
    cJSON_free(s);
    cJSON_Delete(v);
}

static cJSON *typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static cJSON *byte_level(int use_regex) {
    cJSON *o = typed("ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", 0);
    cJSON_AddBoolToObject(o, "trim_offsets", 0);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

static cJSON *sequence(const char *type, const char *key, cJSON *first, cJSON *second) {
    cJSON *o = typed(type), *list = cJSON_AddArrayToObject(o, key);
    cJSON_AddItemToArray(list, first);
    if (second) cJSON_AddItemToArray(list, second);
    return o;
}

/* A Replace of the string `from` by `to` (a normalizer's and a decoder's step). */
static cJSON *replace(const char *from, const char *to) {
    cJSON *o = typed("Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "pattern"), "String", from);
    cJSON_AddStringToObject(o, "content", to);
    return o;
}

static cJSON *normalizer(const gpt2_tokenizer *t) {
    if (!t->spm) return t->nfc ? typed("NFC") : NULL;
    cJSON *prepend = NULL;
    if (t->spm_prepend == TOK_SPM_LEGACY) {
        prepend = typed("Prepend");
        cJSON_AddStringToObject(prepend, "prepend", MARK);
    }
    cJSON *rep = t->spm_replace ? replace(" ", MARK) : NULL;
    if (!prepend && !rep) return NULL;
    return sequence("Sequence", "normalizers", prepend ? prepend : rep, prepend ? rep : NULL);
}

static cJSON *pre_tokenizer(const gpt2_tokenizer *t) {
    if (t->spm) {
        if (!t->spm_metaspace) return NULL;
        cJSON *o = typed("Metaspace");
        cJSON_AddStringToObject(o, "replacement", MARK);
        cJSON_AddStringToObject(o, "prepend_scheme", t->spm_prepend == TOK_SPM_ALWAYS  ? "always"
                                                     : t->spm_prepend == TOK_SPM_FIRST ? "first"
                                                                                       : "never");
        cJSON_AddBoolToObject(o, "split", t->spm_split);
        return o;
    }
    if (t->digits_re) {
        cJSON *d = typed("Digits");
        cJSON_AddBoolToObject(d, "individual_digits", 1);
        return sequence("Sequence", "pretokenizers", d, byte_level(1));
    }
    if (!t->pattern) return byte_level(1);
    cJSON *split = typed("Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", t->pattern);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    return sequence("Sequence", "pretokenizers", split, byte_level(0));
}

/* One item of a TemplateProcessing: the BOS, or sequence A or B. */
static void put_item(FILE *f, const json_writer *w, const char *seq, int type_id) {
    fputs(seq ? "{\"Sequence\": {\"id\": " : "{\"SpecialToken\": {\"id\": ", f);
    if (seq) fprintf(f, "\"%s\"", seq);
    else put_token(f, w, w->t->bos);
    fprintf(f, ", \"type_id\": %d}}", type_id);
}

/* The BOS before every text: TemplateProcessing's "single" [BOS, A], "pair" [BOS, A, BOS, B]
 * (as Llama's files have it); without one, ByteLevel's (offsets only) or none. */
static void put_post_processor(FILE *f, const json_writer *w) {
    const gpt2_tokenizer *t = w->t;
    if (t->bos < 0) {
        put_cjson(f, t->spm ? NULL : byte_level(0));
        return;
    }
    fputs("{\"type\": \"TemplateProcessing\", \"single\": [", f);
    put_item(f, w, NULL, 0), fputs(", ", f), put_item(f, w, "A", 0);
    fputs("], \"pair\": [", f);
    put_item(f, w, NULL, 0), fputs(", ", f), put_item(f, w, "A", 0), fputs(", ", f);
    put_item(f, w, NULL, 1), fputs(", ", f), put_item(f, w, "B", 1);
    fputs("], \"special_tokens\": {", f);
    put_token(f, w, t->bos);
    fputs(": {\"id\": ", f);
    put_token(f, w, t->bos);
    fprintf(f, ", \"ids\": [%d], \"tokens\": [", (int)t->bos);
    put_token(f, w, t->bos);
    fputs("]}}}", f);
}

static cJSON *decoder(const gpt2_tokenizer *t) {
    if (!t->spm) return byte_level(1);
    cJSON *d = sequence("Sequence", "decoders", replace(MARK, " "), typed("ByteFallback")), *list = d->child->next;
    cJSON_AddItemToArray(list, typed("Fuse"));
    if (gpt2_tokenizer_space_prefix(t)) {
        cJSON *strip = typed("Strip");
        cJSON_AddStringToObject(strip, "content", " ");
        cJSON_AddNumberToObject(strip, "start", 1);
        cJSON_AddNumberToObject(strip, "stop", 0);
        cJSON_AddItemToArray(list, strip);
    }
    return d;
}

static void put_added(FILE *f, const json_writer *w) {
    int first = 1;
    fputs("  \"added_tokens\": [", f);
    for (int32_t id = 0; id < w->t->n_vocab; id++) {
        if (!w->added[id]) continue;
        const int flags = w->added[id] - 1;
        fprintf(f, "%s\n    {\"id\": %d, \"content\": ", first ? "" : ",", (int)id);
        put_json_str(f, w->t->blob + w->t->tok_off[id], (size_t)w->t->tok_len[id]);
        fprintf(f, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": %s, "
                   "\"special\": %s}", flags & TOK_ADDED_NORMALIZED ? "true" : "false",
                flags & TOK_ADDED_SPECIAL ? "true" : "false");
        first = 0;
    }
    fputs(first ? "],\n" : "\n  ],\n", f);
}

static void put_model(FILE *f, const json_writer *w) {
    const gpt2_tokenizer *t = w->t;
    const int32_t unk = t->spm ? gpt2_tokenizer_piece_id(t, "<unk>", 5) : -1;
    fprintf(f, "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": %s, \"continuing_subword_prefix\": "
               "null, \"end_of_word_suffix\": null, \"fuse_unk\": %s, \"byte_fallback\": %s, \"ignore_merges\": %s,\n",
            unk >= 0 ? "\"<unk>\"" : "null", t->spm ? "true" : "false", t->spm ? "true" : "false",
            t->ignore_merges ? "true" : "false");
    fputs("    \"vocab\": {", f);
    int first = 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!(t->spm ? t->tok_len[id] >= 0 : in_vocab(w, id))) continue;
        fputs(first ? "\n      " : ",\n      ", f);
        put_token(f, w, id);
        fprintf(f, ": %d", (int)id);
        first = 0;
    }
    fputs("\n    },\n    \"merges\": [", f);
    for (size_t i = 0; i < w->n_merges; i++) {
        fputs(i ? ",\n      [" : "\n      [", f);
        put_token(f, w, pair_left(&w->merges[i]));
        fputs(", ", f);
        put_token(f, w, pair_right(&w->merges[i]));
        fputc(']', f);
    }
    fputs("\n    ]\n  }\n}\n", f);
}

static gpt2_status put_tokenizer_json(FILE *f, void *user, gpt2_error *err) {
    const json_writer *w = user;
    const gpt2_tokenizer *t = w->t;
    fputs("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n", f);
    put_added(f, w);
    fputs("  \"normalizer\": ", f);
    put_cjson(f, normalizer(t));
    fputs(",\n  \"pre_tokenizer\": ", f);
    put_cjson(f, pre_tokenizer(t));
    fputs(",\n  \"post_processor\": ", f);
    put_post_processor(f, w);
    fputs(",\n  \"decoder\": ", f);
    put_cjson(f, decoder(t));
    fputs(",\n", f);
    put_model(f, w);
    return GPT2_OK;
}

/* The text of token id for tokenizer_config.json ("<s>"), or NULL. */
static const char *token_text(const gpt2_tokenizer *t, int32_t id, char *buf, size_t cap) {
    size_t n;
    const char *s = gpt2_tokenizer_token_bytes(t, id, &n);
    if (!s || n >= cap || !utf8_ok(s, n)) return NULL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static gpt2_status write_config(const gpt2_tokenizer *t, const char *path, const tok_hf_extra *x, gpt2_error *err) {
    char bos_buf[256], eos_buf[256];
    const char *bos = x && x->bos_text && *x->bos_text ? x->bos_text : token_text(t, t->bos, bos_buf, sizeof bos_buf);
    const char *eos = x && x->eos_text && *x->eos_text ? x->eos_text : token_text(t, t->eot, eos_buf, sizeof eos_buf);
    const char *const texts[] = {bos, eos, x ? x->chat_template : NULL};
    for (int i = 0; i < 3; i++)
        if (texts[i] && !utf8_ok(texts[i], strlen(texts[i])))
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: the %s is not valid UTF-8", path,
                             i == 2 ? "chat template" : i ? "EOS token's text" : "BOS token's text");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "add_bos_token", t->bos >= 0);
    cJSON_AddBoolToObject(j, "add_eos_token", 0);
    if (bos) cJSON_AddStringToObject(j, "bos_token", bos);
    else cJSON_AddNullToObject(j, "bos_token");
    if (eos) cJSON_AddStringToObject(j, "eos_token", eos);
    else cJSON_AddNullToObject(j, "eos_token");
    if (t->spm && gpt2_tokenizer_piece_id(t, "<unk>", 5) >= 0) cJSON_AddStringToObject(j, "unk_token", "<unk>");
    if (x && x->chat_template) cJSON_AddStringToObject(j, "chat_template", x->chat_template);
    cJSON_AddBoolToObject(j, "clean_up_tokenization_spaces", 0);
    if (x && x->model_max_length > 0) cJSON_AddNumberToObject(j, "model_max_length", x->model_max_length);
    cJSON_AddStringToObject(j, "tokenizer_class", "PreTrainedTokenizerFast");
    return json_write_file(path, j, err);
}

gpt2_status tok_save_hf(const gpt2_tokenizer *t, const char *dir, const tok_hf_extra *x, gpt2_error *err) {
    char path[4096];
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "tokenizer.json", err);
    if (st) return st;
    if (t->chars)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: a character-level tokenizer cannot be written as a BPE's "
                         "tokenizer.json", path);
    json_writer w = {.t = t, .path = path};
    alphabet_init(&w.a);
    if (!(w.added = calloc((size_t)t->n_vocab, 1))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->n_added; i++) w.added[t->added[i]] = (unsigned char)(1 + t->added_flags[i]);
    if (!(st = check_strings(&w, err)) && !(st = merges_in_order(t, &w.merges, &w.n_merges, err)))
        st = gpt2_fileio_write_atomic(path, put_tokenizer_json, &w, err);
    free(w.merges), free(w.added);
    if (!st && !(st = gpt2_fileio_join(path, sizeof path, dir, "tokenizer_config.json", err)))
        st = write_config(t, path, x, err);
    return st;
}

gpt2_status gpt2_tokenizer_save_hf(const gpt2_tokenizer *tok, const char *dir, gpt2_error *err) {
    if (!tok || !dir) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_save_hf: NULL argument");
    return tok_save_hf(tok, dir, NULL, err);
}
