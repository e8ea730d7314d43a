/* tokenizer.c — GPT-2's byte-level BPE: loading vocab.json + merges.txt, encoding, lookups;
 * and SentencePiece-style BPE (tok_parts.spm: Llama 2, Mistral, Gemma), whose tokens are
 * pieces ("▁the", "<0x0A>") rather than bytes, encoded as Hugging Face and llama.cpp do.
 *
 * Encoding is OpenAI's encoder.py, exactly: a regex splits the text into pieces, and each
 * piece's bytes are merged by BPE rank (the regex lives in core/pretokenize.c, shared with the
 * BPE trainer). Token strings in the files use GPT-2's bytes_to_unicode alphabet
 * (core/byte_alphabet.h: each byte shown as one printable character); we invert that map
 * at load time, so everything after loading works on raw bytes and integer ids:
 *   - a bytes -> id hash table (loading merges, gpt2_tokenizer_token_id),
 *   - a (left id, right id) -> (rank, merged id) hash table, the only one the BPE loop uses.
 * A loaded tokenizer is read-only; encode keeps its scratch on the call, so one tokenizer can
 * serve several threads.
 */
#include "gpt2_tokenizer.h"

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "json.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "byte_alphabet.h"
#include "error.h"
#include "tokenizer_impl.h"
#include "tokenizer_internal.h"
#include "pretokenize.h"
#include "rng.h"
#include "textio.h"

enum {
    MAX_VOCAB = 1 << 24,      /* ids beyond this are refused: n_vocab sizes arrays */
    MAX_PIECE = 1 << 28,      /* BPE positions are int32; heap holds up to 3n entries */
};
/* Tokenizer files beyond this are refused (GPT-2's encoder.json is 1 MB). It also keeps
 * the token blob, no bigger than the file, within the uint32 offsets of tok_off. */
#define MAX_FILE_BYTES (1u << 30)

static const char EOT_TEXT[] = "<|endoftext|>";

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581, SentencePiece's stand-in for a space */

static int is_mark(const unsigned char *s, size_t n) { return n >= 3 && !memcmp(s, SPACE_MARK, 3); }

/* Internal flag of encode's sections (beside GPT2_ENCODE_*): this one starts the text */
#define TOK_AT_START (1 << 30)

/* Decodes one strictly valid UTF-8 character (no overlongs, surrogates or > U+10FFFF).
 * Returns its length, or 0 if s does not start with one. */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    int len;
    uint32_t c, min;
    if (b >= 0xC2 && b <= 0xDF) { len = 2; c = b & 0x1F; min = 0x80; }
    else if (b >= 0xE0 && b <= 0xEF) { len = 3; c = b & 0x0F; min = 0x800; }
    else if (b >= 0xF0 && b <= 0xF4) { len = 4; c = b & 0x07; min = 0x10000; }
    else return 0;
    if (n < (size_t)len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

long tok_alphabet_to_bytes(const char *s, size_t n, char *out, uint32_t *bad) {
    long k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int m = utf8_decode((const unsigned char *)s + i, n - i, &c);
        if (m == 0) { *bad = UINT32_MAX; return -1; }
        int b = char_to_byte(c);
        if (b < 0) { *bad = c; return -1; }
        out[k++] = (char)b;
        i += (size_t)m;
    }
    return k;
}


/* ---- hash tables ---------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint32_t hash_pair(uint64_t key) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
}

static uint32_t table_size(size_t n) { /* a power of two at least twice n */
    uint32_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

/* The slot holding bytes s, or the empty slot where they would go. */
static uint32_t ids_slot(const gpt2_tokenizer *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->ids_mask;
    for (;; i = (i + 1) & t->ids_mask) {
        int32_t id = t->ids[i];
        if (id < 0 || ((size_t)t->tok_len[id] == n && memcmp(t->blob + t->tok_off[id], s, n) == 0))
            return i;
    }
}

static const pair_slot *pair_find(const gpt2_tokenizer *t, int32_t left, int32_t right) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    for (uint32_t i = hash_pair(key) & t->pairs_mask;; i = (i + 1) & t->pairs_mask) {
        const pair_slot *p = &t->pairs[i];
        if (p->key == key) return p;
        if (p->key == PAIR_EMPTY) return NULL;
    }
}

/* A token's piece: its bytes, or for a SentencePiece vocabulary its string ("\xE2\x96\x81the"). */
static const char *piece(const gpt2_tokenizer *t, int32_t id, size_t *len) {
    *len = (size_t)t->tok_len[id];
    return t->blob + t->tok_off[id];
}

/* The id of a piece, or -1. */
static int32_t piece_id(const gpt2_tokenizer *t, const char *s, size_t n) {
    return n ? t->ids[ids_slot(t, s, n)] : -1;
}

/* ---- loading -------------------------------------------------------------------------- */

/* First pass over vocab.json: every id an integer in [0, MAX_VOCAB); the
 * token count, the largest id and the bytes the names need. */
static gpt2_status vocab_sizes(const cJSON *root, const char *path, size_t *n_tok, int *max_id, size_t *blob_size,
                               gpt2_error *err) {
    char s1[TEXT_SHOW_BUF];
    *n_tok = *blob_size = 0;
    *max_id = -1;
    for (const cJSON *it = root->child; it; it = it->next) {
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(v >= 0 && v < MAX_VOCAB) || v != floor(v)) {
            if (cJSON_IsNumber(it))
                return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token \"%s\" has id %.15g, expected an integer in [0, %d)",
                                 path, text_show(it->string, strlen(it->string), s1), v, MAX_VOCAB);
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token \"%s\" has %s as id, expected an integer", path,
                             text_show(it->string, strlen(it->string), s1), json_type_name(it));
        }
        if ((int)v > *max_id) *max_id = (int)v;
        *blob_size += strlen(it->string);
        (*n_tok)++;
    }
    if (*n_tok == 0 || *n_tok > MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %zu tokens, expected 256 to %d", path, *n_tok, MAX_VOCAB);
    return GPT2_OK;
}

/* The tables for n_vocab ids and n_tok tokens of blob_size bytes in all (load_vocab,
 * the constructors from token lists); every id starts out undefined. */
static gpt2_status tok_reserve(gpt2_tokenizer *t, int n_vocab, size_t n_tok, size_t blob_size, const char *path,
                               gpt2_error *err) {
    t->n_vocab = n_vocab;
    t->blob = malloc(blob_size + 1);
    t->tok_off = calloc((size_t)n_vocab, sizeof *t->tok_off);
    t->tok_len = malloc((size_t)n_vocab * sizeof *t->tok_len);
    uint32_t size = table_size(n_tok);
    t->ids = malloc(size * sizeof *t->ids);
    t->ids_mask = size - 1;
    if (!t->blob || !t->tok_off || !t->tok_len || !t->ids)
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory for %zu tokens", path, n_tok);
    for (int i = 0; i < n_vocab; i++) t->tok_len[i] = -1;
    memset(t->ids, 0xFF, size * sizeof *t->ids);
    return GPT2_OK;
}

/* Token id's raw bytes, already at t->blob + *off (n of them): recorded both ways;
 * an id given twice or bytes listed twice refused. shown: the token as the file writes it. */
static gpt2_status tok_add(gpt2_tokenizer *t, int32_t id, size_t n, size_t *off, const char *path, const char *shown,
                           gpt2_error *err) {
    if (n == 0) return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: id %d is the empty string", path, id);
    if (t->tok_len[id] >= 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: id %d is given to two tokens (the second is \"%s\")", path, id,
                         shown);
    t->tok_off[id] = (uint32_t)*off;
    t->tok_len[id] = (int32_t)n;
    uint32_t slot = ids_slot(t, t->blob + *off, n);
    if (t->ids[slot] >= 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token \"%s\" appears twice (ids %d and %d)", path, shown,
                         t->ids[slot], id);
    t->ids[slot] = id;
    *off += n;
    return GPT2_OK;
}

/* One vocabulary entry: its name decoded from the byte alphabet into the
 * blob at *off, its id recorded both ways; a duplicate id or name refused. */
static gpt2_status vocab_add(gpt2_tokenizer *t, const char *name, size_t name_len, int32_t id, const char *path,
                             size_t *off, gpt2_error *err) {
    char s1[TEXT_SHOW_BUF];
    uint32_t bad;
    long n = tok_alphabet_to_bytes(name, name_len, t->blob + *off, &bad);
    if (n < 0 && bad == UINT32_MAX)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token with id %d is not valid UTF-8", path, id);
    if (n < 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                         "%s: token \"%s\" (id %d) has U+%04X, a character outside GPT-2's 256-character byte alphabet",
                         path, text_show(name, name_len, s1), id, (unsigned)bad);
    return tok_add(t, id, (size_t)n, off, path, text_show(name, name_len, s1), err);
}

/* Every byte's single-byte token, which byte-level BPE starts from. */
static gpt2_status vocab_byte_ids(gpt2_tokenizer *t, const char *path, gpt2_error *err) {
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = gpt2_tokenizer_token_id(t, &c, 1);
        if (t->byte_id[b] >= 0) continue;
        uint32_t u = byte_to_char(b); /* < U+0144: one or two UTF-8 bytes */
        char shown[3] = {(char)u, 0, 0};
        if (u >= 0x80) {
            shown[0] = (char)(0xC0 | (u >> 6));
            shown[1] = (char)(0x80 | (u & 0x3F));
        }
        return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                         "%s: no token for byte 0x%02X (\"%s\"); a GPT-2 vocabulary has all 256 single-byte tokens",
                         path, b, shown);
    }
    return GPT2_OK;
}

static gpt2_status load_vocab(gpt2_tokenizer *t, const char *path, const char *data, size_t len,
                              gpt2_error *err) {
    if (len == 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                         "%s: empty file, expected a JSON object mapping tokens to ids", path);
    cJSON *root;
    gpt2_status st = json_parse(path, data, len, GPT2_ERR_TOKENIZER, &root, err);
    if (st != GPT2_OK) return st;
    size_t n_tok = 0, blob_size = 0;
    int max_id = -1;
    if (!cJSON_IsObject(root))
        st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: expected a JSON object mapping tokens to ids, found %s", path,
                       json_type_name(root));
    if (st == GPT2_OK) st = vocab_sizes(root, path, &n_tok, &max_id, &blob_size, err);
    if (st == GPT2_OK) st = tok_reserve(t, max_id + 1, n_tok, blob_size, path, err);
    size_t off = 0;
    for (const cJSON *it = root->child; st == GPT2_OK && it; it = it->next)
        st = vocab_add(t, it->string, strlen(it->string), (int32_t)it->valuedouble, path, &off, err);
    if (st == GPT2_OK) t->eot = gpt2_tokenizer_token_id(t, EOT_TEXT, sizeof EOT_TEXT - 1);
    cJSON_Delete(root);
    return st;
}

/* Inserts or overwrites: a merge listed twice keeps its later rank, as in encoder.py's
 * dict(zip(merges, range(len(merges)))). */
static void pair_put(gpt2_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = hash_pair(key) & t->pairs_mask;
    while (t->pairs[i].key != PAIR_EMPTY && t->pairs[i].key != key) i = (i + 1) & t->pairs_mask;
    t->pairs[i] = (pair_slot){key, rank, merged};
}

/* Looks up one field of a merges line (in GPT-2's alphabet); -1 when not in the vocabulary. */
static int32_t merge_part_id(const gpt2_tokenizer *t, const char *s, size_t n, char *scratch) {
    uint32_t bad;
    long k = tok_alphabet_to_bytes(s, n, scratch, &bad);
    return k > 0 ? gpt2_tokenizer_token_id(t, scratch, (size_t)k) : -1;
}

/* Long by design: a loader's validation, one check per way a merges line
 * can be wrong, each with a message naming the line. */
static gpt2_status load_merges(gpt2_tokenizer *t, const char *path, char *data, size_t len,
                               gpt2_error *err) {
    if (len == 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                         "%s: empty file, expected one merge (\"left right\") per line", path);
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++) n_lines += data[i] == '\n';
    if (n_lines > MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %zu lines, expected at most %d merges",
                         path, n_lines, MAX_VOCAB);
    uint32_t size = table_size(n_lines);
    t->pairs = malloc(size * sizeof *t->pairs);
    char *scratch = malloc(2 * len + 1); /* both parts' bytes, then their concatenation */
    if (!t->pairs || !scratch) {
        free(scratch);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    t->pairs_mask = size - 1;
    for (uint32_t i = 0; i < size; i++) t->pairs[i].key = PAIR_EMPTY;

    gpt2_status st = GPT2_OK;
    int32_t rank = 0;
    char *line = data, *end = data + len;
    for (int line_no = 1; line < end; line_no++) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        char *eol = nl ? nl : end;
        char *next = nl ? nl + 1 : end;
        if (line_no == 1 && eol - line >= 8 && memcmp(line, "#version", 8) == 0) {
            line = next;
            continue;
        }
        /* Fields are separated by ASCII whitespace (encoder.py uses str.split(); no character
         * of GPT-2's alphabet is whitespace), which also drops a '\r' of CRLF files. */
        const char *f[3];
        size_t flen[3];
        int nf = 0;
        for (char *p = line; p < eol;) {
            while (p < eol && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
            if (p == eol) break;
            char *q = p;
            while (q < eol && *q != ' ' && *q != '\t' && *q != '\r') q++;
            if (nf < 3) { f[nf] = p; flen[nf] = (size_t)(q - p); }
            nf++;
            p = q;
        }
        line = next;
        if (nf == 0) continue; /* blank lines (e.g. trailing ones) carry no merge */
        if (nf != 2) {
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER,
                           "%s line %d: expected two tokens separated by a space, found %d field%s",
                           path, line_no, nf, nf == 1 ? "" : "s");
            break;
        }
        int32_t a = merge_part_id(t, f[0], flen[0], scratch);
        int32_t b = merge_part_id(t, f[1], flen[1], scratch);
        int32_t m = -1;
        if (a >= 0 && b >= 0) {
            size_t la = (size_t)t->tok_len[a], lb = (size_t)t->tok_len[b];
            memcpy(scratch, t->blob + t->tok_off[a], la);
            memcpy(scratch + la, t->blob + t->tok_off[b], lb);
            m = gpt2_tokenizer_token_id(t, scratch, la + lb);
        }
        if (m < 0) {
            char s0[TEXT_SHOW_BUF], s1[TEXT_SHOW_BUF];
            if (a < 0 || b < 0)
                st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s line %d: \"%s\" is not in the vocabulary",
                               path, line_no, a < 0 ? text_show(f[0], flen[0], s0) : text_show(f[1], flen[1], s0));
            else
                st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s line %d: merged token \"%s%s\" is not in the "
                               "vocabulary", path, line_no, text_show(f[0], flen[0], s0),
                               text_show(f[1], flen[1], s1));
            break;
        }
        pair_put(t, a, b, rank++, m);
    }
    t->n_merges = rank;
    free(scratch);
    return st;
}

/* Whether every token (but "<|endoftext|>") is exactly one UTF-8 character. */
static gpt2_status chars_check(gpt2_tokenizer *t, const char *path, gpt2_error *err) {
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->tok_len[id] < 0 || id == t->eot) continue;
        uint32_t cp;
        const size_t n = (size_t)t->tok_len[id];
        if ((size_t)utf8_decode((const unsigned char *)t->blob + t->tok_off[id], n, &cp) != n) {
            char shown[TEXT_SHOW_BUF];
            return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                             "%s: token %d (\"%s\") is not one character, and the vocabulary has neither all 256 "
                             "single-byte tokens (byte-level BPE) nor only characters (character-level)",
                             path, id, text_show(t->blob + t->tok_off[id], n, shown));
        }
    }
    t->chars = 1;
    return GPT2_OK;
}

/* Byte-level BPE needs every byte's token. A vocabulary without merges that lacks
 * some is character-level instead (nanoGPT's meta.pkl, written as vocab.json by
 * convert): each token one UTF-8 character. */
static gpt2_status settle_alphabet(gpt2_tokenizer *t, const char *vocab_path, gpt2_error *err) {
    gpt2_status st = vocab_byte_ids(t, vocab_path, err);
    if (st == GPT2_OK || t->n_merges > 0) return st;
    return chars_check(t, vocab_path, err);
}

typedef struct {
    int32_t len, id;
    unsigned char flags, first;
} added_tok;

static int longer_first(const void *a, const void *b) {
    const added_tok *x = a, *y = b;
    const int gx = !!(x->flags & TOK_ADDED_NORMALIZED), gy = !!(y->flags & TOK_ADDED_NORMALIZED);
    if (gx != gy) return gx - gy;
    if (x->first != y->first) return x->first - y->first;
    return x->len != y->len ? (y->len > x->len) - (y->len < x->len) : (x->id > y->id) - (x->id < y->id);
}

/* The added tokens (ids, TOK_ADDED_* flags; NULL: "<|endoftext|>", special,
 * when the vocabulary has it), indexed by group and first byte, longest first so that the
 * longest match wins (Gemma has 6,415 of them). */
static gpt2_status set_added(gpt2_tokenizer *t, const int32_t *ids, const unsigned char *flags, int n,
                             gpt2_error *err) {
    static const unsigned char special = TOK_ADDED_SPECIAL;
    if (!ids) ids = &t->eot, n = t->eot >= 0, flags = &special;
    added_tok *a = malloc(((size_t)n + 1) * sizeof *a);
    t->added = malloc(((size_t)n + 1) * sizeof *t->added);
    t->added_flags = malloc((size_t)n + 1);
    if (!a || !t->added || !t->added_flags) {
        free(a);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    }
    for (int i = 0; i < n; i++)
        a[i] = (added_tok){t->tok_len[ids[i]], ids[i], flags[i], (unsigned char)t->blob[t->tok_off[ids[i]]]};
    qsort(a, (size_t)n, sizeof *a, longer_first);
    int i = 0;
    for (int g = 0; g < 2; g++)
        for (int b = 0; b <= 256; b++) {
            t->added_at_byte[g][b] = (uint32_t)i; /* the first of group g with a first byte >= b */
            while (i < n && b < 256 && !!(a[i].flags & TOK_ADDED_NORMALIZED) == g && a[i].first == b) i++;
        }
    for (i = 0; i < n; i++) t->added[i] = a[i].id, t->added_flags[i] = a[i].flags;
    free(a);
    t->n_added = n;
    return GPT2_OK;
}

/* The split pattern (NULL: GPT-2's) and the added tokens: the last steps of every constructor. */
static gpt2_status compile_pattern(gpt2_tokenizer *t, const char *pattern, const char *what, gpt2_error *err) {
    t->re = pattern ? pretok_compile_pattern(pattern, what, err) : pretok_compile(err);
    if (!t->re) return GPT2_ERR_TOKENIZER;
    if (pattern && !(t->pattern = strdup(pattern))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    return t->added ? GPT2_OK : set_added(t, NULL, NULL, 0, err);
}

gpt2_status gpt2_tokenizer_load_files(const char *vocab_json_path, const char *merges_path,
                                      gpt2_tokenizer **out, gpt2_error *err) {
    if (!out || !vocab_json_path || !merges_path)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_load_files: NULL argument");
    *out = NULL;
    gpt2_tokenizer *t = calloc(1, sizeof *t);
    if (t) t->bos = -1; /* none unless a source says */
    if (!t) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    char *data = NULL;
    size_t len;
    gpt2_status st = text_read_file(vocab_json_path, MAX_FILE_BYTES - 1, GPT2_ERR_TOKENIZER, "tokenizer file", &data, &len, err);
    if (st == GPT2_OK) st = load_vocab(t, vocab_json_path, data, len, err);
    free(data);
    data = NULL;
    if (st == GPT2_OK) st = text_read_file(merges_path, MAX_FILE_BYTES - 1, GPT2_ERR_TOKENIZER, "tokenizer file", &data, &len, err);
    if (st == GPT2_OK) st = load_merges(t, merges_path, data, len, err);
    free(data);
    if (st == GPT2_OK) st = settle_alphabet(t, vocab_json_path, err);
    if (st == GPT2_OK) st = compile_pattern(t, NULL, vocab_json_path, err);
    if (st != GPT2_OK) {
        gpt2_tokenizer_free(t);
        return st;
    }
    gpt2_error_clear(err);
    *out = t;
    return GPT2_OK;
}

/* gpt2_tokenizer_new's arguments checked; *blob and *text_len: the bytes of the
 * tokens, and of the merges as merges.txt's lines. */
static gpt2_status new_args_check(const char *vocab_source, const char *merges_source, const size_t *token_lens,
                                  int n_tokens, const char *const *merges, const size_t *merge_lens, int n_merges,
                                  int32_t eot, size_t *blob, size_t *text_len, gpt2_error *err) {
    if (n_tokens < 256 || n_tokens > MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %d tokens, expected 256 to %d", vocab_source, n_tokens,
                         MAX_VOCAB);
    if (n_merges < 0 || n_merges > MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %d merges, expected at most %d", merges_source, n_merges,
                         MAX_VOCAB);
    if (eot < -1 || eot >= n_tokens)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: end-of-text id %d is outside the %d tokens", vocab_source,
                         eot, n_tokens);
    *blob = *text_len = 0;
    for (int i = 0; i < n_tokens; i++)
        if ((*blob += token_lens[i]) >= MAX_FILE_BYTES || token_lens[i] >= MAX_FILE_BYTES)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: the tokens hold more than %u bytes", vocab_source,
                             MAX_FILE_BYTES);
    for (int i = 0; i < n_merges; i++) {
        if (memchr(merges[i], '\n', merge_lens[i]))
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: merge %d holds a newline byte, expected \"left right\"",
                             merges_source, i);
        if ((*text_len += merge_lens[i] + 1) >= MAX_FILE_BYTES || merge_lens[i] >= MAX_FILE_BYTES)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: the merges hold more than %u bytes", merges_source,
                             MAX_FILE_BYTES);
    }
    return GPT2_OK;
}

/* The same steps as the files: tokens, byte ids, merges (as merges.txt's text), pattern. */
gpt2_status gpt2_tokenizer_new(const char *vocab_source, const char *merges_source, const char *const *tokens,
                               const size_t *token_lens, int n_tokens, const char *const *merges,
                               const size_t *merge_lens, int n_merges, int32_t eot, gpt2_tokenizer **out,
                               gpt2_error *err) {
    if (!out || !vocab_source || !merges_source || !tokens || !token_lens || (n_merges && (!merges || !merge_lens)))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_new: NULL argument");
    *out = NULL;
    size_t blob = 0, text_len = 0;
    gpt2_status st0 = new_args_check(vocab_source, merges_source, token_lens, n_tokens, merges, merge_lens, n_merges,
                                     eot, &blob, &text_len, err);
    if (st0) return st0;
    gpt2_tokenizer *t = calloc(1, sizeof *t);
    if (t) t->bos = -1; /* none unless a source says */
    char *text = malloc(text_len + 1);
    gpt2_status st = t && text ? tok_reserve(t, n_tokens, (size_t)n_tokens, blob, vocab_source, err)
                               : gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    size_t off = 0;
    for (int i = 0; st == GPT2_OK && i < n_tokens; i++)
        st = vocab_add(t, tokens[i], token_lens[i], i, vocab_source, &off, err);
    if (st == GPT2_OK) st = vocab_byte_ids(t, vocab_source, err);
    if (st == GPT2_OK) t->eot = eot >= 0 ? eot : gpt2_tokenizer_token_id(t, EOT_TEXT, sizeof EOT_TEXT - 1);
    /* the merges as merges.txt's lines: one parser for both */
    size_t k = 0;
    for (int i = 0; st == GPT2_OK && i < n_merges; i++) {
        memcpy(text + k, merges[i], merge_lens[i]);
        k += merge_lens[i];
        text[k++] = '\n';
    }
    if (st == GPT2_OK && n_merges) st = load_merges(t, merges_source, text, text_len, err);
    if (st == GPT2_OK && !n_merges) { /* bytes alone: an empty pair table */
        if (!(t->pairs = malloc(16 * sizeof *t->pairs))) st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
        for (int i = 0; st == GPT2_OK && i < 16; i++) t->pairs[i].key = PAIR_EMPTY;
        t->pairs_mask = 15;
    }
    if (st == GPT2_OK) st = compile_pattern(t, NULL, vocab_source, err);
    free(text);
    if (st != GPT2_OK) {
        gpt2_tokenizer_free(t);
        return st;
    }
    gpt2_error_clear(err);
    *out = t;
    return GPT2_OK;
}

static int file_exists(const char *path) {
    struct stat sb; /* not fopen: that would block on a FIFO */
    return stat(path, &sb) == 0;
}

gpt2_status gpt2_tokenizer_load(const char *dir, gpt2_tokenizer **out, gpt2_error *err) {
    if (!out || !dir) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_load: NULL argument");
    *out = NULL;
    size_t n = strlen(dir) + sizeof "/tokenizer.json";
    char *vocab = malloc(n), *merges = malloc(n);
    if (!vocab || !merges) {
        free(vocab);
        free(merges);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    }
    gpt2_status st;
    snprintf(vocab, n, "%s/vocab.json", dir);
    snprintf(merges, n, "%s/merges.txt", dir);
    if (!file_exists(vocab)) {
        snprintf(vocab, n, "%s/encoder.json", dir);
        snprintf(merges, n, "%s/vocab.bpe", dir);
    }
    if (!file_exists(vocab)) {
        snprintf(vocab, n, "%s/tokenizer.json", dir);
        st = file_exists(vocab) ? gpt2_tokenizer_load_json(vocab, out, err)
                                : gpt2_fail(err, GPT2_ERR_IO, "%s: no tokenizer here, expected vocab.json + merges.txt "
                                            "(or encoder.json + vocab.bpe, or tokenizer.json)", dir);
        goto done;
    }
    st = gpt2_tokenizer_load_files(vocab, merges, out, err);
done:
    free(vocab);
    free(merges);
    return st;
}

void gpt2_tokenizer_free(gpt2_tokenizer *t) {
    if (!t) return;
    if (t->re) pcre2_code_free(t->re);
    if (t->digits_re) pcre2_code_free(t->digits_re);
    free(t->pattern);
    free(t->added);
    free(t->added_flags);
    free(t->in_model);
    free(t->dec), free(t->dec_off), free(t->dec_len);
    free(t->pairs);
    free(t->ids);
    free(t->tok_len);
    free(t->tok_off);
    free(t->blob);
    free(t);
}

/* ---- lookups -------------------------------------------------------------------------- */

int gpt2_tokenizer_n_vocab(const gpt2_tokenizer *t) { return t ? t->n_vocab : 0; }

const char *gpt2_tokenizer_normalizer(const gpt2_tokenizer *t) { return t && t->nfc ? "NFC" : NULL; }

int32_t gpt2_tokenizer_eot(const gpt2_tokenizer *t) { return t ? t->eot : -1; }
int32_t gpt2_tokenizer_bos(const gpt2_tokenizer *t) { return t ? t->bos : -1; }

const char *gpt2_tokenizer_kind(const gpt2_tokenizer *t) {
    return !t ? NULL : t->chars ? "characters" : t->spm ? "SentencePiece BPE" : "byte-level BPE";
}

int gpt2_tokenizer_space_prefix(const gpt2_tokenizer *t) { return t && t->spm && t->spm_prepend != TOK_SPM_NONE; }

const char *gpt2_tokenizer_token_bytes(const gpt2_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab || t->tok_len[id] < 0) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)(t->dec ? t->dec_len[id] : t->tok_len[id]);
    return t->dec ? t->dec + t->dec_off[id] : t->blob + t->tok_off[id];
}

const char *gpt2_tokenizer_token_piece(const gpt2_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab || t->tok_len[id] < 0) {
        if (len) *len = 0;
        return NULL;
    }
    size_t n;
    const char *s = piece(t, id, &n);
    if (len) *len = n;
    return s;
}

int32_t gpt2_tokenizer_piece_id(const gpt2_tokenizer *t, const char *s, size_t len) {
    return t && s ? piece_id(t, s, len) : -1;
}

/* Whether id is one of the byte tokens (of a SentencePiece vocabulary: "<0xNN>"). */
static int is_byte_token(const gpt2_tokenizer *t, int32_t id) {
    return t->dec && t->dec_len[id] == 1 && t->byte_id[(unsigned char)t->dec[t->dec_off[id]]] == id;
}

/* Whether id decodes to bytes[0, len). */
static int decodes_to(const gpt2_tokenizer *t, int32_t id, const char *bytes, size_t len) {
    return id >= 0 && (size_t)t->dec_len[id] == len && !memcmp(t->dec + t->dec_off[id], bytes, len);
}

/* SentencePiece: the token that decodes to bytes[0, len), a byte token only when no other
 * does: the piece with U+2581 for each space (or, failing that, the bytes as a piece). */
static int32_t spm_token_id(const gpt2_tokenizer *t, const char *bytes, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_mark((const unsigned char *)bytes + i, len - i)) return -1; /* U+2581 decodes to a space */
        n += bytes[i] == ' ' ? 3 : 1;
    }
    char small[256], *s = n <= sizeof small ? small : malloc(n);
    if (!s) return -1;
    for (size_t i = 0, k = 0; i < len; i++)
        if (bytes[i] == ' ') memcpy(s + k, SPACE_MARK, 3), k += 3;
        else s[k++] = bytes[i];
    int32_t id = piece_id(t, s, n);
    if (s != small) free(s);
    if (!decodes_to(t, id, bytes, len) || is_byte_token(t, id)) id = piece_id(t, bytes, len);
    if (decodes_to(t, id, bytes, len) && !is_byte_token(t, id)) return id;
    return len == 1 ? t->byte_id[(unsigned char)bytes[0]] : -1;
}

int32_t gpt2_tokenizer_token_id(const gpt2_tokenizer *t, const char *bytes, size_t len) {
    if (!t || !bytes || len == 0) return -1;
    if (t->spm) return spm_token_id(t, bytes, len);
    return t->ids[ids_slot(t, bytes, len)];
}

gpt2_status gpt2_tokenizer_decode(const gpt2_tokenizer *t, const int32_t *ids, size_t n_ids, char **text, size_t *len,
                                  gpt2_error *err) {
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!t || !text || !len || (!ids && n_ids))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_decode: NULL argument");
    size_t total = 0, l;
    for (size_t i = 0; i < n_ids; i++) {
        if (!gpt2_tokenizer_token_bytes(t, ids[i], &l))
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_decode: id %d (at %zu) is not in the %d-id "
                             "vocabulary", ids[i], i, t->n_vocab);
        total += l;
    }
    char *out = malloc(total + 1);
    if (!out) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory decoding %zu ids", n_ids);
    size_t at = 0;
    for (size_t i = 0; i < n_ids; i++) {
        const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &l);
        memcpy(out + at, b, l);
        at += l;
    }
    size_t skip = gpt2_tokenizer_space_prefix(t) && at > 0 && out[0] == ' '; /* HF's Strip, llama.cpp's */
    memmove(out, out + skip, at - skip);
    out[at - skip] = '\0';
    gpt2_error_clear(err);
    *text = out;
    *len = at - skip;
    return GPT2_OK;
}

/* ---- encoding ------------------------------------------------------------------------- */

typedef struct { /* one adjacent pair that has a merge */
    uint64_t key;                 /* (rank << 32) | position of the left symbol */
    int32_t left, right, merged;  /* ids when pushed; stale once either side changes */
} bpe_cand;

typedef struct {     /* per-call scratch, grown to the longest piece */
    size_t cap;      /* pieces up to cap bytes fit */
    int32_t *id;     /* (cap) symbol ids, -1 once merged into the left neighbour */
    int32_t *next;   /* (cap) next live symbol, -1 at the end */
    int32_t *prev;   /* (cap) previous live symbol, -1 at the start */
    bpe_cand *heap;  /* (3 * cap) min-heap on key: n - 1 initial pairs + 2 per merge */
    bpe_cand *round; /* (cap) the pairs of the rank being merged */
    bpe_cand *skip;  /* (cap) pairs BPE-dropout passed over since the last merge */
    int32_t *out;    /* (out_cap) ids produced so far */
    size_t n_out, out_cap;
    uint64_t drop;   /* BPE-dropout: a pair is skipped when a draw's top 32 bits are below this (p 2^32); 0: never */
    uint64_t rng;    /* the draws (rng.h) */
} encoder;

static int emit(encoder *e, int32_t id) {
    if (e->n_out == e->out_cap) {
        size_t cap = e->out_cap ? 2 * e->out_cap : 256;
        int32_t *p = realloc(e->out, cap * sizeof *p);
        if (!p) return -1;
        e->out = p;
        e->out_cap = cap;
    }
    e->out[e->n_out++] = id;
    return 0;
}

/* Frees the per-piece scratch (not out). */
static void scratch_free(encoder *e) {
    free(e->id), free(e->next), free(e->prev), free(e->heap), free(e->round), free(e->skip);
}

static int reserve(encoder *e, size_t n) {
    if (n <= e->cap) return 0;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n) cap *= 2;
    scratch_free(e);
    e->id = malloc(cap * sizeof *e->id);
    e->next = malloc(cap * sizeof *e->next);
    e->prev = malloc(cap * sizeof *e->prev);
    e->heap = malloc(3 * cap * sizeof *e->heap);
    e->round = malloc(cap * sizeof *e->round);
    e->skip = malloc(cap * sizeof *e->skip);
    e->cap = (e->id && e->next && e->prev && e->heap && e->round && e->skip) ? cap : 0;
    return e->cap ? 0 : -1;
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].key > c.key) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n) {
    bpe_cand top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1].key < h[c].key) c++;
        if (h[c].key >= last.key) break;
        h[i] = h[c];
        i = c;
    }
    if (m > 0) h[i] = last;
    return top;
}

/* Pushes the pair starting at symbol i, if it has a merge. */
static void push_pair(const gpt2_tokenizer *t, encoder *e, size_t *n_heap, int32_t i) {
    if (i < 0 || e->next[i] < 0) return;
    int32_t l = e->id[i], r = e->id[e->next[i]];
    const pair_slot *p = pair_find(t, l, r);
    if (p) heap_push(e->heap, n_heap, (bpe_cand){((uint64_t)p->rank << 32) | (uint32_t)i, l, r, p->merged});
}

static int cand_live(const encoder *e, const bpe_cand *c) {
    int32_t i = (int32_t)(uint32_t)c->key;
    return e->id[i] == c->left && e->next[i] >= 0 && e->id[e->next[i]] == c->right;
}

/* BPE on n symbols, e->id[0, n) (n >= 1), as encoder.py's bpe(): each round takes the lowest-ranked
 * adjacent pair present and merges all its occurrences, left to right, before any pair the
 * round creates is considered (pair_at_a_time: only the leftmost, as Hugging Face's BPE and
 * llama.cpp's SentencePiece merge). A heap of candidate pairs makes that O(n log n) rather than
 * Python's O(n^2); taking a whole rank at once keeps it exact even for merge tables where a
 * merge creates a pair of lower rank than its own.
 *
 * With BPE-dropout (e->drop > 0; Provilkov et al. 2020, arXiv:1910.13267), the law of
 * subword-nmt's: at each step every pair present is kept with probability 1 - p, the kept
 * occurrences of the lowest-ranked kept pair merge, and a step that keeps none ends the piece.
 * Drawn lazily in rank order: a round draws each occurrence of its rank; those skipped wait
 * in e->skip until a merge starts the next step, when they are drawn again. */
static int bpe_merge(const gpt2_tokenizer *t, encoder *e, size_t n) {
    int32_t *id = e->id, *next = e->next, *prev = e->prev;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
    }
    size_t n_heap = 0, n_skip = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, e, &n_heap, (int32_t)i);
    while (n_heap > 0) {
        bpe_cand first = heap_pop(e->heap, &n_heap);
        if (!cand_live(e, &first)) continue;
        size_t n_round = 0, merged = 0;
        e->round[n_round++] = first;
        while (!t->pair_at_a_time && n_heap > 0 && e->heap[0].key >> 32 == first.key >> 32)
            e->round[n_round++] = heap_pop(e->heap, &n_heap); /* in position order */
        for (size_t k = 0; k < n_round; k++) {
            const bpe_cand *c = &e->round[k];
            if (!cand_live(e, c)) continue; /* overlapped by the previous merge, as in "a a a" */
            if (e->drop && rng_next(&e->rng) >> 32 < e->drop) {
                e->skip[n_skip++] = *c;
                continue;
            }
            int32_t i = (int32_t)(uint32_t)c->key, r = next[i];
            id[i] = c->merged;
            id[r] = -1;
            next[i] = next[r];
            if (next[r] >= 0) prev[next[r]] = i;
            push_pair(t, e, &n_heap, prev[i]);
            push_pair(t, e, &n_heap, i);
            merged++;
        }
        if (merged) { /* the skipped pairs that are still there compete again */
            for (size_t k = 0; k < n_skip; k++)
                if (cand_live(e, &e->skip[k])) heap_push(e->heap, &n_heap, e->skip[k]);
            n_skip = 0;
        }
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (emit(e, id[i])) return -1;
    return 0;
}

/* BPE on one piece of n bytes, each byte's token to start from. */
static int bpe_piece(const gpt2_tokenizer *t, encoder *e, const unsigned char *s, size_t n) {
    if (n == 1) return emit(e, t->byte_id[s[0]]);
    if (t->ignore_merges && !e->drop) { /* a piece that is a token is that token */
        const int32_t whole = gpt2_tokenizer_token_id(t, (const char *)s, n);
        if (whole >= 0 && (!t->in_model || t->in_model[whole])) return emit(e, whole);
    }
    if (reserve(e, n)) return -1;
    for (size_t i = 0; i < n; i++) e->id[i] = t->byte_id[s[i]];
    return bpe_merge(t, e, n);
}

/* A character-level vocabulary: one token per character, each looked up whole. */
static gpt2_status encode_chars(const gpt2_tokenizer *t, encoder *e, const char *text, size_t len, gpt2_error *err) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)text + i, len - i, &cp);
        if (k == 0)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "text has byte 0x%02X at byte %zu, which is not UTF-8: a "
                             "character-level vocabulary holds only characters", (unsigned char)text[i], i);
        int32_t id = gpt2_tokenizer_token_id(t, text + i, (size_t)k);
        if (id < 0) {
            char shown[TEXT_SHOW_BUF];
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "text has \"%s\" (U+%04X) at byte %zu, a character the model's "
                             "vocabulary lacks", text_show(text + i, (size_t)k, shown), (unsigned)cp, i);
        }
        if (emit(e, id)) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding %zu bytes", len);
        i += (size_t)k;
    }
    return GPT2_OK;
}

/* NFC of s[0, n) into *out (malloc'd, *n_out bytes): each run of valid UTF-8 composed by
 * utf8proc, each byte that is not UTF-8 kept as it is (HF never sees one: its text is a
 * Rust string). */
static gpt2_status nfc_of(const char *s, size_t n, char **out, size_t *n_out, gpt2_error *err) {
    char *buf = malloc(3 * n + 16); /* NFC grows a string at most threefold */
    size_t k = 0;
    if (!buf) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while normalizing %zu bytes", n);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint32_t cp;
        for (int m; j < n && (m = utf8_decode((const unsigned char *)s + j, n - j, &cp)) > 0;) j += (size_t)m;
        if (j == i) { /* a byte that is not UTF-8 */
            buf[k++] = s[i++];
            continue;
        }
        utf8proc_uint8_t *c = NULL;
        utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(j - i), &c,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (m < 0 || (size_t)m > 3 * (j - i)) {
            free(c), free(buf);
            return gpt2_fail(err, m == UTF8PROC_ERROR_NOMEM ? GPT2_ERR_NOMEM : GPT2_ERR_TOKENIZER,
                             "NFC of the text at byte %zu failed: %s", i, utf8proc_errmsg(m < 0 ? m : 0));
        }
        memcpy(buf + k, c, (size_t)m);
        k += (size_t)m;
        free(c);
        i = j;
    }
    *out = buf, *n_out = k;
    return GPT2_OK;
}

/* Splits s[pos, len) with re (the subject ends at len, as lookaheads see it) and BPEs each
 * piece and each run between matches. With GPT-2's pattern such a run can only be invalid
 * UTF-8 (every valid character matches one of its last alternatives, and
 * PCRE2_MATCH_INVALID_UTF stops a match at an invalid byte); with a tokenizer.json's Split
 * (Isolated) it is a piece of its own, as there. */
static gpt2_status split_regex(const gpt2_tokenizer *t, encoder *e, const pcre2_code *re, pcre2_match_data *md,
                               const unsigned char *s, size_t pos, size_t len, gpt2_error *err) {
    while (pos < len) {
        size_t start, stop;
        gpt2_status st = pretok_next(re, md, s, len, pos, &start, &stop, err);
        if (st != GPT2_OK) return st;
        if (start - pos > MAX_PIECE || stop - start > MAX_PIECE)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                             "text has a piece (word or run) longer than %d bytes", MAX_PIECE);
        if (start > pos && bpe_piece(t, e, s + pos, start - pos)) goto nomem; /* invalid bytes */
        if (stop > start && bpe_piece(t, e, s + start, stop - start)) goto nomem;
        pos = stop;
    }
    return GPT2_OK;
nomem:
    return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding %zu bytes", len);
}

/* Each digit a piece of its own (HF's Digits with individual_digits: a Unicode number,
 * \p{N}), and the runs between them split by the tokenizer's pattern. */
static gpt2_status split_digits(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const unsigned char *s,
                                size_t len, gpt2_error *err) {
    size_t pos = 0;
    while (pos < len) {
        size_t start, stop;
        gpt2_status st = pretok_next(t->digits_re, md, s, len, pos, &start, &stop, err);
        if (!st) st = split_regex(t, e, t->re, md, s, pos, start, err);
        if (!st && stop > start && bpe_piece(t, e, s + start, stop - start))
            st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding %zu bytes", len);
        if (st) return st;
        pos = stop;
    }
    return GPT2_OK;
}

static gpt2_status encode_piece_text(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md,
                                     const char *text, size_t len, gpt2_error *err) {
    if (t->chars) return encode_chars(t, e, text, len, err);
    const unsigned char *s = (const unsigned char *)text;
    if (t->digits_re) return split_digits(t, e, md, s, len, err);
    return split_regex(t, e, t->re, md, s, 0, len, err);
}

/* The longest added token s starts with (n bytes available) whose TOK_ADDED_NORMALIZED flag
 * is `normalized`, special ones only with GPT2_ENCODE_SPECIAL: its id and *len; -1 when none. */
static int32_t added_at(const gpt2_tokenizer *t, const char *s, size_t n, int flags, int normalized, size_t *len) {
    const int g = !!normalized;
    for (uint32_t i = t->added_at_byte[g][(unsigned char)s[0]]; i < t->added_at_byte[g][(unsigned char)s[0] + 1]; i++) {
        const int32_t id = t->added[i];
        const size_t m = (size_t)t->tok_len[id];
        const unsigned f = t->added_flags[i];
        if (m <= n && (!(f & TOK_ADDED_SPECIAL) || (flags & GPT2_ENCODE_SPECIAL)) &&
            memcmp(s, t->blob + t->tok_off[id], m) == 0) {
            *len = m;
            return id;
        }
    }
    return -1;
}

typedef gpt2_status (*text_fn)(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const char *text,
                               size_t len, int flags, gpt2_error *err);

/* Splits text on the added tokens of one kind (normalized or not), leftmost and longest
 * first: each token is emitted, each run between them goes to `between` (encoded on its
 * own, as tiktoken and HF do). */
static gpt2_status split_added(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const char *text,
                               size_t len, int flags, int normalized, text_fn between, gpt2_error *err) {
    gpt2_status st = GPT2_OK;
    size_t pos = 0, n;
    for (size_t i = 0; i < len && st == GPT2_OK;) {
        const int32_t id = added_at(t, text + i, len - i, flags, normalized, &n);
        if (id < 0) {
            i++;
            continue;
        }
        st = between(t, e, md, text + pos, i - pos, pos ? flags & ~TOK_AT_START : flags, err);
        if (st == GPT2_OK && emit(e, id)) st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding");
        pos = i += n;
    }
    return st ? st : between(t, e, md, text + pos, len - pos, pos ? flags & ~TOK_AT_START : flags, err);
}

static gpt2_status pieces(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const char *text, size_t len,
                          int flags, gpt2_error *err) {
    (void)flags;
    return encode_piece_text(t, e, md, text, len, err);
}

/* ---- SentencePiece-style BPE ---------------------------------------------------------- */

/* BPE on one word of a SentencePiece vocabulary (HF's BPE with byte_fallback): its symbols
 * are its characters' model tokens, or where a character is none (or the bytes are not
 * UTF-8), each byte's byte token; then the merges, as for byte-level BPE. */
static int spm_word(const gpt2_tokenizer *t, encoder *e, const unsigned char *s, size_t n) {
    if (reserve(e, n)) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        const int k = utf8_decode(s + i, n - i, &cp);
        const int32_t id = k ? piece_id(t, (const char *)s + i, (size_t)k) : -1;
        if (id >= 0 && (!t->in_model || t->in_model[id])) {
            e->id[m++] = id;
            i += (size_t)k;
            continue;
        }
        for (size_t j = 0; j < (k ? (size_t)k : 1); j++) e->id[m++] = t->byte_id[s[i++]];
    }
    return bpe_merge(t, e, m);
}

/* A piece between the added tokens matched on normalized text: Metaspace's U+2581 for each
 * space and before the piece (TOK_SPM_ALWAYS; TOK_SPM_FIRST only at the start of the text;
 * neither when it already starts with one), then BPE, on the piece as one word or, with
 * Metaspace's split, on each word that a U+2581 starts. */
static gpt2_status spm_pieces(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const char *text, size_t len,
                              int flags, gpt2_error *err) {
    (void)md;
    if (len == 0) return GPT2_OK;
    char *buf = NULL;
    const unsigned char *s = (const unsigned char *)text;
    size_t n = len;
    if (t->spm_metaspace) {
        if (!(buf = malloc(3 * len + 3))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding %zu bytes", len);
        const int prefix = (t->spm_prepend == TOK_SPM_ALWAYS || (t->spm_prepend == TOK_SPM_FIRST && (flags & TOK_AT_START))) &&
                           text[0] != ' ' && !is_mark(s, len);
        n = 0;
        if (prefix) memcpy(buf, SPACE_MARK, 3), n = 3;
        for (size_t i = 0; i < len; i++)
            if (text[i] == ' ') memcpy(buf + n, SPACE_MARK, 3), n += 3;
            else buf[n++] = text[i];
        s = (const unsigned char *)buf;
    }
    int bad = 0;
    if (!t->spm_split) {
        bad = spm_word(t, e, s, n);
    } else { /* HF's split on U+2581, MergedWithNext: each word from one U+2581 to the next */
        size_t start = 0;
        for (size_t i = 1; i < n && !bad; i++)
            if (is_mark(s + i, n - i)) bad = spm_word(t, e, s + start, i - start), start = i;
        if (!bad) bad = spm_word(t, e, s + start, n - start);
    }
    free(buf);
    return bad ? gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding %zu bytes", len) : GPT2_OK;
}

/* A section between the added tokens matched on the raw text, normalized (HF's Prepend and
 * Replace, llama.cpp's space prefix and escaped spaces), then split on the added tokens
 * matched on normalized text. */
static gpt2_status spm_text(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const char *text, size_t len,
                            int flags, gpt2_error *err) {
    if (len == 0) return GPT2_OK;
    if (!t->spm_replace && t->spm_prepend != TOK_SPM_LEGACY)
        return split_added(t, e, md, text, len, flags, 1, spm_pieces, err);
    char *norm = malloc(3 * len + 3);
    if (!norm) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory while encoding %zu bytes", len);
    size_t n = 0;
    if (t->spm_prepend == TOK_SPM_LEGACY) memcpy(norm, SPACE_MARK, 3), n = 3;
    for (size_t i = 0; i < len; i++)
        if (text[i] == ' ' && t->spm_replace) memcpy(norm + n, SPACE_MARK, 3), n += 3;
        else norm[n++] = text[i];
    gpt2_status st = split_added(t, e, md, norm, n, flags, 1, spm_pieces, err);
    free(norm);
    return st;
}

/* Text between the added tokens matched on the raw text: normalized when the tokenizer
 * says so, split on the added tokens matched on normalized text (HF's two passes), and the
 * rest pre-tokenized and BPE'd. */
static gpt2_status encode_text(const gpt2_tokenizer *t, encoder *e, pcre2_match_data *md, const char *text,
                               size_t len, int flags, gpt2_error *err) {
    if (len == 0) return GPT2_OK;
    if (t->spm) return spm_text(t, e, md, text, len, flags, err);
    if (!t->nfc) return split_added(t, e, md, text, len, flags, 1, pieces, err);
    char *norm = NULL;
    size_t n = 0;
    gpt2_status st = nfc_of(text, len, &norm, &n, err);
    if (st) return st;
    st = split_added(t, e, md, norm, n, flags, 1, pieces, err);
    free(norm);
    return st;
}

static gpt2_status encode(const gpt2_tokenizer *t, const char *text, size_t len, int flags, encoder e,
                          const char *fn, int32_t **ids, size_t *n_ids, gpt2_error *err) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!t || !ids || !n_ids || (!text && len > 0))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (len == 0 && !((flags & GPT2_ENCODE_BOS) && t->bos >= 0)) {
        gpt2_error_clear(err);
        return GPT2_OK;
    }
    if (t->spm && len > MAX_PIECE) /* a SentencePiece section is one word */
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: %zu bytes of text, over the limit of %d", fn, len, MAX_PIECE);
    flags = (flags & (GPT2_ENCODE_SPECIAL | GPT2_ENCODE_BOS)) | (flags & GPT2_ENCODE_CONTINUE ? 0 : TOK_AT_START);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    if (!md) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for regex match data");
    gpt2_status st = (flags & GPT2_ENCODE_BOS) && t->bos >= 0 && emit(&e, t->bos)
                         ? gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory encoding text")
                         : split_added(t, &e, md, text, len, flags, 0, encode_text, err);
    pcre2_match_data_free(md);
    scratch_free(&e);
    if (st != GPT2_OK) {
        free(e.out);
        return st;
    }
    gpt2_error_clear(err);
    *ids = e.out;
    *n_ids = e.n_out;
    return GPT2_OK;
}

gpt2_status gpt2_tokenizer_encode(const gpt2_tokenizer *t, const char *text, size_t len,
                                  int flags, int32_t **ids, size_t *n_ids, gpt2_error *err) {
    return encode(t, text, len, flags, (encoder){0}, "gpt2_tokenizer_encode", ids, n_ids, err);
}

gpt2_status gpt2_tokenizer_encode_dropout(const gpt2_tokenizer *t, const char *text, size_t len, int flags,
                                          double p, uint64_t seed, int32_t **ids, size_t *n_ids, gpt2_error *err) {
    if (!(p >= 0 && p <= 1)) {
        if (ids) *ids = NULL;
        if (n_ids) *n_ids = 0;
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_tokenizer_encode_dropout: p = %g is not in [0, 1]", p);
    }
    /* p = 1: 2^32, above every draw. The seed mixed: splitmix streams from seeds a multiple of
     * its step apart are the same stream shifted, and would give the same segmentations. */
    encoder e = {.drop = (uint64_t)(p * 4294967296.0), .rng = rng_mix(seed)};
    return encode(t, text, len, flags, e, "gpt2_tokenizer_encode_dropout", ids, n_ids, err);
}

/* ---- tokenizers from token lists (tokenizer_internal.h) ------------------------------ */

/* BPE of each token's bytes with the merges of lower rank must give exactly two tokens:
 * they are its merge, of the next rank (tiktoken's rank order: ids are ranks). */
static gpt2_status recover_merges(gpt2_tokenizer *t, const char *path, gpt2_error *err) {
    uint32_t size = table_size((size_t)t->n_vocab);
    if (!(t->pairs = malloc(size * sizeof *t->pairs))) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    t->pairs_mask = size - 1;
    for (uint32_t i = 0; i < size; i++) t->pairs[i].key = PAIR_EMPTY;
    encoder e = {0};
    gpt2_status st = GPT2_OK;
    for (int32_t id = 0; id < t->n_vocab && !st; id++) {
        if (t->tok_len[id] <= 1 || id == t->eot) continue;
        e.n_out = 0;
        const unsigned char *b = (const unsigned char *)t->blob + t->tok_off[id];
        if (bpe_piece(t, &e, b, (size_t)t->tok_len[id])) {
            st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
        } else if (e.n_out != 2) {
            char shown[TEXT_SHOW_BUF];
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token %d (\"%s\") is not the merge of two tokens of lower "
                           "id (BPE of its bytes gives %zu): ids are not in merge order; use vocab.json + merges.txt",
                           path, id, text_show((const char *)b, (size_t)t->tok_len[id], shown), e.n_out);
        } else {
            pair_put(t, e.out[0], e.out[1], t->n_merges++, id);
        }
    }
    scratch_free(&e);
    free(e.out);
    return st;
}

gpt2_status tok_from_tokens(const char *const *tok, const size_t *len, int n, int32_t eot, int chars, const char *path,
                            gpt2_tokenizer **out, gpt2_error *err) {
    *out = NULL;
    if (n < 1 || n > MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %d tokens, expected 1 to %d", path, n, MAX_VOCAB);
    gpt2_tokenizer *t = calloc(1, sizeof *t);
    if (t) t->bos = -1; /* none unless a source says */
    if (!t) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    size_t blob = 0, n_tok = 0;
    for (int i = 0; i < n; i++) blob += tok[i] ? len[i] : 0, n_tok += tok[i] != NULL;
    gpt2_status st = blob >= MAX_FILE_BYTES ? gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokens too long", path)
                                            : tok_reserve(t, n, n_tok, blob, path, err);
    size_t off = 0;
    for (int32_t id = 0; id < n && !st; id++) {
        if (!tok[id]) continue;
        char shown[TEXT_SHOW_BUF];
        memcpy(t->blob + off, tok[id], len[id]);
        st = tok_add(t, id, len[id], &off, path, text_show(tok[id], len[id], shown), err);
    }
    if (!st) t->eot = eot >= 0 && eot < n && t->tok_len[eot] >= 0 ? eot : gpt2_tokenizer_token_id(t, EOT_TEXT, sizeof EOT_TEXT - 1);
    if (!st && chars) st = chars_check(t, path, err);
    else if (!st && !(st = vocab_byte_ids(t, path, err))) st = recover_merges(t, path, err);
    if (!st) st = compile_pattern(t, NULL, path, err);
    if (st) {
        gpt2_tokenizer_free(t);
        return st;
    }
    gpt2_error_clear(err);
    *out = t;
    return GPT2_OK;
}

/* The merges of p as pair-table entries: each part an id, their bytes' concatenation a token. */
static gpt2_status parts_merges(gpt2_tokenizer *t, const tok_parts *p, gpt2_error *err) {
    uint32_t size = table_size((size_t)p->n_merges);
    size_t longest = 0;
    for (int i = 0; i < t->n_vocab; i++) longest = t->tok_len[i] > (int32_t)longest ? (size_t)t->tok_len[i] : longest;
    char *joined = malloc(2 * longest + 1);
    if (!(t->pairs = malloc(size * sizeof *t->pairs)) || !joined) {
        free(joined);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", p->path);
    }
    t->pairs_mask = size - 1;
    for (uint32_t i = 0; i < size; i++) t->pairs[i].key = PAIR_EMPTY;
    gpt2_status st = GPT2_OK;
    for (int r = 0; r < p->n_merges && !st; r++) {
        const int32_t a = p->merges[2 * r], b = p->merges[2 * r + 1];
        size_t na, nb;
        const int ok_a = a >= 0 && a < t->n_vocab && t->tok_len[a] >= 0, ok_b = b >= 0 && b < t->n_vocab && t->tok_len[b] >= 0;
        const char *sa = ok_a ? piece(t, a, &na) : NULL, *sb = ok_b ? piece(t, b, &nb) : NULL;
        if (!sa || !sb) {
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: merge %d names id %d, which the vocabulary lacks", p->path, r,
                           sa ? b : a);
            break;
        }
        memcpy(joined, sa, na), memcpy(joined + na, sb, nb);
        const int32_t merged = piece_id(t, joined, na + nb);
        char shown[TEXT_SHOW_BUF];
        if (merged < 0 || (p->in_model && !p->in_model[merged])) /* an added token is never made by BPE */
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: merge %d makes \"%s\", which is not in the vocabulary",
                           p->path, r, text_show(joined, na + nb, shown));
        else
            pair_put(t, a, b, r, merged);
    }
    t->n_merges = p->n_merges;
    free(joined);
    return st;
}

/* SentencePiece: each byte's token "<0xNN>", the fallback of a character that is no model token. */
static gpt2_status spm_byte_ids(gpt2_tokenizer *t, const char *path, gpt2_error *err) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if ((t->byte_id[b] = piece_id(t, name, 6)) < 0)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: no byte token <0x%02X>: a SentencePiece-style vocabulary "
                             "needs all 256 (<0x00> to <0xFF>), the fallback of characters it lacks", path, b);
    }
    return GPT2_OK;
}

/* SentencePiece: what each id decodes to: a byte token its byte, any other its piece with
 * each U+2581 a space (HF's Replace and ByteFallback decoders, llama.cpp's token_to_piece). */
static gpt2_status spm_decoded(gpt2_tokenizer *t, gpt2_error *err) {
    size_t total = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) total += t->tok_len[id] > 0 ? (size_t)t->tok_len[id] : 0;
    t->dec = malloc(total + 1);
    t->dec_off = calloc((size_t)t->n_vocab, sizeof *t->dec_off);
    t->dec_len = malloc((size_t)t->n_vocab * sizeof *t->dec_len);
    int16_t *byte_of = malloc((size_t)t->n_vocab * sizeof *byte_of);
    if (!t->dec || !t->dec_off || !t->dec_len || !byte_of) {
        free(byte_of);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    }
    for (int32_t id = 0; id < t->n_vocab; id++) byte_of[id] = -1;
    for (int b = 0; b < 256; b++) byte_of[t->byte_id[b]] = (int16_t)b;
    size_t k = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->dec_off[id] = (uint32_t)k;
        t->dec_len[id] = -1;
        if (t->tok_len[id] < 0) continue;
        if (byte_of[id] >= 0) {
            t->dec[k++] = (char)byte_of[id];
        } else {
            size_t n;
            const unsigned char *s = (const unsigned char *)piece(t, id, &n);
            for (size_t i = 0; i < n; i++)
                if (is_mark(s + i, n - i)) t->dec[k++] = ' ', i += 2;
                else t->dec[k++] = (char)s[i];
        }
        t->dec_len[id] = (int32_t)(k - t->dec_off[id]);
    }
    free(byte_of);
    return GPT2_OK;
}

typedef struct {
    float score;
    int32_t id;
} scored;

static int higher_score(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->score != y->score ? (x->score < y->score) - (x->score > y->score) : (x->id > y->id) - (x->id < y->id);
}

/* Whether BPE may make or merge id: a model token other than a byte token. */
static int mergeable(const gpt2_tokenizer *t, const unsigned char *in_model, const unsigned char *is_byte, int32_t id) {
    return id >= 0 && t->tok_len[id] >= 0 && (!in_model || in_model[id]) && !is_byte[id];
}

/* The pair table of a vocabulary with scores and no merges (a GGUF's SentencePiece BPE, as
 * llama.cpp runs it): each model token that two model tokens make up is their merge, ranked
 * by its score, highest first; equal scores share a rank, so that of two such pairs the
 * leftmost merges first, as in llama.cpp. */
static gpt2_status score_merges(gpt2_tokenizer *t, const tok_parts *p, gpt2_error *err) {
    const int n = t->n_vocab;
    scored *order = malloc((size_t)n * sizeof *order);
    int32_t *rank = malloc((size_t)n * sizeof *rank);
    unsigned char *is_byte = calloc((size_t)n, 1);
    gpt2_status st = order && rank && is_byte ? GPT2_OK : gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    for (int b = 0; !st && b < 256; b++) is_byte[t->byte_id[b]] = 1;
    int m = 0;
    for (int32_t id = 0; !st && id < n; id++) {
        if (!mergeable(t, p->in_model, is_byte, id)) continue;
        if (p->scores[id] != p->scores[id])
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: the score of token %d is not a number", p->path, id);
        order[m++] = (scored){p->scores[id], id};
    }
    if (!st) qsort(order, (size_t)m, sizeof *order, higher_score);
    for (int i = 0, r = 0; !st && i < m; i++) rank[order[i].id] = r += i > 0 && order[i].score != order[i - 1].score;
    /* two passes over every split of every mergeable token at a character boundary: count, then put */
    size_t n_pairs = 0;
    for (int pass = 0; !st && pass < 2; pass++) {
        if (pass == 1) {
            uint32_t size = table_size(n_pairs);
            if (!(t->pairs = malloc(size * sizeof *t->pairs))) {
                st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
                break;
            }
            t->pairs_mask = size - 1;
            for (uint32_t i = 0; i < size; i++) t->pairs[i].key = PAIR_EMPTY;
        }
        for (int i = 0; i < m; i++) {
            size_t len;
            const int32_t id = order[i].id;
            const char *s = piece(t, id, &len);
            for (size_t k = 1; k < len; k++) {
                if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* inside a character */
                const int32_t a = piece_id(t, s, k), b = piece_id(t, s + k, len - k);
                if (!mergeable(t, p->in_model, is_byte, a) || !mergeable(t, p->in_model, is_byte, b)) continue;
                if (pass == 0) n_pairs++;
                else pair_put(t, a, b, rank[id], id);
            }
        }
    }
    t->n_merges = (int32_t)n_pairs;
    free(order), free(rank), free(is_byte);
    return st;
}

gpt2_status tok_from_parts(const tok_parts *p, gpt2_tokenizer **out, gpt2_error *err) {
    *out = NULL;
    if (p->n_vocab < 256 || p->n_vocab > MAX_VOCAB || p->n_merges < 0 || p->n_merges > MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %d ids and %d merges, expected 256 to %d ids and at most %d "
                         "merges", p->path, p->n_vocab, p->n_merges, MAX_VOCAB, MAX_VOCAB);
    size_t blob = 0, n_tok = 0;
    for (int i = 0; i < p->n_vocab; i++)
        if (p->token[i]) blob += p->token_len[i], n_tok++;
    if (blob >= MAX_FILE_BYTES) return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokens too long", p->path);
    gpt2_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
    t->bos = -1; /* none unless a source says */
    t->spm = p->spm, t->spm_prepend = p->spm_prepend, t->spm_replace = p->spm_replace;
    t->spm_metaspace = p->spm_metaspace, t->spm_split = p->spm_split;
    gpt2_status st = tok_reserve(t, p->n_vocab, n_tok, blob, p->path, err);
    size_t off = 0;
    for (int32_t id = 0; id < p->n_vocab && !st; id++) {
        if (!p->token[id]) continue;
        char shown[TEXT_SHOW_BUF];
        memcpy(t->blob + off, p->token[id], p->token_len[id]);
        st = tok_add(t, id, p->token_len[id], &off, p->path, text_show(p->token[id], p->token_len[id], shown), err);
    }
    if (!st) st = p->spm ? spm_byte_ids(t, p->path, err) : vocab_byte_ids(t, p->path, err);
    if (!st) st = p->spm && p->scores && !p->n_merges ? score_merges(t, p, err) : parts_merges(t, p, err);
    if (!st && p->spm) st = spm_decoded(t, err);
    for (int i = 0; i < p->n_added && !st; i++)
        if (p->added[i] < 0 || p->added[i] >= p->n_vocab || t->tok_len[p->added[i]] < 0)
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: added token id %d is not in the vocabulary", p->path,
                           p->added[i]);
    if (!st) {
        t->eot = p->eot >= 0 && p->eot < p->n_vocab && t->tok_len[p->eot] >= 0
                     ? p->eot : gpt2_tokenizer_token_id(t, EOT_TEXT, sizeof EOT_TEXT - 1);
        t->bos = p->bos >= 0 && p->bos < p->n_vocab && t->tok_len[p->bos] >= 0 ? p->bos : -1;
        t->ignore_merges = p->ignore_merges;
        t->nfc = p->nfc;
        t->pair_at_a_time = 1;
        if (p->in_model && !(t->in_model = malloc((size_t)p->n_vocab)))
            st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a tokenizer");
        else if (p->in_model)
            memcpy(t->in_model, p->in_model, (size_t)p->n_vocab);
        if (!st) st = set_added(t, p->added, p->added_flags, p->n_added, err);
    }
    if (!st) st = compile_pattern(t, p->pattern, p->path, err);
    if (!st && p->split_digits && !(t->digits_re = pretok_compile_pattern("\\p{N}", p->path, err))) st = GPT2_ERR_TOKENIZER;
    if (st) {
        gpt2_tokenizer_free(t);
        return st;
    }
    gpt2_error_clear(err);
    *out = t;
    return GPT2_OK;
}

int tok_is_chars(const gpt2_tokenizer *t) { return t->chars; }
