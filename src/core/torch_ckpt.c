/* torch_ckpt.c — PyTorch zip checkpoints as model sources: nanoGPT's ckpt.pt and
 * Hugging Face's pytorch_model.bin (model_source.h).
 *
 * torch.save writes a zip of stored entries (zip.h): ARCHIVE/data.pkl, a
 * protocol-2 pickle (pickle.h), and ARCHIVE/data/KEY per storage. A state dict
 * maps names to tensors (storage, offset, size, stride); each tensor here must
 * be contiguous and inside its storage, and becomes an st_tensor pointing into
 * the mapping. The pickle's top level tells the two apart:
 *   nanoGPT   {"model": state dict, "model_args": {n_layer, n_head, n_embd,
 *             block_size, bias, vocab_size, ...}, "iter_num", "best_val_loss",
 *             "config": {"dataset", ...}, "optimizer"}; names possibly prefixed
 *             "_orig_mod." (torch.compile); nn.Linear weights (out, in); exact
 *             GELU; bias=False: no biases at all; tokenizer: meta.pkl
 *             (character-level) or GPT-2's BPE files (see nanogpt_tokenizer)
 *   HF        the state dict itself, with config.json and the tokenizer beside it
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "error.h"
#include "gpt2_fileio.h"
#include "model_source.h"
#include "pickle.h"
#include "textio.h"
#include "tokenizer_internal.h"
#include "zip.h"

enum { META_MAX_BYTES = 64 << 20 };

typedef struct {
    model_source *src;
    zip_archive z;
    char prefix[256];     /* "ckpt/" */
    pk_doc doc;
    gpt2_error *err;
} torch_file;

/* The one ARCHIVE/data.pkl entry. */
static gpt2_status find_pickle(torch_file *tf, const zip_entry **out) {
    const char *path = tf->src->path;
    *out = NULL;
    for (size_t i = 0; i < tf->z.n; i++) {
        const char *name = tf->z.entries[i].name, *slash = strchr(name, '/');
        if (!slash || strcmp(slash, "/data.pkl") != 0) continue;
        if (*out)
            return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: two pickles (%s and another */data.pkl), expected one",
                             path, (*out)->name);
        if ((size_t)(slash - name) + 2 > sizeof tf->prefix)
            return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: archive name too long", path);
        *out = &tf->z.entries[i];
        snprintf(tf->prefix, sizeof tf->prefix, "%.*s/", (int)(slash - name), name);
    }
    if (!*out)
        return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: a zip without ARCHIVE/data.pkl: not a PyTorch checkpoint "
                         "(torch.save writes one)", path);
    return GPT2_OK;
}

/* --- tensors ---------------------------------------------------------------- */

/* Elements of a tensor, with overflow refused (at most 2^62 elements). */
static int tensor_numel(const pk_tensor *t, int64_t *out) {
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) {
        if (t->shape[d] && n > ((int64_t)1 << 62) / t->shape[d]) return 0;
        n *= t->shape[d];
    }
    *out = n;
    return 1;
}

/* Checks one state-dict tensor against its storage and its storage against the
 * zip, and fills st (name owned by the caller). Long by design: a loader's
 * validation, one message per defect. */
static gpt2_status bind_tensor(torch_file *tf, const char *shown, const pk_tensor *t, st_tensor *st) {
    const char *path = tf->src->path;
    const pk_value *s = t->storage;
    char entry[320];
    snprintf(entry, sizeof entry, "%sdata/%s", tf->prefix, s->u.g.key);
    const zip_entry *e = zip_find(&tf->z, entry);
    const uint64_t es = (uint64_t)s->u.g.elem_size;
    if (!e)
        return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: tensor '%s': its storage %s is not in the archive", path, shown,
                         entry);
    if ((uint64_t)s->u.g.numel > e->size / es || e->size != (uint64_t)s->u.g.numel * es)
        return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: tensor '%s': entry %s holds %llu bytes, its storage needs %lld "
                         "%s elements of %llu bytes", path, shown, entry, (unsigned long long)e->size,
                         (long long)s->u.g.numel, s->u.g.dtype, (unsigned long long)es);
    int64_t n;
    if (!tensor_numel(t, &n))
        return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: tensor '%s': its shape's element count overflows", path, shown);
    if (n > 0 && (t->offset > s->u.g.numel || n > s->u.g.numel - t->offset))
        return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: tensor '%s': elements [%lld, %lld) lie outside its storage of "
                         "%lld", path, shown, (long long)t->offset, (long long)(t->offset + n), (long long)s->u.g.numel);
    int64_t acc = 1; /* row-major strides; a dimension of size 1 may have any */
    for (int d = t->n_dims - 1; d >= 0 && n > 0; acc *= t->shape[d], d--)
        if (t->shape[d] > 1 && t->stride[d] != acc)
            return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: tensor '%s': stride %lld in dimension %d, expected %lld "
                             "(gptscope reads contiguous tensors, as a state dict holds them)", path, shown,
                             (long long)t->stride[d], d, (long long)acc);
    memcpy(st->dtype, s->u.g.dtype, sizeof s->u.g.dtype);
    st->elem_size = s->u.g.elem_size;
    st->n_dims = t->n_dims;
    for (int d = 0; d < t->n_dims; d++) st->shape[d] = t->shape[d];
    st->data = n > 0 ? e->data + (uint64_t)t->offset * es : e->data; /* an empty tensor's offset may be anything */
    st->n_bytes = (size_t)((uint64_t)n * es);
    return GPT2_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* The state dict's tensors into src->st, named without torch.compile's "_orig_mod."
 * (and DDP's "module."); entries that are not tensors are skipped. */
static gpt2_status add_state_dict(torch_file *tf, const pk_value *sd) {
    model_source *src = tf->src;
    const size_t n = sd->u.seq.n / 2;
    if (!(src->st.tensors = calloc(n ? n : 1, sizeof *src->st.tensors)))
        return gpt2_fail(tf->err, GPT2_ERR_NOMEM, "%s: out of memory", src->path);
    for (size_t i = 0; i < n; i++) {
        const pk_value *k = sd->u.seq.v[2 * i], *v = sd->u.seq.v[2 * i + 1];
        if (k->kind != PK_STR || v->kind != PK_TENSOR) continue;
        const char *name = k->u.str.s;
        for (int again = 1; again;) {
            again = 0;
            static const char *const strip[] = {"_orig_mod.", "module."};
            for (int s = 0; s < 2; s++)
                if (!strncmp(name, strip[s], strlen(strip[s]))) name += strlen(strip[s]), again = 1;
        }
        char shown[TEXT_SHOW_BUF];
        text_show(k->u.str.s, k->u.str.n, shown);
        st_tensor *t = &src->st.tensors[src->st.n_tensors];
        gpt2_status st = bind_tensor(tf, shown, v->u.t, t);
        if (st) return st;
        if (!(t->name = strdup(name))) return gpt2_fail(tf->err, GPT2_ERR_NOMEM, "%s: out of memory", src->path);
        src->st.n_tensors++;
    }
    qsort(src->st.tensors, (size_t)src->st.n_tensors, sizeof *src->st.tensors, cmp_name);
    for (int i = 1; i < src->st.n_tensors; i++)
        if (!strcmp(src->st.tensors[i - 1].name, src->st.tensors[i].name)) {
            char shown[TEXT_SHOW_BUF];
            return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: tensor '%s' appears twice", src->path,
                             text_show(src->st.tensors[i].name, strlen(src->st.tensors[i].name), shown));
        }
    return GPT2_OK;
}

/* --- nanoGPT ---------------------------------------------------------------- */

static gpt2_status arg_int(torch_file *tf, const pk_value *args, const char *key, long lo, long hi, int *out) {
    const pk_value *v = pk_dict_get(args, key);
    if (v && (v->kind == PK_INT) && v->u.i >= lo && v->u.i <= hi) {
        *out = (int)v->u.i;
        return GPT2_OK;
    }
    char found[64];
    if (!v) snprintf(found, sizeof found, "nothing");
    else if (v->kind == PK_INT) snprintf(found, sizeof found, "%lld", (long long)v->u.i);
    else snprintf(found, sizeof found, "a value of another type");
    return gpt2_fail(tf->err, GPT2_ERR_CONFIG, "%s: model_args.%s: expected an integer in [%ld, %ld], found %s",
                     tf->src->path, key, lo, hi, found);
}

/* model_args -> the config: exact GELU, eps 1e-5, nn.Linear layout, biases as `bias` says. */
static gpt2_status nanogpt_config(torch_file *tf, const pk_value *args) {
    model_source *src = tf->src;
    gpt2_config *c = &src->cfg;
    gpt2_status st;
    if ((st = arg_int(tf, args, "n_layer", 1, 1000, &c->n_layer)) ||
        (st = arg_int(tf, args, "n_head", 1, 4096, &c->n_head)) ||
        (st = arg_int(tf, args, "n_embd", 1, 65536, &c->n_embd)) ||
        (st = arg_int(tf, args, "block_size", 1, 1 << 20, &c->n_ctx)) ||
        (st = arg_int(tf, args, "vocab_size", 1, 1 << 24, &src->vocab_rows)))
        return st;
    if (c->n_embd % c->n_head)
        return gpt2_fail(tf->err, GPT2_ERR_CONFIG, "%s: model_args: n_embd %d is not divisible by n_head %d",
                         src->path, c->n_embd, c->n_head);
    const pk_value *bias = pk_dict_get(args, "bias");
    if (bias && bias->kind != PK_BOOL)
        return gpt2_fail(tf->err, GPT2_ERR_CONFIG, "%s: model_args.bias: expected True or False", src->path);
    c->n_vocab = src->vocab_rows;
    c->ln_eps = 1e-5f;
    src->n_inner = 4 * c->n_embd;
    src->gelu_erf = 1;
    src->linear_out_in = 1;
    src->bias_optional = bias && !bias->u.i;
    src->cfg_from = "model_args";
    return GPT2_OK;
}

/* The description: "nanoGPT checkpoint (ckpt.pt, iter 5000, val loss 1.4697), bias=False". */
static void nanogpt_desc(torch_file *tf, const pk_value *root) {
    char extra[96] = "";
    const pk_value *it = pk_dict_get(root, "iter_num"), *loss = pk_dict_get(root, "best_val_loss");
    if (it && it->kind == PK_INT) snprintf(extra, sizeof extra, ", iter %lld", (long long)it->u.i);
    double lv = -1;
    if (loss && loss->kind == PK_FLOAT) lv = loss->u.f;
    if (loss && loss->kind == PK_TENSOR && loss->u.t->n_dims == 0) { /* a 0-d F32 tensor */
        st_tensor t = {0};
        if (!bind_tensor(tf, "best_val_loss", loss->u.t, &t) && !strcmp(t.dtype, "F32")) {
            float f;
            memcpy(&f, t.data, 4);
            lv = f;
        }
        gpt2_error_clear(tf->err);
    }
    size_t n = strlen(extra);
    if (lv >= 0) snprintf(extra + n, sizeof extra - n, ", val loss %.4f", lv);
    snprintf(tf->src->desc, sizeof tf->src->desc, "nanoGPT checkpoint (%.80s%s), bias=%s", source_base_of(tf->src->path),
             extra, tf->src->bias_optional ? "False" : "True");
}

/* meta.pkl's itos (id -> one character) as a character-level tokenizer. */
static gpt2_status meta_tokenizer(const char *path, gpt2_tokenizer **out, gpt2_error *err) {
    char *data;
    size_t len;
    pk_doc doc;
    gpt2_status st = text_read_file(path, META_MAX_BYTES, GPT2_ERR_TOKENIZER, "meta.pkl", &data, &len, err);
    if (st) return st;
    st = pickle_load(path, "pickle", data, len, &doc, err);
    free(data);
    if (st) return st;
    const pk_value *itos = pk_dict_get(doc.root, "itos");
    const char **tok = NULL;
    size_t *tl = NULL;
    int n = 0;
    if (!itos || itos->kind != PK_DICT)
        st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: no dict 'itos' (id -> character), as nanoGPT's prepare.py writes",
                       path);
    else if ((n = (int)(itos->u.seq.n / 2)) < 1 || !(tok = calloc((size_t)n, sizeof *tok)) ||
             !(tl = calloc((size_t)n, sizeof *tl)))
        st = gpt2_fail(err, n < 1 ? GPT2_ERR_TOKENIZER : GPT2_ERR_NOMEM, "%s: %s", path,
                       n < 1 ? "'itos' is empty" : "out of memory");
    for (int i = 0; !st && i < n; i++) {
        const pk_value *k = itos->u.seq.v[2 * i], *v = itos->u.seq.v[2 * i + 1];
        if (k->kind != PK_INT || k->u.i < 0 || k->u.i >= n || v->kind != PK_STR || tok[k->u.i])
            st = gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: itos entry %d: expected a distinct id in [0, %d) mapped to a "
                           "string", path, i, n);
        else
            tok[k->u.i] = v->u.str.s, tl[k->u.i] = v->u.str.n;
    }
    if (!st) st = tok_from_tokens(tok, tl, n, -1, 1, path, out, err);
    free(tok);
    free(tl);
    pickle_free(&doc);
    return st;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The tokenizer of a nanoGPT checkpoint, where nanoGPT's sample.py would find it
 * or beside the checkpoint: meta.pkl beside it, ../data/DATASET/meta.pkl (the
 * repository's layout: out/ckpt.pt and data/DATASET/meta.pkl), or GPT-2's BPE
 * files beside it (a checkpoint without meta.pkl uses GPT-2's BPE). */
static gpt2_status nanogpt_tokenizer(torch_file *tf, const pk_value *root, char *tok_path, size_t cap) {
    model_source *src = tf->src;
    char dir[SOURCE_PATH_MAX];
    source_dir_of(src->path, dir, sizeof dir);
    const char *dataset = pk_str(pk_dict_get(pk_dict_get(root, "config"), "dataset"));
    const int ds_ok = dataset && *dataset && dataset[0] != '.' && !strchr(dataset, '/') && strlen(dataset) < 200;
    snprintf(tok_path, cap, "%s/meta.pkl", dir);
    if (exists(tok_path)) return meta_tokenizer(tok_path, &src->tok, tf->err);
    if (ds_ok && snprintf(tok_path, cap, "%s/../data/%s/meta.pkl", dir, dataset) < (int)cap && exists(tok_path))
        return meta_tokenizer(tok_path, &src->tok, tf->err);
    snprintf(tok_path, cap, "%s/vocab.json", dir);
    char enc[SOURCE_PATH_MAX + 16];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    if (exists(tok_path) || exists(enc)) return gpt2_tokenizer_load(dir, &src->tok, tf->err);
    char shown[TEXT_SHOW_BUF], lacks[TEXT_SHOW_BUF + 400];
    snprintf(lacks, sizeof lacks, "no tokenizer for this nanoGPT checkpoint: no meta.pkl beside it%s%s%s, no vocab.json "
             "+ merges.txt (or encoder.json + vocab.bpe) beside it, and no GPT-2 tokenizer directory given (nanoGPT "
             "uses GPT-2's BPE without meta.pkl): put GPT-2's tokenizer files beside it",
             ds_ok ? " or at ../data/" : "", ds_ok ? text_show(dataset, strlen(dataset), shown) : "",
             ds_ok ? "/meta.pkl" : "");
    return source_gpt2_tokenizer(src, tok_path, cap, lacks, tf->err);
}

static gpt2_status open_nanogpt(torch_file *tf, const pk_value *root) {
    const pk_value *sd = pk_dict_get(root, "model"), *args = pk_dict_get(root, "model_args");
    if (!sd || sd->kind != PK_DICT || !args || args->kind != PK_DICT)
        return gpt2_fail(tf->err, GPT2_ERR_FORMAT, "%s: 'model' and 'model_args' must be dicts", tf->src->path);
    gpt2_status st = nanogpt_config(tf, args);
    if (st || (st = add_state_dict(tf, sd))) return st;
    nanogpt_desc(tf, root);
    char tok_path[SOURCE_PATH_MAX + 64];
    if ((st = nanogpt_tokenizer(tf, root, tok_path, sizeof tok_path))) return st;
    return source_fit_vocab(tf->src, tok_path, tf->err);
}

/* --- Hugging Face ------------------------------------------------------------- */

static gpt2_status open_hf(torch_file *tf, const pk_value *sd) {
    model_source *src = tf->src;
    char dir[SOURCE_PATH_MAX], path[SOURCE_PATH_MAX + 16];
    source_dir_of(src->path, dir, sizeof dir);
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "config.json", tf->err);
    if (st || (st = source_parse_config(path, src, tf->err)) || (st = add_state_dict(tf, sd))) return st;
    if ((st = source_hf_tokenizer(src, dir, path, sizeof path, tf->err))) return st;
    snprintf(src->desc, sizeof src->desc, "Hugging Face PyTorch checkpoint (%.200s)", source_base_of(src->path));
    return source_fit_vocab(src, path, tf->err);
}

/* Whether a dict holds a tensor (a state dict) rather than nanoGPT's wrapper. */
static int has_tensor(const pk_value *d) {
    for (size_t i = 1; i < d->u.seq.n; i += 2)
        if (d->u.seq.v[i]->kind == PK_TENSOR) return 1;
    return 0;
}

gpt2_status torch_source_open(model_source *src, void *map, size_t size, gpt2_error *err) {
    torch_file tf = {.src = src, .err = err};
    src->st.map = map; /* the source owns the mapping from here on */
    src->st.map_size = size;
    if (!(src->st.path = strdup(src->path))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    const zip_entry *pkl;
    gpt2_status st = zip_open(src->path, map, size, &tf.z, err);
    if (st || (st = find_pickle(&tf, &pkl)) || (st = zip_check_crc(&tf.z, pkl, err))) goto done;
    if ((st = pickle_load(src->path, pkl->name, pkl->data, (size_t)pkl->size, &tf.doc, err))) goto done;
    const pk_value *root = tf.doc.root;
    if (root->kind != PK_DICT)
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: the pickle holds no dict, expected a state dict or a nanoGPT "
                       "checkpoint", src->path);
    else if (pk_dict_get(root, "model_args"))
        st = open_nanogpt(&tf, root);
    else if (has_tensor(root))
        st = open_hf(&tf, root);
    else
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: neither a state dict (a dict of tensors) nor a nanoGPT checkpoint "
                       "('model' and 'model_args')", src->path);
done:
    pickle_free(&tf.doc);
    zip_close(&tf.z);
    return st;
}
