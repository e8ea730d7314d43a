/* export.c — write a trained model as a Hugging Face GPT-2 directory:
 * config.json and model.safetensors (tensor names without the "transformer."
 * prefix, Conv1D weights stored (in, out), the head tied to wte). Each file is
 * written through gpt2_fileio (temporary file, rename), so a reader never sees
 * half a file, and a model with a non-finite weight is never written.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/kernels.h"
#include "core/safetensors.h"
#include "gpt2_fileio.h"
#include "train/train_internal.h"

typedef struct {
    const void *a, *b;
    size_t na, nb;
} two_parts;

static gpt2_status put_parts(FILE *f, void *user, gpt2_error *err) {
    const two_parts *p = user;
    fwrite(p->a, 1, p->na, f);
    if (p->nb) fwrite(p->b, 1, p->nb, f);
    return GPT2_OK;
}

/* Writes dir/name atomically (gpt2_fileio): a's bytes, then b's. */
static gpt2_status write_atomic(const char *dir, const char *name, const void *a, size_t na, const void *b, size_t nb,
                                gpt2_error *err) {
    char path[4096];
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, name, err);
    if (st != GPT2_OK) return st;
    two_parts p = {.a = a, .na = na, .b = b, .nb = nb};
    return gpt2_fileio_write_atomic(path, put_parts, &p, err);
}

/* Whether tensor k of a layer is a Conv1D weight (stored transposed). */
static int is_conv1d(const gpt2_trainer *tr, int i) {
    if (i < 2 || i >= 2 + N_LAYER_TENSORS * tr->p.n_layer) return 0;
    int k = (i - 2) % N_LAYER_TENSORS;
    return k == QKV_W || k == PROJ_W || k == FC_W || k == FCPROJ_W;
}

/* One trainer tensor as stored: a Conv1D weight (in, out) = our (cols, rows). */
typedef struct {
    gpt2_train_tensor t;
    int conv;
} export_tensor;

static void export_row(const void *user, int64_t r, float *out) {
    const export_tensor *e = user;
    const int64_t rows = e->t.rows, cols = e->t.cols;
    if (!e->conv) {
        memcpy(out, e->t.param + r * (cols ? cols : rows), (size_t)(cols ? cols : rows) * sizeof *out);
        return;
    }
    for (int64_t c = 0; c < rows; c++) out[c] = e->t.param[c * cols + r]; /* stored row r = our column r */
}

static gpt2_status write_safetensors(const gpt2_trainer *tr, const char *dir, gpt2_dtype dt, gpt2_error *err) {
    char path[4096];
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "model.safetensors", err);
    export_tensor *e = malloc((size_t)tr->n_tensors * sizeof *e);
    st_out *o = malloc((size_t)tr->n_tensors * sizeof *o);
    if (!st && (!e || !o)) st = gpt2_fail(err, GPT2_ERR_NOMEM, "export: out of memory");
    for (int i = 0; !st && i < tr->n_tensors; i++) {
        e[i] = (export_tensor){gpt2_trainer_tensor(tr, i), is_conv1d(tr, i)};
        const int64_t rows = e[i].t.rows, cols = e[i].t.cols;
        o[i] = (st_out){e[i].t.name, cols ? 2 : 1, cols ? (e[i].conv ? cols : rows) : 1,
                        cols ? (e[i].conv ? rows : cols) : rows, export_row, &e[i]};
    }
    if (!st) st = st_write(path, o, tr->n_tensors, dt, err);
    free(e);
    free(o);
    return st;
}

static gpt2_status write_config(const gpt2_trainer *tr, const char *dir, gpt2_dtype dt, int eot, gpt2_error *err) {
    const gpt2_train_params *p = &tr->p;
    cJSON *c = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(c, "model_type", "gpt2");
    cJSON_AddNumberToObject(c, "vocab_size", p->n_vocab);
    cJSON_AddNumberToObject(c, "n_positions", p->block_size);
    cJSON_AddNumberToObject(c, "n_ctx", p->block_size);
    cJSON_AddNumberToObject(c, "n_embd", p->n_embd);
    cJSON_AddNumberToObject(c, "n_layer", p->n_layer);
    cJSON_AddNumberToObject(c, "n_head", p->n_head);
    cJSON_AddNullToObject(c, "n_inner");
    cJSON_AddStringToObject(c, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(c, "layer_norm_epsilon", LN_EPS);
    cJSON_AddNumberToObject(c, "initializer_range", 0.02);
    cJSON_AddNumberToObject(c, "resid_pdrop", p->dropout);
    cJSON_AddNumberToObject(c, "embd_pdrop", p->dropout);
    cJSON_AddNumberToObject(c, "attn_pdrop", 0);
    cJSON_AddTrueToObject(c, "tie_word_embeddings");
    if (eot >= 0) {
        cJSON_AddNumberToObject(c, "bos_token_id", eot);
        cJSON_AddNumberToObject(c, "eos_token_id", eot);
    }
    cJSON_AddStringToObject(c, "torch_dtype",
                            dt == GPT2_DTYPE_F32 ? "float32" : dt == GPT2_DTYPE_F16 ? "float16" : "bfloat16");
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    if (!text) return gpt2_fail(err, GPT2_ERR_NOMEM, "export: out of memory");
    gpt2_status st = write_atomic(dir, "config.json", text, strlen(text), "\n", 1, err);
    free(text);
    return st;
}

gpt2_status gpt2_trainer_export(const gpt2_trainer *tr, const char *dir, gpt2_dtype dtype, int eot,
                                gpt2_error *err) {
    if (dtype != GPT2_DTYPE_F32 && dtype != GPT2_DTYPE_F16 && dtype != GPT2_DTYPE_BF16)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "export: unknown dtype %d", (int)dtype);
    char bad[256];
    if (!trainer_values_ok(tr, 0, bad, sizeof bad))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "%s: model not exported: %s (training diverged?); the files there are kept", dir, bad);
    gpt2_status st = write_safetensors(tr, dir, dtype, err);
    return st == GPT2_OK ? write_config(tr, dir, dtype, eot, err) : st;
}
