/* view_model.c — the model view: every head at once (issue 15, §3).
 *
 * A full-screen overlay, like the help: a grid of n_layer x n_head
 * thumbnails of the heads' patterns (the whole context max-pooled, or just
 * the inspector's query row), and beside it every head's scores
 * (gpt2_inspect.h), sortable. Arrows move the selection on the grid (by
 * layer and head); sorted by a score, Up/Down (PgUp/PgDn, Home/End) walk the
 * table instead, which starts at its top row. Enter opens the head in the
 * inspector, s sorts, r switches the thumbnails, Esc (q, Ctrl-C) closes.
 *
 * State: the selection, the sort, the thumbnail mode, and the scores,
 * computed from the store when the view opens and again when the context
 * changes length (one pass over each head's T x T pattern). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"
#include "viz/export.h"

enum { SORT_LAYER = 0, SORT_PREV, SORT_FIRST, SORT_SELF, SORT_ENTROPY, SORT_INDUCTION, N_SORTS };
static const char *const sort_names[N_SORTS] = {"layer", "prev", "first", "self", "entropy", "induction"};

enum { TABLE_W = 46 }; /* the scores table's columns */

struct model_view {
    int layer, head;    /* the selection */
    int sort;           /* SORT_* */
    int row_mode;       /* 1: thumbnails of the query's row, 0: of the whole pattern */
    int n_heads;        /* n_layer * n_head */
    int scored_n;       /* the context length the scores are for (-1: none) */
    const istore *scored_store;
    gpt2_head_scores *scores; /* (n_heads) */
    int *order;               /* (n_heads) heads in the table's order */
    int *missing;             /* (n_heads) 1: some row of the head is not in the store */
    float *A;                 /* (n_ctx, n_ctx) one head's pattern */
    int table_top;            /* the table's first row shown */
    int *thumbs;              /* (n_heads, rows, tw) the thumbnails' levels (thumbs()) */
    size_t thumbs_cap;
    int thumbs_key[6];        /* what they show: n, query, tw, rows, mode, heads */
    const istore *thumbs_store;
    unsigned long thumbs_version, scored_version; /* the store's istore_version when computed */
};

static double score_of(const gpt2_head_scores *s, int sort) {
    switch (sort) {
    case SORT_PREV: return s->prev_token;
    case SORT_FIRST: return s->first_token;
    case SORT_SELF: return s->self;
    case SORT_ENTROPY: return s->entropy;
    case SORT_INDUCTION: return s->induction;
    default: return 0;
    }
}

/* Head (layer, head)'s pattern over the first n positions into A (n x n,
 * row q: keys 0..q); 0 when a row is not in the store. */
static int pattern(const istore *st, int layer, int head, int n, float *A) {
    for (int q = 0; q < n; q++) {
        const float *row = istore_row(st, layer, head, q);
        if (!row) return 0;
        memcpy(A + (size_t)q * n, row, (size_t)(q + 1) * sizeof *row);
    }
    return 1;
}

static const struct model_view *sort_ctx; /* qsort has no user pointer */

/* Highest score first (lowest entropy first: a focused head), NaN last;
 * ties and SORT_LAYER in layer-major order. */
static int by_score(const void *pa, const void *pb) {
    const struct model_view *mv = sort_ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    if (mv->sort != SORT_LAYER) {
        double x = score_of(&mv->scores[a], mv->sort), y = score_of(&mv->scores[b], mv->sort);
        if (mv->sort == SORT_ENTROPY) x = -x, y = -y;
        int nx = x != x || mv->missing[a], ny = y != y || mv->missing[b];
        if (nx != ny) return nx - ny;
        if (!nx && x != y) return x > y ? -1 : 1;
    }
    return a - b;
}

static void sort_heads(struct model_view *mv) {
    for (int i = 0; i < mv->n_heads; i++) mv->order[i] = i;
    sort_ctx = mv;
    qsort(mv->order, (size_t)mv->n_heads, sizeof *mv->order, by_score);
}

/* Head i's scores over the context (A: n_ctx * n_ctx floats of scratch);
 * 0 when its rows are not all in the store (the scores then NaN). */
static int head_scores_of(app *a, int i, float *A, gpt2_head_scores *out) {
    int n;
    const int32_t *toks = gpt2_session_tokens(a->s, &n);
    const int H = a->cfg->n_head;
    if (!pattern(a->store, i / H, i % H, n, A)) {
        *out = (gpt2_head_scores){NAN, NAN, NAN, NAN, NAN, 0};
        return 0;
    }
    gpt2_head_scores_compute(A, (size_t)n, toks, n, out);
    return 1;
}

gpt2_status app_head_scores(app *a, viz_head_row *rows, gpt2_error *err) {
    const int n_ctx = istore_n_ctx(a->store), H = a->cfg->n_head, n = a->cfg->n_layer * H;
    float *A = malloc((size_t)n_ctx * n_ctx * sizeof *A);
    if (!A) return viz_fail(err, GPT2_ERR_NOMEM, "out of memory for a %d x %d pattern", n_ctx, n_ctx);
    gpt2_status st = GPT2_OK;
    for (int i = 0; i < n && st == GPT2_OK; i++) {
        rows[i].layer = i / H, rows[i].head = i % H, rows[i].ablated = gpt2_session_ablated(a->s, i / H, i % H);
        if (!head_scores_of(a, i, A, &rows[i].s))
            st = viz_fail(err, GPT2_ERR_INVALID_ARG, "layer %d's rows are not all kept (the context is too long to "
                                                      "keep every layer)", i / H);
    }
    free(A);
    return st;
}

/* Scores of every head over the context's n tokens, when n or the store changed. */
static void rescore(app *a, struct model_view *mv) {
    int n;
    gpt2_session_tokens(a->s, &n);
    if (n == mv->scored_n && a->store == mv->scored_store && mv->scored_version == istore_version(a->store)) return;
    for (int i = 0; i < mv->n_heads; i++) mv->missing[i] = !head_scores_of(a, i, mv->A, &mv->scores[i]);
    mv->scored_n = n;
    mv->scored_store = a->store;
    mv->scored_version = istore_version(a->store);
    sort_heads(mv);
}

void model_view_open(app *a) {
    if (a->model_view) return;
    struct model_view *mv = calloc(1, sizeof *mv);
    const int n_ctx = istore_n_ctx(a->store);
    if (mv) {
        mv->n_heads = a->cfg->n_layer * a->cfg->n_head;
        mv->scores = calloc((size_t)mv->n_heads, sizeof *mv->scores);
        mv->order = calloc((size_t)mv->n_heads, sizeof *mv->order);
        mv->missing = calloc((size_t)mv->n_heads, sizeof *mv->missing);
        mv->A = malloc((size_t)n_ctx * n_ctx * sizeof *mv->A);
    }
    if (!mv || !mv->scores || !mv->order || !mv->missing || !mv->A) {
        if (mv) free(mv->scores), free(mv->order), free(mv->missing), free(mv->A);
        free(mv);
        app_message(a, UI_ROLE_ERROR, "model view: out of memory for %d heads over %d positions",
                    a->cfg->n_layer * a->cfg->n_head, n_ctx);
        return;
    }
    pane *ins = a->panes[PANE_INSPECTOR];
    mv->layer = inspector_layer(ins);
    mv->head = inspector_head(ins) >= 0 ? inspector_head(ins) : 0;
    mv->scored_n = -1;
    a->model_view = mv;
}

void model_view_close(app *a) {
    struct model_view *mv = a->model_view;
    if (!mv) return;
    free(mv->scores), free(mv->order), free(mv->missing), free(mv->A), free(mv->thumbs);
    free(mv);
    a->model_view = NULL;
}

/* ---- drawing ---- */

/* Head (l, h)'s thumbnail as rows x tw pixel levels (-1: nothing there): the
 * pattern over n tokens max-pooled (or, in row mode, query q's row). */
static void thumb_levels(const app *a, int l, int h, int n, int q, int tw, int rows, int *lv) {
    const int row_mode = a->model_view->row_mode;
    const int kq = (n + rows - 1) / rows, kk = (n + tw - 1) / tw;
    for (int pr = 0; pr < rows; pr++)
        for (int c = 0; c < tw; c++) {
            int q0 = row_mode ? q : pr * kq, q1 = row_mode ? q + 1 : q0 + kq;
            float m = -1;
            for (int qq = q0; qq < q1 && qq < n; qq++) {
                const float *row = istore_row(a->store, l, h, qq);
                if (!row) continue;
                for (int k = c * kk; k < (c + 1) * kk && k <= qq; k++) m = row[k] > m ? row[k] : m;
            }
            lv[pr * tw + c] = m >= 0 ? view_level(m, 0) : -1;
        }
}

/* Every head's thumbnail levels, recomputed only when what they show moved
 * (a frame then costs the drawing, not n_heads passes over T x T). */
static const int *thumbs(app *a, int n, int q, int tw, int rows) {
    struct model_view *mv = a->model_view;
    const int key[6] = {n, mv->row_mode ? q : -1, tw, rows, mv->row_mode, (int)(mv->n_heads)};
    size_t need = (size_t)mv->n_heads * rows * tw;
    if (mv->thumbs && mv->thumbs_store == a->store && mv->thumbs_version == istore_version(a->store) &&
        !memcmp(key, mv->thumbs_key, sizeof key))
        return mv->thumbs;
    if (need > mv->thumbs_cap) {
        int *t = realloc(mv->thumbs, need * sizeof *t);
        if (!t) return NULL;
        mv->thumbs = t, mv->thumbs_cap = need;
    }
    const int H = a->cfg->n_head;
    for (int i = 0; i < mv->n_heads; i++) thumb_levels(a, i / H, i % H, n, q, tw, rows, mv->thumbs + (size_t)i * rows * tw);
    memcpy(mv->thumbs_key, key, sizeof key);
    mv->thumbs_store = a->store;
    mv->thumbs_version = istore_version(a->store);
    return mv->thumbs;
}

/* A thumbnail at (y, x), tw x th cells, from its levels (two pixel rows a cell with half blocks). */
static void draw_thumb(WINDOW *w, int y, int x, int tw, int th, const int *lv) {
    const int half = term_half_blocks();
    for (int r = 0; r < th; r++)
        for (int c = 0; c < tw; c++) {
            int up = lv[(half ? 2 * r : r) * tw + c], lo = half ? lv[(2 * r + 1) * tw + c] : -1;
            if (half) {
                if (up >= 0 || lo >= 0) term_put_half(w, y + r, x + c, up < 0 ? 0 : up, lo);
            } else if (up >= 0) {
                const char *g = term_heat_glyph(up);
                term_put(w, y + r, x + c, g, strlen(g), 1, term_heat(up));
            }
        }
}

/* The grid in columns [0, gw): head numbers on top, "L0".. on the left,
 * the selection framed by bars on its own thumbnail's sides (and its
 * labels highlighted), ablated heads marked x. */
static void draw_grid(app *a, WINDOW *w, int y0, int gw, int gh, int q) {
    struct model_view *mv = a->model_view;
    const int L = a->cfg->n_layer, H = a->cfg->n_head, lab = L > 10 ? 4 : 3;
    int tw = (gw - lab) / H - 1, th = (gh - 1) / L - 1;
    if (tw > 16) tw = 16;
    if (th > 8) th = 8;
    if (tw < 1 || th < 1) {
        term_printf(w, y0, 1, gw - 1, term_attr(UI_ROLE_DIM), "(too small for %d x %d thumbnails)", L, H);
        return;
    }
    int n;
    gpt2_session_tokens(a->s, &n);
    const int *lv = n > 0 ? thumbs(a, n, q, tw, th * (term_half_blocks() ? 2 : 1)) : NULL;
    const attr_t sel_at = term_attr(UI_ROLE_SELECTION), dim = term_attr(UI_ROLE_DIM);
    for (int h = 0; h < H; h++)
        term_printf(w, y0, lab + h * (tw + 1), tw + 1, h == mv->head ? sel_at : dim, "H%d", h);
    for (int l = 0; l < L; l++) {
        int y = y0 + 1 + l * (th + 1);
        term_printf(w, y, 0, lab - 1, l == mv->layer ? sel_at : dim, "L%d", l);
        for (int h = 0; h < H; h++) {
            int x = lab + h * (tw + 1), sel = l == mv->layer && h == mv->head;
            if (lv) draw_thumb(w, y, x, tw, th, lv + (size_t)(l * H + h) * th * (term_half_blocks() ? 2 : 1) * tw);
            if (gpt2_session_ablated(a->s, l, h)) term_printf(w, y + th, x, 1, term_attr(UI_ROLE_ERROR), "x");
            for (int r = 0; sel && r < th; r++) { /* bars in the gaps at its sides */
                term_put(w, y + r, x - 1, "\u2590", 3, 1, sel_at);
                term_put(w, y + r, x + tw, "\u258c", 3, 1, sel_at);
            }
        }
    }
}

/* One score in 6 columns ("   -  " when undefined). */
static void put_score(WINDOW *w, int y, int x, double v, int on) {
    attr_t at = term_attr(on ? UI_ROLE_SELECTION : UI_ROLE_TEXT);
    if (v == v) term_printf(w, y, x, 7, at, "%6.3f ", v);
    else term_printf(w, y, x, 7, at, "    -  ");
}

/* The scores table at column x: a header naming the sort, then the heads in order. */
static void draw_table(app *a, WINDOW *w, int y0, int x, int rows) {
    struct model_view *mv = a->model_view;
    const int H = a->cfg->n_head;
    term_printf(w, y0, x, TABLE_W, term_attr(UI_ROLE_TITLE), "head    prev  first   self  entr.  induc");
    rows -= 2;
    int sel = 0;
    for (int i = 0; i < mv->n_heads; i++)
        if (mv->order[i] == mv->layer * H + mv->head) sel = i;
    if (sel < mv->table_top) mv->table_top = sel;
    if (sel >= mv->table_top + rows) mv->table_top = sel - rows + 1;
    if (rows < mv->n_heads) /* it scrolls: which rows are shown */
        term_printf(w, y0 + 1, x, TABLE_W, term_attr(UI_ROLE_DIM), "by %s (s); rows %d-%d of %d", sort_names[mv->sort],
                    mv->table_top + 1, mv->table_top + rows < mv->n_heads ? mv->table_top + rows : mv->n_heads,
                    mv->n_heads);
    else
        term_printf(w, y0 + 1, x, TABLE_W, term_attr(UI_ROLE_DIM), "sorted by %s (s); entropy in nats",
                    sort_names[mv->sort]);
    for (int r = 0; r < rows && mv->table_top + r < mv->n_heads; r++) {
        int i = mv->order[mv->table_top + r], on = mv->table_top + r == sel;
        const gpt2_head_scores *s = &mv->scores[i];
        term_printf(w, y0 + 2 + r, x, 6, term_attr(on ? UI_ROLE_SELECTION : UI_ROLE_TEXT), "%2d.%-3d", i / H, i % H);
        if (mv->missing[i]) {
            term_printf(w, y0 + 2 + r, x + 6, TABLE_W - 6, term_attr(UI_ROLE_DIM), "not kept (see the note above)");
            continue;
        }
        const double v[5] = {s->prev_token, s->first_token, s->self, s->entropy, s->induction};
        for (int j = 0; j < 5; j++) put_score(w, y0 + 2 + r, x + 6 + 7 * j, v[j], on);
    }
}

/* The last row: the selected head's scores, then as many key hints as fit. */
static void draw_footer(app *a, WINDOW *w) {
    const struct model_view *mv = a->model_view;
    const gpt2_head_scores *s = &mv->scores[mv->layer * a->cfg->n_head + mv->head];
    const attr_t at = term_attr(UI_ROLE_STATUS);
    char buf[256], ind[16];
    if (s->induction == s->induction) snprintf(ind, sizeof ind, "%.2f", s->induction);
    else snprintf(ind, sizeof ind, "n/a");
    const int H = a->cfg->n_head, KV = gpt2_config_kv_heads(a->cfg);
    char kv[24] = ""; /* grouped-query attention: the key/value head it reads */
    if (KV < H) snprintf(kv, sizeof kv, " (KV %d)", mv->head / (H / KV));
    snprintf(buf, sizeof buf, " L%d H%d%s%s  prev %.2f first %.2f self %.2f entropy %.2f induction %s", mv->layer,
             mv->head, kv, gpt2_session_ablated(a->s, mv->layer, mv->head) ? " (ablated)" : "", s->prev_token,
             s->first_token, s->self, s->entropy, ind);
    term_fill(w, LINES - 1, 0, COLS, at);
    int c = term_put(w, LINES - 1, 0, buf, strlen(buf), COLS, at);
    static const char *const hints[] = {" \u2502 Enter opens", "  s sorts", "  Esc closes", "  x ablates",
                                        "  r thumbnails"};
    const char *move = mv->sort == SORT_LAYER ? "  arrows move" : "  \u2191\u2193 the table";
    for (int i = 0; i < 6; i++) {
        const char *h = i == 1 ? move : hints[i < 1 ? 0 : i - 1];
        int hw = ui_text_width(h, strlen(h));
        if (c + hw > COLS) break;
        c += term_put(w, LINES - 1, c, h, strlen(h), COLS - c, at);
    }
}

void model_view_draw(app *a) {
    struct model_view *mv = a->model_view;
    if (!mv) return;
    rescore(a, mv);
    WINDOW *w = newwin(LINES, COLS, 0, 0);
    if (!w) return;
    wbkgdset(w, ' ' | term_attr(UI_ROLE_TEXT));
    werase(w);
    inspect_focus f;
    inspector_focus(a->panes[PANE_INSPECTOR], &f);
    int n = f.n_tok;
    char title[256];
    snprintf(title, sizeof title, " model view: %d layers x %d heads over %d token%s - thumbnails: %s",
             a->cfg->n_layer, a->cfg->n_head, n, n == 1 ? "" : "s",
             mv->row_mode ? "the query's row (r: whole pattern)" : "whole pattern (r: the query's row)");
    term_put_words(w, 0, 0, title, COLS, term_attr(UI_ROLE_TITLE));
    pane legend_pane = {.a = a, .win = w, .w = COLS - TABLE_W - 2, .h = 2};
    inspect_focus lf = {.view = INSPECT_ZOOM};
    if (legend_pane.w >= 16) view_legend(&legend_pane, 1, &lf, "max-pooled");
    if (!istore_all_layers(a->store))
        term_printf(w, 2, 1, COLS - 2, term_attr(UI_ROLE_NOTICE),
                    "only the inspector's layer is kept (the context is too long to keep every layer's rows)");
    const int top = 3, gh = LINES - top - 1;
    int gw = COLS - TABLE_W - 2;
    if (gw < 16) { /* too narrow for thumbnails beside the table: the table alone */
        gw = 0;
        term_printf(w, 1, 1, COLS - 2, term_attr(UI_ROLE_DIM), "(a wider window shows each head's thumbnail)");
    } else {
        draw_grid(a, w, top, gw, gh, f.query < 0 ? 0 : f.query);
    }
    draw_table(a, w, top, gw + 1, gh);
    draw_footer(a, w);
    wnoutrefresh(w);
    delwin(w);
}

/* ---- keys ---- */

/* Sorted by a score: the selection moves to the table's row at + d (clamped). */
static void walk_table(struct model_view *mv, int H, int d) {
    int at = 0;
    for (int i = 0; i < mv->n_heads; i++)
        if (mv->order[i] == mv->layer * H + mv->head) at = i;
    at += d;
    at = at < 0 ? 0 : at >= mv->n_heads ? mv->n_heads - 1 : at;
    mv->layer = mv->order[at] / H, mv->head = mv->order[at] % H;
}

int model_view_key(app *a, int key, int is_code) {
    struct model_view *mv = a->model_view;
    const int L = a->cfg->n_layer, H = a->cfg->n_head, page = LINES > 8 ? LINES - 8 : 1;
    if (is_code && mv->sort != SORT_LAYER) { /* a ranking: the table is the list to walk */
        switch (key) {
        case KEY_UP: walk_table(mv, H, -1); return 1;
        case KEY_DOWN: walk_table(mv, H, +1); return 1;
        case KEY_PPAGE: walk_table(mv, H, -page); return 1;
        case KEY_NPAGE: walk_table(mv, H, +page); return 1;
        case KEY_HOME: walk_table(mv, H, -mv->n_heads); return 1;
        case KEY_END: walk_table(mv, H, +mv->n_heads); return 1;
        default: break;
        }
    }
    if (is_code) {
        switch (key) {
        case KEY_UP: mv->layer = (mv->layer + L - 1) % L; return 1;
        case KEY_DOWN: mv->layer = (mv->layer + 1) % L; return 1;
        case KEY_LEFT: mv->head = (mv->head + H - 1) % H; return 1;
        case KEY_RIGHT: mv->head = (mv->head + 1) % H; return 1;
        case KEY_ENTER: break;
        case KEY_F(9): model_view_close(a); return 1;
        default: return 1;
        }
    }
    switch (key) {
    case '\n':
    case '\r':
    case KEY_ENTER: {
        pane *ins = a->panes[PANE_INSPECTOR];
        inspector_set_layer(ins, mv->layer);
        inspector_set_head(ins, mv->head);
        if (inspector_view(ins) == INSPECT_LENS || inspector_view(ins) == INSPECT_WHY) /* they show no one head */
            inspector_set_view(ins, INSPECT_ZOOM);
        model_view_close(a);
        app_message(a, UI_ROLE_NOTICE, "inspector: layer %d, head %d (F9 or /heads: the model view again)",
                    inspector_layer(ins), inspector_head(ins));
        return 1;
    }
    case 's': /* the next ranking, from its top */
        mv->sort = (mv->sort + 1) % N_SORTS, sort_heads(mv);
        if (mv->sort != SORT_LAYER) walk_table(mv, H, -mv->n_heads);
        return 1;
    case 'r': mv->row_mode = !mv->row_mode; return 1;
    case 'x': app_ablate_toggle(a, mv->layer, mv->head); return 1;
    case 27:
    case 'q': model_view_close(a); return 1;
    default: return 1;
    }
}
