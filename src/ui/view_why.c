/* view_why.c — why this token: direct logit attribution at the inspector's
 * query (issue 34, §1), a view of the inspector (w, /why).
 *
 * For the query position q, the token that follows it (at the newest
 * position, the model's top 1; with vs, against the best other token): its
 * logit split by the core (gpt2_attribute) into the embeddings, every head,
 * the attention biases, the MLPs and the final norm's bias, with that norm's
 * scale frozen. Drawn as the layer x head grid (a shade per head, its sign
 * beside it) and the parts largest first with signed bars; Enter opens the
 * selected head in the heatmap. Computed in the app's probe context (its
 * cache reused up to q) when the query, the context, the ablation or the
 * choice changes; drawn from the cache otherwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"
#include "viz/export.h"

typedef struct {
    char name[24];
    int layer, head; /* head -1: not a head */
    double v;
} why_part;

struct why_cache {
    const gpt2_session *s; /* what it is for */
    int q, n_tok, vs;
    unsigned long version;
    int ok;
    char err[GPT2_ERROR_MSG_MAX];
    gpt2_attribution a;
    why_part *parts; /* (n_parts), largest |v| first */
    int n_parts;
};

static int by_size(const void *x, const void *y) {
    const double a = fabs(((const why_part *)x)->v), b = fabs(((const why_part *)y)->v);
    return a < b ? 1 : a > b ? -1 : 0;
}

/* The parts of c->a as a list, largest first (zero attention biases left out). */
static void why_list(struct why_cache *c) {
    const gpt2_attribution *a = &c->a;
    const int L = a->n_layer, H = a->n_head;
    int n = 0;
    c->parts[n++] = (why_part){"embed", -1, -1, a->embed};
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            c->parts[n] = (why_part){.layer = l, .head = h, .v = a->heads[(size_t)l * H + h]};
            snprintf(c->parts[n++].name, sizeof c->parts[0].name, "L%d H%d", l, h);
        }
        if (a->attn_bias[l] != 0) {
            c->parts[n] = (why_part){.layer = l, .head = -1, .v = a->attn_bias[l]};
            snprintf(c->parts[n++].name, sizeof c->parts[0].name, "L%d attn bias", l);
        }
        c->parts[n] = (why_part){.layer = l, .head = -1, .v = a->mlp[l]};
        snprintf(c->parts[n++].name, sizeof c->parts[0].name, "L%d MLP", l);
    }
    if (!a->rms_norm) c->parts[n++] = (why_part){"ln_f bias", -1, -1, a->ln_f_bias};
    qsort(c->parts, (size_t)n, sizeof *c->parts, by_size);
    c->n_parts = n;
}

/* The attribution for the focus (recomputed only when something it depends on moved). */
static struct why_cache *why_for(app *a, const inspect_focus *f, const why_choice *ch) {
    struct why_cache *c = a->why;
    const int L = a->cfg->n_layer, H = a->cfg->n_head;
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return NULL;
        if (!(c->parts = malloc(((size_t)L * (H + 2) + 2) * sizeof *c->parts))) return free(c), NULL;
        c->q = -1;
        a->why = c;
    }
    const unsigned long v = istore_version(a->store);
    if (c->s == a->s && c->q == f->query && c->n_tok == f->n_tok && c->version == v && c->vs == ch->vs) return c;
    c->s = a->s, c->q = f->query, c->n_tok = f->n_tok, c->version = v, c->vs = ch->vs, c->ok = 0;
    gpt2_attribution_free(&c->a);
    gpt2_error err = {0};
    gpt2_context *ctx = app_probe_context(a, &err);
    gpt2_attribution_params p = gpt2_attribution_default_params();
    p.pos = f->query;
    p.target = f->query + 1 < f->n_tok ? f->toks[f->query + 1] : -1; /* the token that follows, else the top 1 */
    gpt2_status st = ctx ? gpt2_attribute(ctx, f->toks, f->n_tok, p, &c->a, &err) : GPT2_ERR_NOMEM;
    if (st == GPT2_OK && ch->vs) { /* against the best other token: the cache holds 0..q, only q runs again */
        viz_candidate top[2];
        if (viz_top_candidates(gpt2_context_logits(ctx), a->cfg->n_vocab, 2, top) == 2) {
            p.target = c->a.target;
            p.baseline = top[0].id != p.target ? top[0].id : top[1].id;
            gpt2_attribution_free(&c->a);
            st = gpt2_attribute(ctx, f->toks, f->n_tok, p, &c->a, &err);
        }
    }
    if (st != GPT2_OK) {
        snprintf(c->err, sizeof c->err, "%s", err.msg);
        return c;
    }
    why_list(c);
    c->ok = 1;
    return c;
}

void app_why_free(app *a) {
    if (!a->why) return;
    gpt2_attribution_free(&a->why->a);
    free(a->why->parts), free(a->why);
    a->why = NULL;
}

/* A signed bar in 2 * half + 1 columns from x: the axis in the middle. */
static void signed_bar(pane *p, int y, int x, int half, double v, double max) {
    const int n = max > 0 ? (int)lround(fmin(1.0, fabs(v) / max) * half) : 0;
    char bar[3 * 64 + 1];
    ui_bar(1.0f, n, bar);
    term_printf(p->win, y, x + half, 1, term_attr(UI_ROLE_DIM), "|");
    if (n > 0)
        term_printf(p->win, y, v < 0 ? x + half - n : x + half + 1, n,
                    term_attr(v < 0 ? UI_ROLE_CONF_LOW : UI_ROLE_CONF_HIGH), "%s", bar);
}

/* The layer x head grid: a shade per head by |part| against the largest,
 * + or - beside it (the sign also by colour). Returns the rows used. */
static int why_grid(pane *p, int y, int h, const struct why_cache *c) {
    const gpt2_attribution *a = &c->a;
    const int L = a->n_layer, H = a->n_head;
    double max = 0;
    for (int i = 0; i < L * H; i++) max = fmax(max, fabs(a->heads[i]));
    static const char *shade[] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};
    int rows = 0;
    for (int l = 0; l < L && rows < h; l++, rows++) {
        term_printf(p->win, y + rows, 1, 4, term_attr(UI_ROLE_DIM), "L%-3d", l);
        for (int hh = 0; hh < H && 5 + 2 * hh + 1 < p->w - 1; hh++) {
            const double v = a->heads[(size_t)l * H + hh];
            const int level = max > 0 ? (int)ceil(fabs(v) / max * 4) : 0;
            term_printf(p->win, y + rows, 5 + 2 * hh, 2, term_attr(v < 0 ? UI_ROLE_CONF_LOW : UI_ROLE_CONF_HIGH), "%s%s",
                        shade[level > 4 ? 4 : level], level ? (v < 0 ? "-" : "+") : " ");
        }
    }
    return rows;
}

void view_why(pane *p, int y, int h, const inspect_focus *f, why_choice *ch) {
    app *a = p->a;
    if (f->query < 0 || h < 4) return;
    const struct why_cache *c = why_for(a, f, ch);
    if (!c || !c->ok) {
        term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_ERROR), "why: %s", c ? c->err : "out of memory");
        return;
    }
    const gpt2_attribution *at = &c->a;
    char q[64], t[64], b[64];
    app_token_label(a, f->toks[f->query], q, sizeof q);
    app_token_label(a, at->target, t, sizeof t);
    if (at->baseline >= 0) {
        app_token_label(a, at->baseline, b, sizeof b);
        term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TEXT), "why \"%s\" rather than \"%s\" after #%d \"%s\"", t,
                    b, f->query, q);
    } else
        term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TEXT), "why \"%s\" after #%d \"%s\"", t, f->query, q);
    term_printf(p->win, y + 1, 1, p->w - 2, term_attr(UI_ROLE_DIM), "%s %.3f; parts sum %.3f",
                at->baseline >= 0 ? "logit difference" : "logit", at->logit, at->sum);
    term_printf(p->win, y + 2, 1, p->w - 2, term_attr(UI_ROLE_DIM), "final %s's scale frozen at %.3f",
                at->rms_norm ? "RMSNorm" : "LayerNorm", at->scale);
    int rows = 3;
    /* the grid when it leaves the list 5 rows at least */
    if (h - rows - 1 - at->n_layer >= 5 && p->w >= 8 + 2 * at->n_head) {
        term_printf(p->win, y + rows++, 1, p->w - 2, term_attr(UI_ROLE_DIM), "heads: shade |part|, +/- sign");
        rows += why_grid(p, y + rows, at->n_layer, c);
    }
    if (ch->sel >= c->n_parts) ch->sel = c->n_parts - 1;
    if (ch->sel < 0) ch->sel = 0;
    term_printf(p->win, y + rows++, 1, p->w - 2, term_attr(UI_ROLE_DIM), "parts: [ ] pick, Enter opens, b %s",
                ch->vs ? "alone" : "vs 2nd");
    const int n_show = h - rows;
    const int first = ch->sel >= n_show ? ch->sel - n_show + 1 : 0; /* the selection in view */
    const int half = (p->w - 2 - 24) / 2 > 24 ? 24 : (p->w - 2 - 24) / 2;
    for (int i = first; i < c->n_parts && rows < h; i++, rows++) {
        const why_part *pt = &c->parts[i];
        attr_t at_row = term_attr(i == ch->sel ? UI_ROLE_SELECTION : UI_ROLE_TEXT);
        term_printf(p->win, y + rows, 1, 22, at_row, "%s%-12s %+8.3f", i == ch->sel ? ">" : " ", pt->name, pt->v);
        if (half >= 3) signed_bar(p, y + rows, 24, half, pt->v, fabs(c->parts[0].v));
    }
}

int app_why_head(app *a, const inspect_focus *f, const why_choice *ch, int *layer, int *head) {
    const struct why_cache *c = a->why;
    if (!c || !c->ok || c->s != a->s || c->q != f->query || ch->sel < 0 || ch->sel >= c->n_parts) return 0;
    const why_part *pt = &c->parts[ch->sel];
    if (pt->head < 0) return 0;
    *layer = pt->layer, *head = pt->head;
    return 1;
}

gpt2_status app_why_export(app *a, const inspect_focus *f, const why_choice *ch, const char *path, gpt2_error *err) {
    if (f->query < 0) return viz_fail(err, GPT2_ERR_INVALID_ARG, "nothing to attribute yet: the context is empty");
    const struct why_cache *c = why_for(a, f, ch);
    if (!c) return viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    if (!c->ok) return viz_fail(err, GPT2_ERR_INVALID_ARG, "%s", c->err);
    const int n = a->cfg->n_layer * a->cfg->n_head, H = a->cfg->n_head;
    unsigned char *mask = calloc((size_t)n, 1);
    if (!mask) return viz_fail(err, GPT2_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) mask[i] = (unsigned char)gpt2_session_ablated(a->s, i / H, i % H);
    viz_attribution v = {a->tok, a->model_name, f->toks, f->query + 1, &c->a, {mask, a->cfg->n_layer, H}};
    gpt2_status st = viz_export(path, &(viz_table){.kind = VIZ_TABLE_ATTRIBUTION, .attribution = &v}, err);
    free(mask);
    return st;
}
