/* tokenizer_json.c — Hugging Face's tokenizer.json, the byte-level BPE kind (Llama 3, GPT-2,
 * GPT-NeoX, SmolLM) and the SentencePiece-style BPE kind (Llama 2, TinyLlama, Mistral): the
 * model's vocabulary and merges, its normalizer and pre-tokenizer and its added tokens, read
 * into tok_parts (tokenizer_internal.h). What the file asks for that gptscope does not do yet
 * (another normalizer or pre-tokenizer, a BPE whose unknown characters become <unk>, added
 * tokens that strip spaces) is refused by name, never approximated.
 *
 * The parts of the file read:
 *     model            {"type": "BPE", "vocab": {token: id}, "merges": ["a b", ...] or
 *                      [["a", "b"], ...], "ignore_merges", "byte_fallback", ...}
 *     pre_tokenizer    ByteLevel with use_regex (GPT-2's pattern), or Sequence of
 *                      Split {"pattern": {"Regex"}, "behavior": "Isolated"} and ByteLevel
 *                      without use_regex (Llama 3, Qwen), or of Digits with
 *                      individual_digits and ByteLevel with use_regex (SmolLM)
 *     normalizer       null or NFC (applied to the text between added tokens)
 *   a SentencePiece-style BPE (byte_fallback, or one of the steps below): read_spm
 *     normalizer       null, Prepend("▁"), Replace(" ", "▁"), or a Sequence of both
 *     pre_tokenizer    null or Metaspace
 *     added_tokens     [{"id", "content", "special", "normalized", "lstrip", "rstrip",
 *                      "single_word"}]: those not normalized matched first on the raw text,
 *                      then the normalized ones on the normalized text, as HF does
 * Token strings of the vocabulary and merges are in GPT-2's byte alphabet (SentencePiece's:
 * pieces, kept as written); added tokens' contents are raw text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "error.h"
#include "gpt2_tokenizer.h"
#include "json.h"
#include "textio.h"
#include "tokenizer_internal.h"

/* tokenizer.json files run to tens of MB (Gemma 3's is 33 MB). */
#define MAX_JSON_BYTES ((size_t)512 << 20)

typedef struct {
    json_src src;
    tok_parts p;
    char **token;        /* (n_vocab) raw bytes per id, owned */
    size_t *token_len;
    int32_t *merges;     /* (n_merges, 2) */
    int32_t *added;
    unsigned char *added_flags; /* TOK_ADDED_* */
    unsigned char *in_model;    /* (n_vocab) 1: in model.vocab */
    char *pattern;       /* owned copy */
} reader;

static gpt2_status refuse(const reader *r, const char *what) {
    return gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: %s, which gptscope does not run yet", r->src.path, what);
}

static const char *type_of(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static int flag(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* The pre-tokenizer: GPT-2's pattern (NULL) or a Split's regex into r->pattern. */
static gpt2_status read_pre_tokenizer(reader *r, const cJSON *pre) {
    char what[200];
    if (!strcmp(type_of(pre), "ByteLevel")) {
        if (!flag(pre, "use_regex")) return refuse(r, "a ByteLevel pre-tokenizer without use_regex and no Split");
        if (flag(pre, "add_prefix_space")) return refuse(r, "a ByteLevel pre-tokenizer with add_prefix_space");
        return GPT2_OK; /* GPT-2's pattern */
    }
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *split = cJSON_GetArrayItem(seq, 0), *bl = cJSON_GetArrayItem(seq, 1);
    if (!strcmp(type_of(pre), "Sequence") && cJSON_GetArraySize(seq) == 2 && !strcmp(type_of(split), "Digits")) {
        /* SmolLM's: each digit on its own, then GPT-2's pattern */
        if (!flag(split, "individual_digits")) return refuse(r, "a Digits pre-tokenizer without individual_digits");
        if (strcmp(type_of(bl), "ByteLevel") || !flag(bl, "use_regex") || flag(bl, "add_prefix_space"))
            return refuse(r, "a Digits pre-tokenizer followed by other than ByteLevel with use_regex");
        r->p.split_digits = 1;
        return GPT2_OK;
    }
    if (strcmp(type_of(pre), "Sequence") || cJSON_GetArraySize(seq) != 2 || strcmp(type_of(split), "Split") ||
        strcmp(type_of(bl), "ByteLevel")) {
        snprintf(what, sizeof what, "a %.60s pre-tokenizer (gptscope runs ByteLevel, or Split or Digits then ByteLevel)",
                 cJSON_IsObject(pre) ? type_of(pre) : "missing");
        return refuse(r, what);
    }
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    if (!cJSON_IsString(pat)) return refuse(r, "a Split pre-tokenizer on a string rather than a Regex");
    if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") || flag(split, "invert"))
        return refuse(r, "a Split pre-tokenizer whose behavior is not Isolated");
    if (flag(bl, "use_regex") || flag(bl, "add_prefix_space"))
        return refuse(r, "a ByteLevel step with use_regex or add_prefix_space after a Split");
    if (!(r->pattern = strdup(pat->valuestring)))
        return gpt2_fail(r->src.err, GPT2_ERR_NOMEM, "out of memory");
    return GPT2_OK;
}

/* Token id's raw bytes: set once (a second, different set is refused). */
static gpt2_status put_token(reader *r, int32_t id, const char *bytes, size_t n, const char *field) {
    if (id < 0 || id >= r->p.n_vocab)
        return gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: %s: id %d out of range", r->src.path, field, id);
    if (r->token[id]) {
        if (r->token_len[id] == n && !memcmp(r->token[id], bytes, n)) return GPT2_OK;
        return gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: %s: id %d is given to two different tokens", r->src.path,
                         field, id);
    }
    if (!(r->token[id] = malloc(n ? n : 1))) return gpt2_fail(r->src.err, GPT2_ERR_NOMEM, "out of memory");
    memcpy(r->token[id], bytes, n);
    r->token_len[id] = n;
    return GPT2_OK;
}

/* The largest id of the vocabulary and the added tokens, checked to be integers in range. */
static gpt2_status count_ids(reader *r, const cJSON *vocab, const cJSON *added) {
    double max = -1;
    for (const cJSON *it = vocab->child; it; it = it->next) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (1 << 24) ||
            it->valuedouble != (double)(int32_t)it->valuedouble)
            return json_bad(&r->src, "model.vocab", "integer ids from 0 to 2^24", json_type_name(it));
        max = it->valuedouble > max ? it->valuedouble : max;
    }
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24) ||
            id->valuedouble != (double)(int32_t)id->valuedouble)
            return json_bad(&r->src, "added_tokens[].id", "an integer id from 0 to 2^24", json_type_name(id));
        max = id->valuedouble > max ? id->valuedouble : max;
    }
    r->p.n_vocab = (int)max + 1;
    r->token = calloc((size_t)r->p.n_vocab + 1, sizeof *r->token);
    r->token_len = calloc((size_t)r->p.n_vocab + 1, sizeof *r->token_len);
    r->in_model = calloc((size_t)r->p.n_vocab + 1, 1);
    return r->token && r->token_len && r->in_model ? GPT2_OK : gpt2_fail(r->src.err, GPT2_ERR_NOMEM, "out of memory");
}

static gpt2_status read_vocab(reader *r, const cJSON *vocab) {
    if (r->p.spm) { /* SentencePiece pieces, kept as written */
        gpt2_status st = GPT2_OK;
        for (const cJSON *it = vocab->child; it && !st; it = it->next)
            if (!it->string[0])
                st = gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: model.vocab: the empty string is a token", r->src.path);
            else if (!(st = put_token(r, (int32_t)it->valuedouble, it->string, strlen(it->string), "model.vocab")))
                r->in_model[(int32_t)it->valuedouble] = 1;
        return st;
    }
    char *raw = NULL;
    size_t cap = 0;
    gpt2_status st = GPT2_OK;
    for (const cJSON *it = vocab->child; it && !st; it = it->next) {
        const size_t n = strlen(it->string);
        if (n + 1 > cap) {
            char *grown = realloc(raw, cap = 2 * n + 16);
            if (!grown) {
                free(raw);
                return gpt2_fail(r->src.err, GPT2_ERR_NOMEM, "out of memory");
            }
            raw = grown;
        }
        uint32_t bad;
        const long k = tok_alphabet_to_bytes(it->string, n, raw, &bad);
        char shown[TEXT_SHOW_BUF];
        if (k <= 0)
            st = gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: model.vocab: token \"%s\" is not in GPT-2's byte "
                           "alphabet (a byte-level BPE's vocabulary is)", r->src.path,
                           text_show(it->string, n, shown));
        else if (!(st = put_token(r, (int32_t)it->valuedouble, raw, (size_t)k, "model.vocab")))
            r->in_model[(int32_t)it->valuedouble] = 1;
    }
    free(raw);
    return st;
}

/* The vocabulary's strings (in the byte alphabet) sorted, for the merges' lookups:
 * cJSON's own lookup is a list walk. */
static int by_name(const void *a, const void *b) {
    const tok_named *x = a, *y = b;
    const int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

void tok_named_sort(tok_named *v, int n) { qsort(v, (size_t)n, sizeof *v, by_name); }

int32_t tok_named_find(const tok_named *v, int n, const char *s, size_t len) {
    const tok_named key = {s, len, 0}, *hit = bsearch(&key, v, (size_t)n, sizeof *v, by_name);
    return hit ? hit->id : -1;
}

static int32_t part_id(const tok_named *v, int n, const char *s, size_t len) { return tok_named_find(v, n, s, len); }

/* Each merge's two parts as ids. */
static gpt2_status merge_ids(reader *r, const tok_named *v, int nv, const cJSON *merges) {
    int i = 0;
    for (const cJSON *it = merges->child; it; it = it->next, i++) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (cJSON_IsString(it) && (b = strchr(it->valuestring, ' ')) && !strchr(b + 1, ' ')) {
            a = it->valuestring, na = (size_t)(b - a), b++, nb = strlen(b);
        } else if (cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) && cJSON_IsString(it->child->next)) {
            a = it->child->valuestring, na = strlen(a), b = it->child->next->valuestring, nb = strlen(b);
        } else {
            return gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: model.merges[%d]: expected \"left right\" or "
                             "[\"left\", \"right\"], found %s", r->src.path, i, json_type_name(it));
        }
        r->merges[2 * i] = part_id(v, nv, a, na);
        r->merges[2 * i + 1] = part_id(v, nv, b, nb);
        if (r->merges[2 * i] < 0 || r->merges[2 * i + 1] < 0) {
            char shown[TEXT_SHOW_BUF];
            const char *miss = r->merges[2 * i] < 0 ? a : b;
            return gpt2_fail(r->src.err, GPT2_ERR_TOKENIZER, "%s: model.merges[%d]: \"%s\" is not in model.vocab",
                             r->src.path, i, text_show(miss, r->merges[2 * i] < 0 ? na : nb, shown));
        }
    }
    return GPT2_OK;
}

/* model.merges: "a b" strings (older files) or ["a", "b"] pairs, in rank order. */
static gpt2_status read_merges(reader *r, const cJSON *vocab, const cJSON *merges) {
    const int n = cJSON_GetArraySize(merges), nv = cJSON_GetArraySize(vocab);
    tok_named *v = malloc(((size_t)nv + 1) * sizeof *v);
    if (!v || !(r->merges = malloc(2 * ((size_t)n + 1) * sizeof *r->merges))) {
        free(v);
        return gpt2_fail(r->src.err, GPT2_ERR_NOMEM, "out of memory");
    }
    int k = 0;
    for (const cJSON *it = vocab->child; it; it = it->next)
        v[k++] = (tok_named){it->string, strlen(it->string), (int32_t)it->valuedouble};
    tok_named_sort(v, k);
    gpt2_status st = merge_ids(r, v, k, merges);
    free(v);
    if (!st) r->p.n_merges = n;
    return st;
}

/* Whether NFC leaves s as it is (HF matches a normalized added token by its normalized content). */
static int nfc_invariant(const char *s) {
    utf8proc_uint8_t *n = utf8proc_NFC((const utf8proc_uint8_t *)s);
    const int same = n && !strcmp((const char *)n, s);
    free(n);
    return same;
}

static gpt2_status read_added(reader *r, const cJSON *added) {
    const int n = cJSON_GetArraySize(added);
    r->added = malloc(((size_t)n + 1) * sizeof *r->added);
    r->added_flags = malloc((size_t)n + 1);
    if (!r->added || !r->added_flags) return gpt2_fail(r->src.err, GPT2_ERR_NOMEM, "out of memory");
    int i = 0;
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next, i++) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsString(content) || !content->valuestring[0])
            return json_bad(&r->src, "added_tokens[].content", "a non-empty string", json_type_name(content));
        if (flag(it, "lstrip") || flag(it, "rstrip") || flag(it, "single_word"))
            return refuse(r, "an added token with lstrip, rstrip or single_word");
        r->added[i] = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
        /* "normalized" defaults to the opposite of "special", as in HF */
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(it, "normalized");
        const int normalized = cJSON_IsBool(norm) ? cJSON_IsTrue(norm) : !flag(it, "special");
        r->added_flags[i] = (unsigned char)((flag(it, "special") ? TOK_ADDED_SPECIAL : 0) |
                                            (normalized ? TOK_ADDED_NORMALIZED : 0));
        if (normalized && r->p.nfc && !nfc_invariant(content->valuestring))
            return refuse(r, "an added token matched on normalized text whose content NFC changes");
        /* HF matches it as the normalizer writes it: after a U+2581, with U+2581 for spaces */
        if (normalized && (r->p.spm_prepend == TOK_SPM_LEGACY || (r->p.spm_replace && strchr(content->valuestring, ' '))))
            return refuse(r, "an added token matched on normalized text that a Prepend or Replace normalizer changes");
        gpt2_status st = put_token(r, r->added[i], content->valuestring, strlen(content->valuestring),
                                   "added_tokens");
        if (st) return st;
    }
    r->p.n_added = n;
    return GPT2_OK;
}

static const char MARK[] = "\xE2\x96\x81"; /* U+2581 */

static int str_is(const cJSON *o, const char *key, const char *want) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

/* Whether n is one of a SentencePiece-style normalizer's steps (or a Sequence with one). */
static int spm_step(const cJSON *n) {
    if (!strcmp(type_of(n), "Prepend") || !strcmp(type_of(n), "Replace")) return 1;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
    if (strcmp(type_of(n), "Sequence") || !cJSON_IsArray(list)) return 0;
    for (const cJSON *it = list->child; it; it = it->next)
        if (spm_step(it)) return 1;
    return 0;
}

/* A SentencePiece-style BPE (Llama 2, Mistral, Gemma): byte_fallback; a normalizer of
 * Prepend("▁") (before every section) and Replace(" ", "▁"), or a Metaspace pre-tokenizer
 * (replacement "▁", prepend_scheme "always", "first" or "never", or older files'
 * add_prefix_space; split), or after Replace Gemma's Split on " " (of which none is left);
 * no other normalizer or pre-tokenizer. The decoder is not read: the pieces say how to
 * decode. */
static gpt2_status read_spm(reader *r, const cJSON *model, const cJSON *norm, const cJSON *pre) {
    char what[200];
    if (!flag(model, "byte_fallback"))
        return refuse(r, "a SentencePiece-style BPE without byte_fallback (characters it lacks would be <unk>)");
    r->p.spm = 1;
    const cJSON *list = !strcmp(type_of(norm), "Sequence") ? cJSON_GetObjectItemCaseSensitive(norm, "normalizers") : NULL;
    if (list && !cJSON_IsArray(list)) return json_bad(&r->src, "normalizer.normalizers", "an array", json_type_name(list));
    for (const cJSON *it = list ? list->child : cJSON_IsObject(norm) ? norm : NULL; it; it = list ? it->next : NULL) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(it, "pattern");
        if (!strcmp(type_of(it), "Prepend") && str_is(it, "prepend", MARK) && !r->p.spm_prepend) {
            r->p.spm_prepend = TOK_SPM_LEGACY;
        } else if (!strcmp(type_of(it), "Replace") && str_is(pat, "String", " ") && str_is(it, "content", MARK) &&
                   !r->p.spm_replace) {
            r->p.spm_replace = 1;
        } else {
            snprintf(what, sizeof what, "the normalizer %.60s with a SentencePiece-style BPE (gptscope runs "
                     "Prepend(\"▁\") and Replace(\" \", \"▁\"), once each)", cJSON_IsObject(it) ? type_of(it) : "step");
            return refuse(r, what);
        }
    }
    if (!pre || cJSON_IsNull(pre)) return GPT2_OK;
    /* Gemma's Split on " " after a normalizer that left no " ": it splits nothing */
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pre, "pattern");
    if (!strcmp(type_of(pre), "Split") && str_is(pat, "String", " ") && r->p.spm_replace && !flag(pre, "invert"))
        return GPT2_OK;
    if (strcmp(type_of(pre), "Metaspace")) {
        snprintf(what, sizeof what, "a %.60s pre-tokenizer with a SentencePiece-style BPE (gptscope runs Metaspace)",
                 cJSON_IsObject(pre) ? type_of(pre) : "non-object");
        return refuse(r, what);
    }
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(pre, "prepend_scheme"),
                *add = cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space"),
                *split = cJSON_GetObjectItemCaseSensitive(pre, "split");
    if (!str_is(pre, "replacement", MARK)) return refuse(r, "a Metaspace pre-tokenizer whose replacement is not \"▁\"");
    int prepend = TOK_SPM_ALWAYS; /* HF's defaults: "always", split */
    if (str_is(pre, "prepend_scheme", "first")) prepend = TOK_SPM_FIRST;
    else if (str_is(pre, "prepend_scheme", "never")) prepend = TOK_SPM_NONE;
    else if (scheme && !str_is(pre, "prepend_scheme", "always"))
        return refuse(r, "a Metaspace pre-tokenizer whose prepend_scheme is not always, first or never");
    if (cJSON_IsFalse(add)) prepend = TOK_SPM_NONE;
    if (prepend != TOK_SPM_NONE && r->p.spm_prepend)
        return refuse(r, "both a Prepend normalizer and a Metaspace pre-tokenizer that prepends");
    r->p.spm_metaspace = 1;
    r->p.spm_split = !cJSON_IsFalse(split);
    if (prepend != TOK_SPM_NONE) r->p.spm_prepend = prepend;
    return GPT2_OK;
}

/* The model part: a BPE, byte-level or SentencePiece-style, and its normalizer. */
static gpt2_status check_model(reader *r, const cJSON *model, const cJSON *root) {
    if (strcmp(type_of(model), "BPE")) {
        char what[120];
        snprintf(what, sizeof what, "a %.60s model (gptscope runs BPE)", cJSON_IsObject(model) ? type_of(model) : "missing");
        return refuse(r, what);
    }
    const cJSON *normalizer = cJSON_GetObjectItemCaseSensitive(root, "normalizer"),
                *pre_tok = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (normalizer && !cJSON_IsNull(normalizer) && !cJSON_IsObject(normalizer))
        return json_bad(&r->src, "normalizer", "null or an object", json_type_name(normalizer));
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix"),
                *suf = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    if ((cJSON_IsString(pre) && pre->valuestring[0]) || (cJSON_IsString(suf) && suf->valuestring[0]))
        return refuse(r, "a BPE with a subword prefix or suffix");
    if (flag(model, "byte_fallback") || !strcmp(type_of(pre_tok), "Metaspace") || spm_step(normalizer)) {
        if (!strcmp(type_of(pre_tok), "ByteLevel")) return refuse(r, "a ByteLevel pre-tokenizer with byte_fallback");
        return read_spm(r, model, normalizer, pre_tok);
    }
    const cJSON *norm = normalizer;
    if (!strcmp(type_of(norm), "NFC")) r->p.nfc = 1;
    else if (norm && !cJSON_IsNull(norm)) {
        char what[120];
        snprintf(what, sizeof what, "the normalizer %.60s", type_of(norm));
        return refuse(r, what);
    }
    r->p.ignore_merges = flag(model, "ignore_merges");
    return GPT2_OK;
}

/* The post-processor's BOS: a TemplateProcessing (alone or in a Sequence)
 * whose "single" template starts with a special token (Llama 3's
 * <|begin_of_text|>) puts that token before every text; anything else adds
 * nothing before it (ByteLevel, Qwen's). A special token after the text ($A
 * then an EOS) is not added: a prompt to continue must not end in one. */
static gpt2_status read_post_processor(reader *r, const cJSON *pp) {
    if (!strcmp(type_of(pp), "Sequence")) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(pp, "processors");
        for (it = cJSON_IsArray(it) ? it->child : NULL; it; it = it->next)
            if (!strcmp(type_of(it), "TemplateProcessing")) return read_post_processor(r, it);
        return GPT2_OK;
    }
    if (strcmp(type_of(pp), "TemplateProcessing")) return GPT2_OK;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *first = cJSON_IsArray(single) ? single->child : NULL;
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(first, "SpecialToken");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
    if (!cJSON_IsString(name)) return GPT2_OK; /* the text comes first */
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pp, "special_tokens"),
                                                        name->valuestring);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(tok, "ids");
    if (cJSON_GetArraySize(ids) != 1 || !cJSON_IsNumber(ids->child) || ids->child->valuedouble < 0 ||
        ids->child->valuedouble >= r->p.n_vocab)
        return json_bad(&r->src, "post_processor.special_tokens", "one id in the vocabulary for the token the "
                        "template starts with", json_type_name(ids));
    r->p.bos = (int32_t)ids->child->valuedouble;
    return GPT2_OK;
}

static void reader_free(reader *r) {
    for (int i = 0; r->token && i < r->p.n_vocab; i++) free(r->token[i]);
    free(r->token), free(r->token_len), free(r->merges), free(r->added), free(r->added_flags), free(r->in_model);
    free(r->pattern);
}

gpt2_status gpt2_tokenizer_load_json(const char *path, gpt2_tokenizer **out, gpt2_error *err) {
    if (!out || !path) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_load_json: NULL argument");
    *out = NULL;
    cJSON *root;
    gpt2_status st = json_read_file(path, MAX_JSON_BYTES, GPT2_ERR_TOKENIZER, "tokenizer.json", &root, err);
    if (st) return st;
    reader r = {.src = {path, NULL, GPT2_ERR_TOKENIZER, err}, .p = {.path = path, .eot = -1, .bos = -1}};
    const cJSON *model, *vocab, *merges, *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!(st = json_get_object(&r.src, root, "model", &model)) && !(st = check_model(&r, model, root)) &&
        !(st = json_get_object(&r.src, model, "vocab", &vocab)) &&
        !(st = json_get_array(&r.src, model, "merges", "an array of merges", &merges)) &&
        (r.p.spm || !(st = read_pre_tokenizer(&r, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"))))) {
        if (added && !cJSON_IsArray(added)) st = json_bad(&r.src, "added_tokens", "an array", json_type_name(added));
        if (!st) st = count_ids(&r, vocab, added);
        if (!st) st = read_vocab(&r, vocab);
        if (!st) st = read_merges(&r, vocab, merges);
        if (!st) st = read_added(&r, added);
        if (!st) st = read_post_processor(&r, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
    }
    cJSON_Delete(root);
    if (!st) {
        r.p.token = (const char *const *)r.token, r.p.token_len = r.token_len, r.p.merges = r.merges;
        r.p.added = r.added, r.p.added_flags = r.added_flags, r.p.pattern = r.pattern, r.p.in_model = r.in_model;
        st = tok_from_parts(&r.p, out, err);
    }
    reader_free(&r);
    return st;
}
