/* export.c — /export KIND FILE: what the microscope shows, as files
 * (issue 15, §7), through the same writers as the command line (src/viz):
 *
 *   attention  the inspector's layer and head (or the mean of the heads)
 *              over the context: JSON, CSV, or a picture (SVG, PNG)
 *   heads      every head's scores (gpt2_inspect.h): JSON, CSV
 *   lens       the logit lens at the inspector's query: JSON, CSV
 *   topk       after each token of the context, the top next-token
 *              candidates and the rank of the token that followed: JSON, CSV
 *   why        the attribution the why view shows (view_why.c): JSON, CSV
 *
 * Everything comes from the store (attention rows, residuals) and the
 * session's model (the unembedding), never from a new forward pass; but
 * why, which the core computes in the app's probe context (its cache). */
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"
#include "viz/export.h"
#include "viz/picture.h"

enum { EXPORT_K = 10 }; /* candidates per row of lens and topk */

/* The context's pattern at the focus (layer, one head or the mean): w (n, n). 0 if a row is missing. */
static int export_pattern(app *a, const inspect_focus *f, float *w) {
    for (int q = 0; q < f->n_tok; q++) {
        float *row = w + (size_t)q * f->n_tok;
        istore_weights(a->store, f->layer, f->head, q, row);
        for (int k = 0; k <= q; k++)
            if (row[k] != row[k]) return 0;
        memset(row + q + 1, 0, (size_t)(f->n_tok - q - 1) * sizeof *row);
    }
    return 1;
}

/* The session's ablated heads as a mask (n_layer, n_head; malloc'd, NULL when out of memory). */
static unsigned char *ablation_mask(app *a) {
    const int n = a->cfg->n_layer * a->cfg->n_head, H = a->cfg->n_head;
    unsigned char *mask = calloc((size_t)n, 1);
    for (int i = 0; mask && i < n; i++) mask[i] = (unsigned char)gpt2_session_ablated(a->s, i / H, i % H);
    return mask;
}

static gpt2_status export_attention(app *a, const inspect_focus *f, const char *path, gpt2_error *err) {
    if (f->head == ISTORE_MAX)
        return viz_fail(err, GPT2_ERR_INVALID_ARG, "the export holds one head or the mean of the heads, not the max (m)");
    const int n = f->n_tok;
    float *w = malloc((size_t)n * n * sizeof *w);
    unsigned char *mask = ablation_mask(a);
    gpt2_status st = GPT2_OK;
    if (!w || !mask) st = viz_fail(err, GPT2_ERR_NOMEM, "out of memory for a %d x %d matrix", n, n);
    else if (!export_pattern(a, f, w))
        st = viz_fail(err, GPT2_ERR_INVALID_ARG, "layer %d's rows are not all kept (the context is too long to keep "
                                                 "every layer): show that layer and let the model run again",
                      f->layer);
    viz_attention at = {a->tok, a->model_name, f->toks, n, f->layer, f->head < 0 ? -1 : f->head, w,
                        {mask, a->cfg->n_layer, a->cfg->n_head}};
    viz_format fmt = viz_format_of(path);
    if (st == GPT2_OK && (fmt == VIZ_FORMAT_SVG || fmt == VIZ_FORMAT_PNG))
        st = viz_attention_picture(path, &at, a->cfg->n_head, err);
    else if (st == GPT2_OK)
        st = viz_export(path, &(viz_table){.kind = VIZ_TABLE_ATTENTION, .attention = &at}, err);
    free(w), free(mask);
    return st;
}

static gpt2_status export_heads(app *a, const char *path, gpt2_error *err) {
    const int n = a->cfg->n_layer * a->cfg->n_head;
    viz_head_row *rows = malloc((size_t)n * sizeof *rows);
    if (!rows) return viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    gpt2_status st = app_head_scores(a, rows, err);
    if (st == GPT2_OK) st = viz_export(path, &(viz_table){.kind = VIZ_TABLE_HEADS, .heads = &(viz_heads){a->tok, rows, n}}, err);
    free(rows);
    return st;
}

/* Logits (V) of position pos after block layer, from the store's residual. */
static gpt2_status lens_logits(app *a, int layer, int pos, float *z, gpt2_error *err) {
    const float *x = istore_residual(a->store, layer, pos);
    if (!x) return viz_fail(err, GPT2_ERR_INVALID_ARG, "position %d's residual stream is not kept", pos);
    return gpt2_session_unembed(a->s, x, z, err);
}

static gpt2_status export_lens(app *a, const inspect_focus *f, const char *path, gpt2_error *err) {
    const int L = a->cfg->n_layer, V = a->cfg->n_vocab;
    float *z = malloc((size_t)V * sizeof *z);
    viz_candidate *top = malloc((size_t)L * EXPORT_K * sizeof *top);
    viz_lens_row *rows = malloc((size_t)L * sizeof *rows);
    gpt2_status st = z && top && rows ? GPT2_OK : viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    viz_candidate final = {0};
    if (st == GPT2_OK && (st = lens_logits(a, L - 1, f->query, z, err)) == GPT2_OK) viz_top_candidates(z, V, 1, &final);
    for (int l = 0; l < L && st == GPT2_OK; l++) {
        if ((st = lens_logits(a, l, f->query, z, err)) != GPT2_OK) break;
        long k = viz_top_candidates(z, V, EXPORT_K, top + (size_t)l * EXPORT_K);
        rows[l] = (viz_lens_row){l, (int)k, top + (size_t)l * EXPORT_K, viz_candidate_of(z, V, final.id)};
    }
    unsigned char *mask = ablation_mask(a);
    if (st == GPT2_OK && !mask) st = viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    if (st == GPT2_OK) {
        viz_lens lens = {a->tok, f->toks, f->n_tok, f->query, L, rows, mask, a->cfg->n_head};
        st = viz_export(path, &(viz_table){.kind = VIZ_TABLE_LENS, .lens = &lens}, err);
    }
    free(z), free(top), free(rows), free(mask);
    return st;
}

static gpt2_status export_topk(app *a, const inspect_focus *f, const char *path, gpt2_error *err) {
    const int T = f->n_tok, V = a->cfg->n_vocab, L = a->cfg->n_layer;
    float *z = malloc((size_t)V * sizeof *z);
    viz_candidate *top = malloc((size_t)T * EXPORT_K * sizeof *top);
    viz_history_row *rows = malloc((size_t)T * sizeof *rows);
    gpt2_status st = z && top && rows ? GPT2_OK : viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    for (int p = 0; p < T && st == GPT2_OK; p++) {
        /* the last block's lens is the model's output, bit for bit */
        if ((st = lens_logits(a, L - 1, p, z, err)) != GPT2_OK) break;
        long k = viz_top_candidates(z, V, EXPORT_K, top + (size_t)p * EXPORT_K);
        viz_candidate next = {-1, 0, 0, 0};
        if (p + 1 < T) next = viz_candidate_of(z, V, f->toks[p + 1]);
        rows[p] = (viz_history_row){p, (int)k, top + (size_t)p * EXPORT_K, next};
    }
    unsigned char *mask = ablation_mask(a);
    if (st == GPT2_OK && !mask) st = viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    if (st == GPT2_OK) {
        viz_history h = {a->tok, f->toks, T, rows, {mask, L, a->cfg->n_head}};
        st = viz_export(path, &(viz_table){.kind = VIZ_TABLE_HISTORY, .history = &h}, err);
    }
    free(z), free(top), free(rows), free(mask);
    return st;
}

gpt2_status app_export(app *a, const char *kind, const char *path, gpt2_error *err) {
    inspect_focus f;
    inspector_focus(a->panes[PANE_INSPECTOR], &f);
    if (f.n_tok == 0) return viz_fail(err, GPT2_ERR_INVALID_ARG, "nothing to export yet: the context is empty");
    viz_format fmt = viz_format_of(path);
    int picture = fmt == VIZ_FORMAT_SVG || fmt == VIZ_FORMAT_PNG;
    if (fmt == VIZ_FORMAT_UNKNOWN)
        return viz_fail(err, GPT2_ERR_INVALID_ARG, "%s: the name must end in .json or .csv (.svg or .png: a picture of attention)", path);
    if (picture && strcmp(kind, "attention") != 0)
        return viz_fail(err, GPT2_ERR_INVALID_ARG, "a picture (.svg, .png) is of attention only; %s goes to .json or .csv", kind);
    if (!strcmp(kind, "attention")) return export_attention(a, &f, path, err);
    if (!strcmp(kind, "heads")) return export_heads(a, path, err);
    if (!strcmp(kind, "lens")) return export_lens(a, &f, path, err);
    if (!strcmp(kind, "topk")) return export_topk(a, &f, path, err);
    if (!strcmp(kind, "why")) return app_why_export(a, &f, inspector_why(a->panes[PANE_INSPECTOR]), path, err);
    return viz_fail(err, GPT2_ERR_INVALID_ARG, "'%s': expected attention, heads, lens, topk or why", kind);
}
