/* pane_sampling.c — the sampling panel: the knobs in two columns; with focus,
 * Up/Down pick one and Left/Right (or -/+, PgUp/PgDn by 10 steps) change it,
 * from the next token on (mid-reply too). State: the selected knob. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

enum { SP_TEMP = 0, SP_TOPK, SP_TOPP, SP_MINP, SP_REP, SP_MAXNEW, SP_SEED, SP_DRAFTK, SP_COUNT };

typedef struct {
    pane base;
    int sel; /* SP_* */
} sampling_pane;

static const char *sp_names[SP_COUNT] = {"temp", "top-k", "top-p", "min-p", "repeat", "max-new", "seed", "draft-k"};

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* v moved by dir steps of `step` (x10 when big), on a grid of 0.01, into [lo, hi]. */
static float stepf(float v, int dir, float step, int big, float lo, float hi) {
    return clampf(roundf((v + (float)dir * step * (big ? 10.0f : 1.0f)) * 100) / 100, lo, hi);
}

/* The knobs of the session's sampler, one step up (dir +1) or down. */
static int step_sampler(gpt2_sampler_params *p, int item, int dir, int big) {
    switch (item) {
    case SP_TEMP: p->temperature = stepf(p->temperature, dir, 0.05f, big, 0, 5); return 1;
    case SP_TOPK: p->top_k += dir * (big ? 10 : 1); if (p->top_k < 0) p->top_k = 0; return 1;
    case SP_TOPP: p->top_p = stepf(p->top_p, dir, 0.01f, big, 0.01f, 1); return 1;
    case SP_MINP: p->min_p = stepf(p->min_p, dir, 0.01f, big, 0, 1); return 1;
    case SP_REP: p->repeat_penalty = stepf(p->repeat_penalty, dir, 0.05f, big, 0.05f, 5); return 1;
    case SP_SEED: p->seed += (uint64_t)(int64_t)(dir * (big ? 10 : 1)); return 1;
    default: return 0;
    }
}

/* One step of knob item; the session's own settings (max-new, draft-k) or its sampler's. */
static void apply_step(app *a, int item, int dir, int big) {
    if (item == SP_MAXNEW) {
        int m = gpt2_session_max_new_tokens(a->s) + dir * (big ? 64 : 8);
        gpt2_session_set_max_new_tokens(a->s, m < 0 ? 0 : m);
        app_log(a, "set max-new %d", gpt2_session_max_new_tokens(a->s));
        return;
    }
    if (item == SP_DRAFTK) {
        int k = gpt2_session_draft_k(a->s) + dir * (big ? 4 : 1);
        k = k < 1 ? 1 : k > GPT2_SPEC_MAX_K ? GPT2_SPEC_MAX_K : k;
        gpt2_session_set_draft_k(a->s, k, NULL);
        app_log(a, "set draft-k %d", gpt2_session_draft_k(a->s));
        return;
    }
    gpt2_sampler_params p = gpt2_session_sampler_params(a->s);
    if (!step_sampler(&p, item, dir, big)) return;
    gpt2_session_set_sampler_params(a->s, p);
    app_log_sampling(a);
}

/* The value of knob i as the panel shows it. */
static void knob_text(app *a, const gpt2_sampler_params *sp, int i, char *v, size_t cap) {
    switch (i) {
    case SP_TEMP: snprintf(v, cap, "%.2f", (double)sp->temperature); break;
    case SP_TOPK: snprintf(v, cap, sp->top_k ? "%d" : "off", sp->top_k); break;
    case SP_TOPP: snprintf(v, cap, "%.2f", (double)sp->top_p); break;
    case SP_MINP: snprintf(v, cap, "%.2f", (double)sp->min_p); break;
    case SP_REP: snprintf(v, cap, "%.2f", (double)sp->repeat_penalty); break;
    case SP_MAXNEW: {
        int m = gpt2_session_max_new_tokens(a->s);
        snprintf(v, cap, m ? "%d" : "none", m);
        break;
    }
    case SP_DRAFTK: /* K of draft mode; "off" while a draft is loaded but not used */
        if (!gpt2_session_draft_model(a->s)) snprintf(v, cap, "none");
        else snprintf(v, cap, gpt2_session_draft_enabled(a->s) ? "%d" : "%d off", gpt2_session_draft_k(a->s));
        break;
    default: snprintf(v, cap, "%llu", (unsigned long long)sp->seed); break;
    }
}

static void sampling_draw(pane *p) {
    sampling_pane *sp = (sampling_pane *)p;
    int focused = screen_focused(p);
    werase(p->win);
    gpt2_sampler_params params = gpt2_session_sampler_params(p->a->s);
    char title[64];
    snprintf(title, sizeof title, "sampling%s", focused ? " (\u2191\u2193 pick, \u2190\u2192 change)" : "");
    pane_title(p, title);
    pane_left_border(p);
    /* the first column's values are short (at most "0.95", "1000"): the
       second, with the seed's digits, gets the rest */
    int colw = (p->w - 2) / 2 < 15 ? (p->w - 2) / 2 : 15;
    for (int i = 0; i < SP_COUNT; i++) {
        char v[32], cell[48];
        knob_text(p->a, &params, i, v, sizeof v);
        int row = 1 + i % 4, col = 2 + (i / 4) * colw, width = i < 4 ? colw - 1 : p->w - col - 1;
        if (row >= p->h) continue;
        attr_t at = term_attr(focused && sp->sel == i ? UI_ROLE_SELECTION : UI_ROLE_TEXT);
        int n = snprintf(cell, sizeof cell, "%-7s %-8s", sp_names[i], v);
        while (n > 0 && cell[n - 1] == ' ') cell[--n] = '\0';
        term_put(p->win, row, col, cell, (size_t)n, width, at);
        if (n > width && width > 0) term_put(p->win, row, col + width - 1, "\u2026", 3, 1, at); /* cut short: says so */
    }
}

static int sampling_key(pane *p, int key, int is_code) {
    sampling_pane *sp = (sampling_pane *)p;
    app *a = p->a;
    if (!is_code) {
        if (key == '+' || key == '=') return apply_step(a, sp->sel, +1, 0), PANE_REDRAW;
        if (key == '-') return apply_step(a, sp->sel, -1, 0), PANE_REDRAW;
        return PANE_IGNORED;
    }
    switch (key) {
    case KEY_UP: sp->sel = (sp->sel + SP_COUNT - 1) % SP_COUNT; return PANE_REDRAW;
    case KEY_DOWN: sp->sel = (sp->sel + 1) % SP_COUNT; return PANE_REDRAW;
    case KEY_LEFT: apply_step(a, sp->sel, -1, 0); return PANE_REDRAW;
    case KEY_RIGHT: apply_step(a, sp->sel, +1, 0); return PANE_REDRAW;
    case KEY_PPAGE: apply_step(a, sp->sel, +1, 1); return PANE_REDRAW;
    case KEY_NPAGE: apply_step(a, sp->sel, -1, 1); return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
}

static const pane_ops sampling_ops = {
    .name = "sampling", .draw = sampling_draw, .key = sampling_key, .resize = pane_place, .free = pane_release};

pane *sampling_pane_new(app *a) {
    sampling_pane *sp = calloc(1, sizeof *sp);
    if (!sp) return NULL;
    sp->base = (pane){.ops = &sampling_ops, .a = a};
    return &sp->base;
}
