/* llmc.c — llm.c's model files as model sources (model_source.h), and its
 * gpt2_tokenizer.bin.
 *
 * Model (train_gpt2.py's write_model): a header of 256 little-endian int32,
 *     [0] 20240326  [1] version: 3 = F32, 5 = BF16 (every parameter)
 *     [2] max_seq_len  [3] vocab_size  [4] num_layers  [5] num_heads
 *     [6] channels     [7] padded_vocab_size
 * then the parameters back to back, each stacked over the L layers:
 *     wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C),
 *     qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C),
 *     fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C)
 * Matrices are (out, in), as nn.Linear; GELU is the tanh form; the head is wte.
 * The file must be exactly as long as the header's shapes say.
 *
 * Tokenizer (magic 20240328): a header of 256 int32 (magic, version 1 or 2,
 * vocab_size, [v2] eot id), then per id a length byte (> 0) and the bytes.
 * It holds no merges: they are recovered from the id order (tok_from_tokens).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "gpt2_fileio.h"
#include "model_source.h"
#include "textio.h"
#include "tokenizer_internal.h"

enum { LLMC_HEADER = 1024, LLMC_MODEL_MAGIC = 20240326, LLMC_TOKENIZER_MAGIC = 20240328, LLMC_TOK_MAX = 64 << 20 };

static int32_t rd32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* The header's fields, each in its range. Long by design: a loader's validation. */
static gpt2_status read_header(model_source *src, const unsigned char *h, int *es, int *version, gpt2_error *err) {
    gpt2_config *c = &src->cfg;
    *version = rd32(h + 4);
    if (*version != 3 && *version != 5)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: llm.c model version %d, expected 3 (F32) or 5 (BF16); versions 1 "
                         "and 2 predate the padded vocabulary: export it again with llm.c's train_gpt2.py",
                         src->path, *version);
    *es = *version == 3 ? 4 : 2;
    static const struct { const char *name; int at; long lo, hi; } f[] = {
        {"max_seq_len", 2, 1, 1 << 20}, {"vocab_size", 3, 1, 1 << 24}, {"num_layers", 4, 1, 1000},
        {"num_heads", 5, 1, 4096},      {"channels", 6, 1, 65536},     {"padded_vocab_size", 7, 1, 1 << 24},
    };
    int v[6];
    for (int i = 0; i < 6; i++) {
        v[i] = rd32(h + 4 * f[i].at);
        if (v[i] < f[i].lo || v[i] > f[i].hi)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: header %s = %d, expected %ld to %ld", src->path, f[i].name,
                             v[i], f[i].lo, f[i].hi);
    }
    *c = (gpt2_config){.n_layer = v[2], .n_head = v[3], .n_embd = v[4], .n_ctx = v[0], .n_vocab = v[1], .ln_eps = 1e-5f};
    src->vocab_rows = v[5];
    if (c->n_embd % c->n_head)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: header channels %d is not divisible by num_heads %d", src->path,
                         c->n_embd, c->n_head);
    if (v[5] < v[1])
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: header padded_vocab_size %d is below vocab_size %d", src->path,
                         v[5], v[1]);
    src->n_inner = 4 * c->n_embd;
    src->linear_out_in = 1;
    src->cfg_from = "the llm.c header";
    return GPT2_OK;
}

/* One tensor (n_dims <= 2 of shape d0 x d1) at *at in the data, named as HF names it. */
static gpt2_status add(model_source *src, const char *name, int es, int n_dims, int64_t d0, int64_t d1, size_t *at,
                       gpt2_error *err) {
    st_tensor *t = &src->st.tensors[src->st.n_tensors];
    if (!(t->name = strdup(name))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    src->st.n_tensors++;
    snprintf(t->dtype, sizeof t->dtype, "%s", es == 4 ? "F32" : "BF16");
    t->elem_size = es;
    t->n_dims = n_dims;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->n_bytes = (size_t)d0 * (size_t)(n_dims == 2 ? d1 : 1) * (size_t)es;
    t->data = (const unsigned char *)src->st.map + *at;
    *at += t->n_bytes;
    return GPT2_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* Every parameter as a named tensor, after checking the file is exactly as long as they need. */
static gpt2_status add_tensors(model_source *src, int es, gpt2_error *err) {
    const gpt2_config *c = &src->cfg;
    const uint64_t C = (uint64_t)c->n_embd, L = (uint64_t)c->n_layer;
    const uint64_t per_layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
    const uint64_t n = (uint64_t)src->vocab_rows * C + (uint64_t)c->n_ctx * C + L * per_layer + 2 * C;
    if (src->st.map_size != LLMC_HEADER + n * (uint64_t)es)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes, but the header's shapes need %llu (1024 + %llu "
                         "parameters of %d bytes): truncated, or not an llm.c model of this version", src->path,
                         src->st.map_size, (unsigned long long)(LLMC_HEADER + n * (uint64_t)es), (unsigned long long)n,
                         es);
    if (!(src->st.tensors = calloc(4 + 12 * (size_t)L, sizeof *src->st.tensors)))
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    size_t at = LLMC_HEADER;
    gpt2_status st;
    if ((st = add(src, "wte.weight", es, 2, src->vocab_rows, c->n_embd, &at, err)) ||
        (st = add(src, "wpe.weight", es, 2, c->n_ctx, c->n_embd, &at, err)))
        return st;
    /* name, and its stored shape (out, in) per layer */
    const struct { const char *name; int64_t d0, d1; } p[12] = {
        {"ln_1.weight", 1, 0},           {"ln_1.bias", 1, 0},        {"attn.c_attn.weight", 3, 1},
        {"attn.c_attn.bias", 3, 0},      {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 1, 0},
        {"ln_2.weight", 1, 0},           {"ln_2.bias", 1, 0},        {"mlp.c_fc.weight", 4, 1},
        {"mlp.c_fc.bias", 4, 0},         {"mlp.c_proj.weight", 1, 4}, {"mlp.c_proj.bias", 1, 0},
    }; /* in multiples of C */
    for (int i = 0; i < 12; i++)
        for (int l = 0; l < c->n_layer; l++) {
            char name[64];
            snprintf(name, sizeof name, "h.%d.%s", l, p[i].name);
            if ((st = add(src, name, es, p[i].d1 ? 2 : 1, p[i].d0 * (int64_t)C, p[i].d1 * (int64_t)C, &at, err)))
                return st;
        }
    if ((st = add(src, "ln_f.weight", es, 1, c->n_embd, 0, &at, err)) ||
        (st = add(src, "ln_f.bias", es, 1, c->n_embd, 0, &at, err)))
        return st;
    qsort(src->st.tensors, (size_t)src->st.n_tensors, sizeof *src->st.tensors, cmp_name);
    return GPT2_OK;
}

gpt2_status llmc_tokenizer_load(const char *path, gpt2_tokenizer **out, gpt2_error *err) {
    char *data;
    size_t len;
    gpt2_status st = text_read_file(path, LLMC_TOK_MAX, GPT2_ERR_TOKENIZER, "tokenizer file", &data, &len, err);
    if (st) return st;
    const unsigned char *b = (const unsigned char *)data;
    const int version = len >= LLMC_HEADER ? rd32(b + 4) : 0, n = len >= LLMC_HEADER ? rd32(b + 8) : 0;
    if (len < LLMC_HEADER || rd32(b) != LLMC_TOKENIZER_MAGIC)
        st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: not llm.c's tokenizer (magic 20240328 in a 1024-byte header)", path);
    else if (version != 1 && version != 2)
        st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer version %d, expected 1 or 2", path, version);
    else if (n < 1 || n > (1 << 24))
        st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: vocab_size %d, expected 1 to %d", path, n, 1 << 24);
    const char **tok = st ? NULL : malloc((size_t)n * sizeof *tok);
    size_t *tl = st ? NULL : malloc((size_t)n * sizeof *tl);
    if (!st && (!tok || !tl)) st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    size_t at = LLMC_HEADER;
    for (int i = 0; !st && i < n; i++) {
        if (at >= len || b[at] == 0 || len - at - 1 < b[at])
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token %d at byte %zu: %s", path, i, at,
                           at < len && b[at] == 0 ? "length 0, expected 1 to 255" : "runs past the end of the file "
                                                                                     "(truncated?)");
        else
            tok[i] = data + at + 1, tl[i] = b[at], at += 1 + (size_t)b[at];
    }
    if (!st && at != len)
        st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %zu bytes after the last of %d tokens", path, len - at, n);
    if (!st) st = tok_from_tokens(tok, tl, n, version == 2 ? rd32(b + 12) : -1, 0, path, out, err);
    free(tok);
    free(tl);
    free(data);
    return st;
}

/* vocab.json + merges.txt (or encoder.json + vocab.bpe) beside the model if there (exact
 * merges), else gpt2_tokenizer.bin, else GPT-2's from the directory the caller gave. */
static gpt2_status llmc_tokenizer(model_source *src, char *tok_path, size_t cap, gpt2_error *err) {
    char dir[SOURCE_PATH_MAX];
    source_dir_of(src->path, dir, sizeof dir);
    struct stat sb;
    gpt2_status st = gpt2_fileio_join(tok_path, cap, dir, "encoder.json", err);
    const int openai = !st && stat(tok_path, &sb) == 0;
    if (!st && !(st = gpt2_fileio_join(tok_path, cap, dir, "vocab.json", err)) && (openai || stat(tok_path, &sb) == 0))
        return gpt2_tokenizer_load(dir, &src->tok, err);
    if (!st && !(st = gpt2_fileio_join(tok_path, cap, dir, "gpt2_tokenizer.bin", err)) && stat(tok_path, &sb) == 0)
        return llmc_tokenizer_load(tok_path, &src->tok, err);
    if (st) return st;
    char lacks[SOURCE_PATH_MAX + 300];
    snprintf(lacks, sizeof lacks, "no tokenizer beside this llm.c model: expected gpt2_tokenizer.bin (llm.c writes it "
             "beside gpt2_124M.bin) or vocab.json + merges.txt (or encoder.json + vocab.bpe) in %s, and no GPT-2 "
             "tokenizer directory was given", dir);
    return source_gpt2_tokenizer(src, tok_path, cap, lacks, err);
}

gpt2_status llmc_source_open(model_source *src, void *map, size_t size, gpt2_error *err) {
    src->st.map = map; /* the source owns the mapping from here on */
    src->st.map_size = size;
    if (!(src->st.path = strdup(src->path))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    if (size < LLMC_HEADER)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes, shorter than llm.c's 1024-byte header", src->path, size);
    int es = 4, version = 0;
    gpt2_status st = read_header(src, map, &es, &version, err);
    if (st || (st = add_tensors(src, es, err))) return st;
    snprintf(src->desc, sizeof src->desc, "llm.c model (%.120s, %s, version %d)", source_base_of(src->path),
             es == 4 ? "F32" : "BF16", version);
    char tok_path[SOURCE_PATH_MAX + 32];
    if ((st = llmc_tokenizer(src, tok_path, sizeof tok_path, err))) return st;
    if (gpt2_tokenizer_n_vocab(src->tok) > src->cfg.n_vocab)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: the tokenizer has %d ids, the model's vocab_size is %d", tok_path,
                         gpt2_tokenizer_n_vocab(src->tok), src->cfg.n_vocab);
    return source_fit_vocab(src, tok_path, err);
}
