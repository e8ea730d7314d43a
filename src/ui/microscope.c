/* microscope.c — what the chat does to look inside the model beyond
 * observing it: head ablation (the inspector's x/X keys and /ablate), with
 * the next-token distribution before and after each change; and prompt mode
 * (below). An ablation changes every later layer's keys and values, so the
 * session re-evaluates the whole cached context under the new set (with
 * progress, the conversation kept) and generation goes on under it until
 * it is lifted. */
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

int app_microscope_open(app *a) {
    gpt2_error err;
    gpt2_sampler_params sp = gpt2_sampler_default_params();
    sp.temperature = 1, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.repeat_penalty = 1;
    if (gpt2_sampler_new(sp, a->cfg->n_vocab, &a->probe, &err) != GPT2_OK) return -1;
    a->cmp_before = malloc((size_t)a->cfg->n_vocab * sizeof *a->cmp_before);
    a->cmp_after = malloc((size_t)a->cfg->n_vocab * sizeof *a->cmp_after);
    a->cmp_logits = malloc((size_t)a->cfg->n_vocab * sizeof *a->cmp_logits);
    a->at_logits = malloc((size_t)a->cfg->n_vocab * sizeof *a->at_logits);
    a->at_probs = malloc((size_t)a->cfg->n_vocab * sizeof *a->at_probs);
    a->cmp_n_tok = -1;
    return a->cmp_before && a->cmp_after && a->cmp_logits && a->at_logits && a->at_probs ? 0 : -1;
}

void app_microscope_close(app *a) {
    gpt2_sampler_free(a->probe);
    gpt2_context_free(a->probe_ctx);
    a->probe_ctx = NULL;
    free(a->cmp_before);
    free(a->cmp_after);
    free(a->cmp_logits);
    free(a->at_logits);
    free(a->at_probs);
    a->probe = NULL, a->cmp_before = a->cmp_after = a->cmp_logits = a->at_logits = a->at_probs = NULL;
}

int app_ablation_count(const app *a) {
    int n = 0;
    for (int l = 0; l < a->cfg->n_layer; l++)
        for (int h = 0; h < a->cfg->n_head; h++) n += gpt2_session_ablated(a->s, l, h);
    return n;
}

void app_ablation_text(const app *a, char *buf, size_t cap) {
    const int n = a->cfg->n_layer * a->cfg->n_head, H = a->cfg->n_head;
    unsigned char *mask = calloc((size_t)n, 1);
    buf[0] = '\0';
    if (!mask) return;
    for (int i = 0; i < n; i++) mask[i] = (unsigned char)gpt2_session_ablated(a->s, i / H, i % H);
    viz_ablation_text((viz_ablation){mask, a->cfg->n_layer, H}, buf, cap);
    free(mask);
}

/* The logits at the end of the context now, when the cache is in line with
 * the tokens (mid-reply in draft mode it may not be); NULL otherwise. */
static const float *logits_now(app *a) {
    const gpt2_context *ctx = gpt2_session_context(a->s);
    int n_tok;
    gpt2_session_tokens(a->s, &n_tok);
    return n_tok > 0 && gpt2_context_n_past(ctx) == n_tok ? gpt2_context_logits(ctx) : NULL;
}

static void compare_rows(app *a);

int app_next_now(app *a, istore_snap *out) {
    const float *lg = logits_now(a);
    if (!lg || gpt2_sampler_filter(a->probe, lg, NULL, 0, a->cmp_after) < 0) return 0;
    *out = (istore_snap){.valid = 1, .chosen = -1, .params = gpt2_sampler_get_params(a->probe)};
    out->n = (int)gpt2_sampler_report(a->probe, out->c, ISTORE_SNAP_K);
    return out->n > 0;
}

int app_next_at(app *a, int q, istore_snap *out) {
    const float *x = istore_residual(a->store, a->cfg->n_layer - 1, q);
    gpt2_error err;
    if (!x || !a->at_logits || gpt2_session_unembed(a->s, x, a->at_logits, &err) != GPT2_OK ||
        gpt2_sampler_filter(a->probe, a->at_logits, NULL, 0, a->at_probs) < 0)
        return 0;
    *out = (istore_snap){.valid = 1, .chosen = -1, .params = gpt2_sampler_get_params(a->probe)};
    out->n = (int)gpt2_sampler_report(a->probe, out->c, ISTORE_SNAP_K);
    return out->n > 0;
}

int app_rank_at(const app *a, int32_t id, long *rank, float *prob) {
    const int V = a->cfg->n_vocab;
    if (!a->at_probs || id < 0 || id >= V) return 0;
    const float p = a->at_probs[id];
    long above = 0;
    for (int i = 0; i < V; i++) above += a->at_probs[i] > p || (a->at_probs[i] == p && i < id);
    *rank = above + 1, *prob = p;
    return 1;
}

gpt2_context *app_probe_context(app *a, gpt2_error *err) {
    const size_t nm = (size_t)a->cfg->n_layer * a->cfg->n_head;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_ctx = a->n_ctx;
    unsigned char *mask = malloc(nm);
    if (!mask) {
        snprintf(err->msg, sizeof err->msg, "out of memory for the probe context");
        return NULL;
    }
    for (size_t i = 0; i < nm; i++) mask[i] = (unsigned char)gpt2_session_ablated(a->s, (int)(i / a->cfg->n_head), (int)(i % a->cfg->n_head));
    gpt2_status st = a->probe_ctx ? GPT2_OK : gpt2_context_new(a->model, cp, &a->probe_ctx, err);
    if (st == GPT2_OK) st = gpt2_context_set_ablation(a->probe_ctx, mask, err); /* a new set resets its cache */
    free(mask);
    return st == GPT2_OK ? a->probe_ctx : NULL;
}

/* The logits at the end of the context under the set in force now, into
 * out: the session's when its cache holds them; else (a stop string rewound
 * the last token away) from the app's own probe context, which evaluates the
 * context once more under that set. 0 when neither can. */
static int logits_before(app *a, float *out) {
    const float *lg = logits_now(a);
    int n_tok;
    const int32_t *toks = gpt2_session_tokens(a->s, &n_tok);
    gpt2_error err;
    gpt2_context *ctx = NULL;
    if (!lg && n_tok > 0 && (ctx = app_probe_context(a, &err))) {
        gpt2_context_reset(ctx);
        if (gpt2_context_eval(ctx, toks, n_tok, &err) == GPT2_OK) lg = gpt2_context_logits(ctx);
    }
    if (lg) memcpy(out, lg, (size_t)a->cfg->n_vocab * sizeof *lg);
    return lg != NULL;
}

void app_ablate_set(app *a, const unsigned char *mask, const char *what) {
    gpt2_error err;
    int had_before = logits_before(a, a->cmp_logits);
    a->progress_what = "ablation: re-evaluating the whole context under the new set";
    gpt2_status st = gpt2_session_set_ablation(a->s, mask, app_progress, a, &err);
    a->progress_what = NULL, a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "ablation cancelled: the old set is back" : err.msg);
        return;
    }
    int n_tok;
    gpt2_session_tokens(a->s, &n_tok);
    a->cmp_n_tok = had_before && logits_now(a) ? n_tok : -1;
    if (a->cmp_n_tok >= 0) compare_rows(a);
    snprintf(a->cmp_what, sizeof a->cmp_what, "%s", what);
    char set[256];
    app_ablation_text(a, set, sizeof set);
    app_message(a, UI_ROLE_NOTICE, "%s: the KV cache was re-evaluated under %s%s (%d tokens; conversation kept)%s", what,
                set[0] ? "ablation " : "no ablation", set, n_tok,
                set[0] ? "; generation goes on ablated until /ablate off" : "");
    app_log(a, "ablate %s: evaluated %d", set[0] ? set : "off", gpt2_session_get_stats(a->s).last_call);
    app_after_change(a);
}

void app_ablate_toggle(app *a, int layer, int head) {
    const int nh = a->cfg->n_head, nl = a->cfg->n_layer;
    if (layer < 0 || layer >= nl || head >= nh) return;
    unsigned char *mask = malloc((size_t)nl * nh);
    if (!mask) return;
    for (int i = 0; i < nl * nh; i++) mask[i] = (unsigned char)gpt2_session_ablated(a->s, i / nh, i % nh);
    int on = 0;
    for (int h = 0; h < nh; h++) on += mask[layer * nh + h];
    char what[96];
    if (head < 0) { /* the whole layer: on, unless all of it already is */
        int to = on < nh;
        for (int h = 0; h < nh; h++) mask[layer * nh + h] = (unsigned char)to;
        snprintf(what, sizeof what, "%s layer %d (all %d heads)", to ? "ablated" : "restored", layer, nh);
    } else {
        mask[layer * nh + head] ^= 1;
        snprintf(what, sizeof what, "%s L%d H%d", mask[layer * nh + head] ? "ablated" : "restored", layer, head);
    }
    app_ablate_set(a, mask, what);
    free(mask);
}

/* One row of the comparison: the token, its probability before and after,
 * the change in percentage points, and a bar of the after. */
static void compare_row(app *a, pane *p, int y, int32_t id) {
    char lab[48], pb[8], pa[8], bar[3 * 32 + 1];
    float b = a->cmp_before[id], f = a->cmp_after[id];
    app_token_label(a, id, lab, sizeof lab);
    term_printf(p->win, y, 2, 10, term_attr(UI_ROLE_TEXT), "%s", lab);
    int c = 13 + term_printf(p->win, y, 13, 7, term_attr(UI_ROLE_DIM), "%s", ui_percent(b, pb));
    c += term_printf(p->win, y, c, 3, term_attr(UI_ROLE_DIM), " \u2192");
    c += term_printf(p->win, y, c, 7, term_attr(UI_ROLE_TEXT), "%s", ui_percent(f, pa));
    float d = 100 * (f - b);
    c += term_printf(p->win, y, c, 8, term_attr(d > 0.05f ? UI_ROLE_CONF_HIGH : d < -0.05f ? UI_ROLE_CONF_LOW : UI_ROLE_DIM),
                     " %+6.1f", (double)d);
    int bw = p->w - 2 - c - 1;
    if (bw >= 3) term_printf(p->win, y, c + 1, bw, term_attr(UI_ROLE_BAR), "%s", ui_bar(f, bw > 32 ? 32 : bw, bar));
}

int app_compare_draw(app *a, pane *p, int y, int rows) {
    int n_tok;
    gpt2_session_tokens(a->s, &n_tok);
    if (a->cmp_n_tok < 0 || a->cmp_n_tok != n_tok || rows < 2) return 0;
    term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " next token at #%d, before \u2192 after %s", n_tok,
                a->cmp_what);
    for (int i = 0; i < a->cmp_n && i < rows - 1; i++) compare_row(a, p, y + 1 + i, a->cmp_ids[i]);
    return 1;
}

/* Appends id to the comparison's rows unless it is there. */
static void add_row(app *a, int32_t id) {
    for (int j = 0; j < a->cmp_n; j++)
        if (a->cmp_ids[j] == id) return;
    if (a->cmp_n < (int)(sizeof a->cmp_ids / sizeof *a->cmp_ids)) a->cmp_ids[a->cmp_n++] = id;
}

/* The rows, most probable either side: after's top 5, before's top 5, then
 * after's next ones (both rankings by the probe's report). */
static void compare_rows(app *a) {
    gpt2_candidate cb[ISTORE_SNAP_K], ca[ISTORE_SNAP_K];
    gpt2_sampler_filter(a->probe, a->cmp_logits, NULL, 0, a->cmp_before);
    int nb = (int)gpt2_sampler_report(a->probe, cb, ISTORE_SNAP_K);
    gpt2_sampler_filter(a->probe, gpt2_context_logits(gpt2_session_context(a->s)), NULL, 0, a->cmp_after);
    int na = (int)gpt2_sampler_report(a->probe, ca, ISTORE_SNAP_K);
    a->cmp_n = 0;
    for (int i = 0; i < na && i < 5; i++) add_row(a, ca[i].id);
    for (int i = 0; i < nb && i < 5; i++) add_row(a, cb[i].id);
    for (int i = 5; i < na; i++) add_row(a, ca[i].id);
}

/* ---- prompt mode ---- */

void app_hook_store(gpt2_session *s, istore *st) {
    /* the lens needs every block's residual; a model too big for the budget goes without */
    istore_keep_residuals(st, gpt2_model_config(gpt2_session_model(s))->n_embd, APP_RES_BUDGET);
    gpt2_hooks hooks = {.user_data = st, .want_attention = istore_hook_want, .on_attention = istore_hook_put,
                        .want_residual = istore_hook_want_residual, .on_residual = istore_hook_put_residual};
    gpt2_session_set_hooks(s, &hooks);
}

/* The prompt's session and store, made the first time (the raw template:
 * the text is evaluated exactly as typed, nothing around it). */
static int prompt_session(app *a) {
    gpt2_error err;
    if (a->other_s) return 0;
    gpt2_session_params ps = gpt2_session_default_params();
    ps.sampler = gpt2_session_sampler_params(a->s);
    ps.chat_template = gpt2_chat_template_builtin("raw");
    ps.context.n_batch = a->n_batch;
    if (gpt2_session_new(a->model, ps, &a->other_s, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return -1;
    }
    if (istore_new(a->cfg->n_layer, a->cfg->n_head, gpt2_session_n_ctx(a->other_s), APP_ATT_BUDGET, &a->other_store) !=
        ISTORE_OK) {
        gpt2_session_free(a->other_s), a->other_s = NULL;
        app_message(a, UI_ROLE_ERROR, "out of memory for prompt mode's attention rows");
        return -1;
    }
    app_hook_store(a->other_s, a->other_store);
    return 0;
}

/* Prompt mode <-> chat: the session and store shown trade places. */
static void swap_sessions(app *a) {
    gpt2_session *s = a->s;
    istore *st = a->store;
    a->s = a->other_s, a->store = a->other_store;
    a->other_s = s, a->other_store = st;
    a->prompt_mode = !a->prompt_mode;
    pane *ins = a->panes[PANE_INSPECTOR];
    inspector_set_layer(ins, inspector_layer(ins)); /* the store keeps the layer shown */
    app_forget_latest(a);
    a->reply_tokens = 0, a->turn_prefill = 0;
}

void app_inspect_text(app *a, const char *text) {
    gpt2_error err;
    if (a->generating) app_stop(a);
    if (!a->prompt_mode && (prompt_session(a) != 0 || (swap_sessions(a), 0))) return;
    if (gpt2_session_replying(a->s)) gpt2_session_stop(a->s, NULL, &err);
    gpt2_session_reset(a->s, &err);
    istore_notes_clear(a->store, -1);
    a->progress_what = "prompt: evaluating";
    gpt2_status st = gpt2_session_send(a->s, text, strlen(text), app_progress, a, &err);
    a->progress_what = NULL, a->prefill_msg[0] = '\0';
    app_after_change(a);
    app_forget_latest(a);
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "prompt cancelled" : err.msg);
        return;
    }
    int n;
    gpt2_session_tokens(a->s, &n);
    a->turn_prefill = gpt2_session_get_stats(a->s).last_prefill;
    inspector_set_view(a->panes[PANE_INSPECTOR], INSPECT_TEXT);
    app_message(a, UI_ROLE_NOTICE, "prompt mode: %d tokens evaluated as typed (raw template), nothing generated; "
                "/generate N continues, Enter inspects another text, /chat goes back", n);
    app_log(a, "inspect: %d tokens", n);
}

void app_generate(app *a, int n) {
    gpt2_error err;
    if (!a->prompt_mode) {
        app_message(a, UI_ROLE_ERROR, "/generate continues a prompt (/inspect TEXT); in the chat, send a message");
        return;
    }
    if (a->generating) app_stop(a);
    /* the prompt's reply is open until a generation ends it; then an empty
       turn (no tokens on the raw template) opens another after the text */
    if (!gpt2_session_replying(a->s) && gpt2_session_send(a->s, "", 0, NULL, NULL, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return;
    }
    a->restore_max_new = gpt2_session_max_new_tokens(a->s); /* the knob is back when this reply ends */
    gpt2_session_set_max_new_tokens(a->s, n);
    app_after_change(a);
    app_start_reply(a, a->turn_prefill); /* the turn's prefill stays the prompt's */
    app_reply_message(a, "generating %d tokens after the prompt (Esc stops)", n);
}

void app_back_to_chat(app *a) {
    if (!a->prompt_mode) {
        app_message(a, UI_ROLE_TEXT, "already in the conversation (/inspect TEXT opens prompt mode)");
        return;
    }
    if (a->generating) app_stop(a);
    swap_sessions(a);
    app_after_change(a);
    app_message(a, UI_ROLE_TEXT, "back to the conversation (the prompt is kept: /inspect TEXT)");
}
