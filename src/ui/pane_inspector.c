/* pane_inspector.c — the inspector: one layer's attention heatmap (a head, or
 * the average of the heads) over the context, a cursor on a query token with
 * the keys it attends to most, and the next-token candidates (at the cursor's
 * token when the session recorded them, else the latest). It draws from the
 * store and the session; it computes nothing the model did not.
 * State: the layer and head shown, the query cursor and the heatmap's scroll,
 * and one row of weights to rank (allocated once, not per frame). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

typedef struct {
    pane base;
    int layer, head; /* head -1: the average of the heads */
    int cursor;      /* the query under the cursor, -1: follow the newest */
    int scroll;      /* the heatmap's rows scrolled back */
    float *row;      /* (n_ctx) the cursor's weights, for its top keys */
} inspector_pane;

/* Rows of the inspector from the top: the heatmap, then the cursor's line,
 * then the candidates' title and k_lines candidates. */
typedef struct {
    int heat_rows, heat_cols, k_lines;
} inspector_layout;

static inspector_layout layout_of(const pane *p) {
    int avail = p->h - 1;
    int k = (avail - 2) / 2;
    k = k > 10 ? 10 : k < 1 ? 1 : k;
    int rows = avail - 1 - (1 + k);
    return (inspector_layout){.heat_rows = rows < 1 ? 1 : rows, .heat_cols = p->w - 3, .k_lines = k};
}

void inspector_set_layer(pane *p, int layer) {
    inspector_pane *ip = (inspector_pane *)p;
    int n = p->a->cfg->n_layer;
    ip->layer = ((layer % n) + n) % n;
    istore_show_layer(p->a->store, ip->layer); /* single-layer mode keeps this one from now on */
}

void inspector_set_head(pane *p, int head) {
    inspector_pane *ip = (inspector_pane *)p;
    int n = p->a->cfg->n_head; /* heads 0..n-1, then n = the average */
    if (head < 0) head = head == -1 && ip->head == 0 ? n : head; /* 0 - 1 -> average */
    int h = ((head % (n + 1)) + (n + 1)) % (n + 1);
    ip->head = h == n ? -1 : h;
}

void inspector_toggle_average(pane *p) { inspector_set_head(p, ((inspector_pane *)p)->head < 0 ? 0 : -1); }
int inspector_layer(const pane *p) { return ((const inspector_pane *)p)->layer; }
int inspector_head(const pane *p) { return ((const inspector_pane *)p)->head; }

void inspector_follow_newest(pane *p) {
    if (p) ((inspector_pane *)p)->cursor = -1;
}

static const char *stage_tag(gpt2_sampler_stage s) {
    switch (s) {
    case GPT2_STAGE_GREEDY: return "temp0";
    case GPT2_STAGE_TOP_K: return "top-k";
    case GPT2_STAGE_TOP_P: return "top-p";
    case GPT2_STAGE_MIN_P: return "min-p";
    default: return "";
    }
}

/* The candidates recorded for the reply token at context position q (which
 * the session keeps with its turn, through context drops and /load); 0 for
 * a prompt token or a token with none recorded. */
static int snap_at(app *a, int q, int32_t tok, istore_snap *out) {
    for (int i = gpt2_session_n_turns(a->s) - 1; i >= 0; i--) {
        gpt2_turn t;
        if (!gpt2_session_turn(a->s, i, &t) || t.pos < 0 || q < t.pos || q >= t.pos + t.n_ids) continue;
        gpt2_token_candidates tc;
        if (gpt2_session_candidates(a->s, i, q - t.pos, &tc) != GPT2_OK) return 0;
        return istore_snap_from(tok, &tc, out);
    }
    return 0;
}

static void draw_title_line(inspector_pane *ip) {
    pane *p = &ip->base;
    char title[96];
    int top_l = p->a->cfg->n_layer - 1, top_h = p->a->cfg->n_head - 1;
    int wide = p->w >= 42; /* "layer"/"head" spelled out when they fit, else L and H */
    if (ip->head >= 0)
        snprintf(title, sizeof title, wide ? "attention  layer %d (0-%d)  head %d (0-%d)" : "attention  L%d (0-%d)  H%d (0-%d)",
                 ip->layer, top_l, ip->head, top_h);
    else
        snprintf(title, sizeof title, wide ? "attention  layer %d (0-%d)  average of heads" : "attention  L%d (0-%d)  avg of heads",
                 ip->layer, top_l);
    pane_title(p, title);
    pane_left_border(p);
}

/* The heatmap's cells: one per (query row, key column) of the window v. */
static void draw_heat(inspector_pane *ip, const ui_heat_view *v) {
    pane *p = &ip->base;
    int nl = term_heat_levels();
    for (int r = 0; r < v->n_rows; r++) {
        int q = v->row0 + r, y = 1 + r;
        if (q == v->cursor) term_printf(p->win, y, 1, 1, term_attr(UI_ROLE_SELECTION), ">");
        for (int c = 0; c < v->n_cols && v->col0 + c <= q; c++) {
            float x = istore_weight(p->a->store, ip->layer, ip->head, q, v->col0 + c);
            if (x != x) {
                term_put(p->win, y, 2 + c, "?", 1, 1, term_attr(UI_ROLE_DIM));
                continue;
            }
            int lv = ui_heat_level(x, nl);
            const char *g = term_heat_glyph(lv);
            term_put(p->win, y, 2 + c, g, strlen(g), 1, term_heat(lv));
        }
    }
}

/* Row y: the cursor's token and the three keys it attends to most. */
static void draw_top_keys(inspector_pane *ip, int y, int q, const int32_t *toks) {
    pane *p = &ip->base;
    char lab[48];
    app_token_label(p->a, toks[q], lab, sizeof lab);
    int c = term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), "#%d %s\u2192", q, lab);
    int idx[3];
    float wts[3];
    istore_weights(p->a->store, ip->layer, ip->head, q, ip->row);
    int m = ui_top_entries(ip->row, q + 1, 3, idx, wts);
    for (int i = 0; i < m && c < p->w - 2; i++) {
        if (wts[i] != wts[i] || wts[i] < 0) continue;
        app_token_label(p->a, toks[idx[i]], lab, sizeof lab);
        c += term_printf(p->win, y, 1 + c, p->w - 2 - c, term_attr(UI_ROLE_TEXT), " #%d %s %.2f", idx[i], lab,
                         (double)wts[i]);
    }
}

/* One candidate on row y: chosen mark, token, probability bar, percentage,
 * and the filter that removed it. */
static void draw_candidate(pane *p, int y, const gpt2_candidate *c, int chosen) {
    char lab[48], bar[3 * 64 + 1], pct[8];
    app_token_label(p->a, c->id, lab, sizeof lab);
    int removed = c->removed_by != GPT2_STAGE_KEPT;
    int barw = p->w - 2 - 12 - 7 - 6;
    barw = barw < 3 ? 3 : barw > 64 ? 64 : barw;
    attr_t ta = term_attr(removed ? UI_ROLE_DIM : UI_ROLE_TEXT);
    int col = 1;
    col += term_printf(p->win, y, col, 1, term_attr(UI_ROLE_NOTICE), "%s", chosen ? "*" : " ");
    term_printf(p->win, y, col, 11, ta, "%s", lab);
    col += 12;
    term_printf(p->win, y, col, barw, term_attr(removed ? UI_ROLE_BAR_REMOVED : UI_ROLE_BAR), "%s",
                ui_bar(c->prob_temp, barw, bar));
    col += barw;
    col += term_printf(p->win, y, col, 7, ta, "%s", ui_percent(c->prob_temp, pct));
    if (removed) term_printf(p->win, y, col + 1, p->w - col - 2, term_attr(UI_ROLE_DIM), "%s", stage_tag(c->removed_by));
}

/* From row y: the candidates at the cursor's token (at_pos >= 0, when the
 * session recorded them) or the latest token's, k_lines at most. */
static void draw_candidates(pane *p, int y, const istore_snap *sn, int at_pos, int k_lines) {
    if (y < p->h) {
        const gpt2_sampler_params *sp = &sn->params;
        if (at_pos >= 0) /* an earlier token: its candidates and the knobs then */
            term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " #%d then: T %.2f k %d p %.2f m %.2f",
                        at_pos, (double)sp->temperature, sp->top_k, (double)sp->top_p, (double)sp->min_p);
        else
            term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " next token%s",
                        sn->valid ? "" : " (none yet)");
    }
    y++;
    for (int i = 0; sn->valid && i < sn->n && i < k_lines && y < p->h; i++, y++)
        draw_candidate(p, y, &sn->c[i], sn->c[i].id == sn->chosen);
}

static void inspector_draw(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    app *a = p->a;
    werase(p->win);
    int n_tok = 0;
    const int32_t *toks = gpt2_session_tokens(a->s, &n_tok);
    inspector_layout lay = layout_of(p);
    draw_title_line(ip);
    ui_heat_view v;
    ui_heat_window(n_tok, lay.heat_rows, lay.heat_cols, ip->scroll, ip->cursor, &v);
    ip->scroll = ip->cursor < 0 ? 0 : v.scroll;
    draw_heat(ip, &v);
    int y = 1 + lay.heat_rows;
    if (n_tok == 0) term_printf(p->win, 1, 2, p->w - 3, term_attr(UI_ROLE_DIM), "(no tokens yet)");
    if (v.cursor >= 0 && y < p->h) draw_top_keys(ip, y, v.cursor, toks);
    y++;
    istore_snap here;
    if (ip->cursor >= 0 && v.cursor >= 0) {
        if (snap_at(a, v.cursor, toks[v.cursor], &here)) {
            draw_candidates(p, y, &here, v.cursor, lay.k_lines);
        } else if (y < p->h) { /* a prompt token, or one from before a context drop or /load */
            term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " #%d: no candidates recorded", v.cursor);
            term_printf(p->win, y + 1 < p->h ? y + 1 : y, 1, p->w - 2, term_attr(UI_ROLE_DIM),
                        " (prompt tokens, drafted and re-encoded ones have none)");
        }
        return;
    }
    draw_candidates(p, y, istore_last(a->store), -1, lay.k_lines);
}

/* Up/Down/PgUp/PgDn/Home move the cursor (End: follow the newest again). */
static int move_cursor(inspector_pane *ip, int key) {
    int n_tok = 0;
    gpt2_session_tokens(ip->base.a->s, &n_tok);
    int cur = ip->cursor < 0 ? n_tok - 1 : ip->cursor;
    int page = ip->base.h / 2 > 1 ? ip->base.h / 2 : 1;
    switch (key) {
    case KEY_UP: cur--; break;
    case KEY_DOWN: cur++; break;
    case KEY_PPAGE: cur -= page; break;
    case KEY_NPAGE: cur += page; break;
    case KEY_HOME: cur = 0; break;
    case KEY_END: ip->cursor = -1, ip->scroll = 0; return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
    if (cur < 0) cur = 0;
    if (cur >= n_tok - 1) cur = -1; /* back to following the newest */
    ip->cursor = cur;
    return PANE_REDRAW;
}

static int inspector_key(pane *p, int key, int is_code) {
    inspector_pane *ip = (inspector_pane *)p;
    if (!is_code) {
        switch (key) {
        case 'l': inspector_set_layer(p, ip->layer + 1); return PANE_REDRAW;
        case 'L': inspector_set_layer(p, ip->layer - 1); return PANE_REDRAW;
        case 'h': inspector_set_head(p, ip->head + 1); return PANE_REDRAW;
        case 'H': inspector_set_head(p, ip->head - 1); return PANE_REDRAW;
        case 'a': inspector_toggle_average(p); return PANE_REDRAW;
        default: return PANE_IGNORED;
        }
    }
    if (key == KEY_LEFT || key == KEY_RIGHT) {
        inspector_set_head(p, ip->head + (key == KEY_LEFT ? -1 : 1));
        return PANE_REDRAW;
    }
    return move_cursor(ip, key);
}

static void inspector_free(pane *p) {
    free(((inspector_pane *)p)->row);
    pane_release(p);
}

static const pane_ops inspector_ops = {
    .name = "inspector", .draw = inspector_draw, .key = inspector_key, .resize = pane_place, .free = inspector_free};

pane *inspector_pane_new(app *a) {
    inspector_pane *ip = calloc(1, sizeof *ip);
    if (!ip) return NULL;
    ip->row = malloc((size_t)istore_n_ctx(a->store) * sizeof *ip->row);
    if (!ip->row) {
        free(ip);
        return NULL;
    }
    ip->base = (pane){.ops = &inspector_ops, .a = a};
    ip->cursor = -1;
    inspector_set_layer(&ip->base, 0);
    return &ip->base;
}
