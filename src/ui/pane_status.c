/* pane_status.c — the status bar: the model, the context used, the speed of
 * the last reply, what the last turn ran through the model, draft mode's
 * figures, and key hints as far as they fit. No state of its own. */
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

static void status_draw(pane *p) {
    app *a = p->a;
    attr_t at = term_attr(UI_ROLE_STATUS);
    term_fill(p->win, 0, 0, p->w, at);
    int n_tok = 0;
    gpt2_session_tokens(a->s, &n_tok);
    char buf[512], draft[96] = "";
    if (gpt2_session_draft_enabled(a->s)) { /* the current (or last) reply's figures */
        gpt2_draft_stats ds;
        gpt2_session_draft_stats(a->s, &ds, NULL);
        int k = gpt2_session_draft_k(a->s);
        if (ds.iterations > 0)
            snprintf(draft, sizeof draft, " \u2502 draft k%d r %.2f %.1f tok/pass", k, ds.r, ds.tokens_per_pass);
        else
            snprintf(draft, sizeof draft, " \u2502 draft k%d", k);
    } else if (gpt2_session_draft_model(a->s)) {
        snprintf(draft, sizeof draft, " \u2502 draft off");
    }
    char abl[200] = "", set[160], branch[48] = "";
    if (gpt2_session_n_branches(a->s) > 1)
        snprintf(branch, sizeof branch, " \u2502 branch %d of 0-%d", gpt2_session_branch(a->s), gpt2_session_n_branches(a->s) - 1);
    app_ablation_text(a, set, sizeof set);
    if (set[0]) snprintf(abl, sizeof abl, " \u2502 ablated %s", set);
    /* the reply's kept tokens (the tokens evaluated for it, draft passes and
       rejected drafts included, are in the --log) */
    int n = snprintf(buf, sizeof buf, " %s%s%s%s%s \u2502 ctx %d/%d \u2502 %.*f tok/s \u2502 turn: prefill %d, reply %d%s%s",
                     a->model_name, a->model_kind[0] ? " [" : "", a->model_kind, a->model_kind[0] ? "]" : "", branch, n_tok,
                     a->n_ctx, a->last_tps >= 100 ? 0 : 1, a->last_tps, a->turn_prefill, a->reply_tokens, draft, abl);
    if (n < 0) return;
    int c = term_put(p->win, 0, 0, buf, strlen(buf), p->w, at);
    const char *hint = a->generating ? " \u2502 Esc stops" : " \u2502 F1 help"; /* when it fits */
    if (c + ui_text_width(hint, strlen(hint)) <= p->w) c += term_put(p->win, 0, c, hint, strlen(hint), p->w - c, at);
    else return;
    /* more hints when there is room */
    static const char *more[] = {"  Tab focus", "  F8 view", "  F10 zoom", "  F3/F4 layer", "  F5/F6 head", "  F2 confidence", "  /quit"};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
        int w = ui_text_width(more[i], strlen(more[i]));
        if (c + w > p->w) break;
        c += term_put(p->win, 0, c, more[i], strlen(more[i]), p->w - c, at);
    }
}

static int status_key(pane *p, int key, int is_code) { return PANE_IGNORED; }

static const pane_ops status_ops = {
    .name = "status", .draw = status_draw, .key = status_key, .resize = pane_place, .free = pane_release};

pane *status_pane_new(app *a) {
    pane *p = calloc(1, sizeof *p);
    if (p) *p = (pane){.ops = &status_ops, .a = a};
    return p;
}
