/* export.c — write a trained model as a Hugging Face GPT-2 directory:
 * config.json and model.safetensors (tensor names without the "transformer."
 * prefix, Conv1D weights stored (in, out), the head tied to wte). Each file is
 * written through gpt2_fileio (temporary file, rename), so a reader never sees
 * half a file, and a model with a non-finite weight is never written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/kernels.h"
#include "core/model_source.h"
#include "core/safetensors.h"
#include "gpt2_fileio.h"
#include "train/train_internal.h"

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
                        cols ? (e[i].conv ? rows : cols) : rows, export_row, &e[i], dt};
    }
    if (!st) st = st_write(path, o, tr->n_tensors, err);
    free(e);
    free(o);
    return st;
}

static gpt2_status write_config(const gpt2_trainer *tr, const char *dir, gpt2_dtype dt, int eot, gpt2_error *err) {
    const gpt2_train_params *p = &tr->p;
    const source_config sc = {{.n_layer = p->n_layer, .n_head = p->n_head, .n_embd = p->n_embd, .n_ctx = p->block_size,
                               .n_vocab = p->n_vocab, .ln_eps = LN_EPS},
                              4 * p->n_embd, 0, 1, eot, dt, p->dropout, NULL};
    char path[4096];
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "config.json", err);
    return st ? st : source_write_config(path, &sc, err);
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
