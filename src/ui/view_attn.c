/* view_attn.c — the inspector's attention drawings: the zoomed heatmap (one
 * cell per token, labels on both axes, two query rows per cell with '▀'
 * where colours allow), the binned overview (it says how it bins), the
 * colour scale with its numbers, and the readout of the cursor's query and
 * its top keys. They read the store through the focus and compute nothing
 * the model did not: a weight is only scaled, binned or ranked for display
 * (heatmap.c's arithmetic). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ui/app.h"

enum { KEY_LABEL_ROWS = 3 }; /* the zoom's key labels: 3 characters, top to bottom */

float view_row(const app *a, const inspect_focus *f, int q, float *out) {
    istore_weights(a->store, f->layer, f->head, q, out);
    return f->row_scale ? ui_row_max(out, q + 1) : 0;
}

int view_level(float w, float scale) { return ui_heat_level(ui_heat_scaled(w, scale), term_heat_levels()); }

/* "0.06" -> ".06": tick numbers in few columns */
static void tick_text(float v, char *buf, size_t cap) {
    if (v >= 1) snprintf(buf, cap, "1");
    else if (v <= 0) snprintf(buf, cap, ">0");
    else snprintf(buf, cap, "%.2f", (double)v), memmove(buf, buf + 1, strlen(buf));
}

/* The colour scale on row y: each level with the weight it starts at,
 * "scale 0 ░>0 ▒.06 ▓.25 █.56 1" (glyphs) or the numbers on their colours
 * (a ramp, and the text view's shading), then the scale's kind and `how`. */
int view_legend(pane *p, int y, const inspect_focus *f, const char *how) {
    WINDOW *w = p->win;
    int nl = term_heat_levels(), maxc = p->w - 2;
    int glyphs = !term_half_blocks() && f->view != INSPECT_TEXT;
    int c = 1 + term_printf(w, y, 1, maxc, term_attr(UI_ROLE_DIM), "scale 0");
    int step = 9 + (nl - 1) * 4 > maxc ? 2 : 1; /* narrow: every other level's tick */
    for (int l = 1; l < nl && c < p->w - 1; l += step) {
        char t[8];
        tick_text(ui_heat_level_floor(l, nl), t, sizeof t);
        c += term_printf(w, y, c, p->w - 1 - c, 0, " ");
        if (glyphs) c += term_printf(w, y, c, p->w - 1 - c, term_heat(l), "%s", term_heat_glyph(l));
        c += term_printf(w, y, c, p->w - 1 - c, glyphs ? term_attr(UI_ROLE_DIM) : term_shade(l), "%s", t);
    }
    c += term_printf(w, y, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " 1");
    char kind[96];
    snprintf(kind, sizeof kind, "%s, \u221a%s%s", f->row_scale ? "per row (1 = row max)" : "global 0-1",
             how && *how ? "; " : "", how ? how : "");
    if (c + 2 + ui_text_width(kind, strlen(kind)) <= p->w - 1) {
        term_printf(w, y, c + 2, p->w - 3 - c, term_attr(UI_ROLE_DIM), "%s", kind);
        return 1;
    }
    term_put_words(w, y + 1, 1, kind, maxc, term_attr(UI_ROLE_DIM));
    return 2;
}

/* `#12 "ROMEO"` */
static int token_ref(const app *a, const inspect_focus *f, int pos, char *buf, size_t cap) {
    char lab[96];
    app_token_label(a, f->toks[pos], lab, sizeof lab);
    return snprintf(buf, cap, "#%d \"%s\"", pos, lab);
}

/* From row y: `q #38 "JULIET" → #12 "ROMEO" 0.37, #0 "<|endoftext|>" 0.21, …`
 * wrapped over at most max_rows rows (the heatmap's views first name the
 * cell under the key cursor). Returns the rows used. */
int view_readout(pane *p, int y, int max_rows, const inspect_focus *f, float *row) {
    const app *a = p->a;
    if (f->query < 0 || max_rows < 1) return 0;
    char line[1024], ref[128];
    size_t o = 0;
    float scale = view_row(a, f, f->query, row);
    (void)scale;
    token_ref(a, f, f->query, ref, sizeof ref);
    if (f->view != INSPECT_TEXT && f->key >= 0) {
        char kref[128];
        token_ref(a, f, f->key, kref, sizeof kref);
        o += (size_t)snprintf(line + o, sizeof line - o, "cell q %s \u00d7 k %s = %.3f\n", ref, kref,
                              (double)row[f->key]);
    }
    o += (size_t)snprintf(line + o, sizeof line - o, "q %s \u2192", ref);
    int idx[5];
    float wts[5];
    int m = ui_top_entries(row, f->query + 1, 5, idx, wts);
    for (int i = 0; i < m && o < sizeof line - 140; i++) {
        if (wts[i] != wts[i] || wts[i] < 0) continue;
        token_ref(a, f, idx[i], ref, sizeof ref);
        o += (size_t)snprintf(line + o, sizeof line - o, "%s %s %.2f", i ? "," : "", ref, (double)wts[i]);
    }
    if (m == 0 || wts[0] != wts[0]) snprintf(line + o, sizeof line - o, " (not computed for this layer yet)");
    ui_line wl[6];
    int n = ui_wrap(line, strlen(line), p->w - 2, wl, 6);
    if (n > max_rows) n = max_rows;
    for (int i = 0; i < n; i++)
        term_put(p->win, y + i, 1, line + wl[i].start, wl[i].end - wl[i].start, p->w - 2,
                 term_attr(i == 0 ? UI_ROLE_TITLE : UI_ROLE_TEXT));
    return n;
}

static int digits_of(int n) {
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d < 2 ? 2 : d;
}

/* Key labels down the columns (3 characters each, top to bottom), then a
 * row of positions every 5 columns; the key cursor's column highlighted. */
static void zoom_key_axis(pane *p, int y, int x0, const ui_heat_view *v, const inspect_focus *f) {
    char lab[96], num[16];
    term_printf(p->win, y, 1, x0 - 2, term_attr(UI_ROLE_DIM), "keys\u2192");
    term_printf(p->win, y + KEY_LABEL_ROWS, 1, x0 - 2, term_attr(UI_ROLE_DIM), "q\u2193 #");
    for (int c = 0; c < v->n_cols; c++) {
        int k = v->col0 + c;
        app_token_label(p->a, f->toks[k], lab, sizeof lab);
        attr_t at = term_attr(k == f->key ? UI_ROLE_SELECTION : UI_ROLE_TEXT);
        for (int r = 0; r < KEY_LABEL_ROWS; r++) {
            size_t st, nb = ui_char_at(lab, strlen(lab), r, &st);
            term_put(p->win, y + r, x0 + c, nb ? lab + st : " ", nb ? nb : 1, 1, at);
        }
        if (k % 5 == 0 && c + digits_of(k) <= v->n_cols) {
            int len = snprintf(num, sizeof num, "%d", k);
            term_put(p->win, y + KEY_LABEL_ROWS, x0 + c, num, (size_t)len, len, term_attr(UI_ROLE_DIM));
        }
    }
}

/* Row label of queries q0 (and q1 >= 0 below it in the same cell): q0's
 * position and each one's first characters, the cursor's highlighted. */
static void zoom_row_label(pane *p, int y, int digits, int q0, int q1, const inspect_focus *f) {
    char lab[96];
    int c = 1 + term_printf(p->win, y, 1, digits, term_attr(UI_ROLE_DIM), "%*d", digits, q0);
    int each = q1 == -2 ? 5 : 3; /* -2: one query per cell */
    for (int i = 0; i < (q1 == -2 ? 1 : 2); i++) {
        int q = i == 0 ? q0 : q1;
        c++;
        if (q < 0) continue;
        app_token_label(p->a, f->toks[q], lab, sizeof lab);
        term_printf(p->win, y, c, each, term_attr(q == f->query ? UI_ROLE_SELECTION : UI_ROLE_TEXT), "%s", lab);
        c += each;
    }
}

/* One heat cell: '▀' with the upper level in front and the lower behind
 * (half blocks; -1: no row there), else the upper's shade glyph ('?' for a
 * weight not computed). */
static void heat_cell(pane *p, int y, int x, int lu, int ll, int missing) {
    if (term_half_blocks()) {
        if (lu >= 0 || ll >= 0) term_put_half(p->win, y, x, lu < 0 ? 0 : lu, ll);
    } else if (lu >= 0) {
        const char *g = missing ? "?" : term_heat_glyph(lu);
        term_put(p->win, y, x, g, strlen(g), 1, term_heat(lu));
    }
}

/* The zoomed heatmap from row y, h rows: a legend, the key axis, then the
 * matrix with rows = queries (two per cell with '▀': upper row's colour in
 * front, lower's behind), columns = keys, one token each; the window
 * follows both cursors (*scroll: its rows back from the newest). rows2
 * holds 2 * n_ctx floats. */
/* The first key to show for the queries v shows (ui_heat_key_window on the
 * attention they pay each key). mass: n_ctx floats; row: n_ctx floats. */
static int most_attended(const app *a, const inspect_focus *f, const ui_heat_view *v, float *row, float *mass) {
    const int last = v->row0 + v->n_rows - 1, n = last + 1;
    for (int k = 0; k < n; k++) mass[k] = 0;
    for (int q = v->row0; q <= last; q++) {
        view_row(a, f, q, row);
        for (int k = 0; k <= q; k++)
            if (row[k] == row[k]) mass[k] += row[k];
    }
    return ui_heat_key_window(mass, n, v->n_cols);
}

void view_zoom(pane *p, int y, int h, const inspect_focus *f, float *rows2, int *scroll) {
    const int half = term_half_blocks(), rpc = half ? 2 : 1, digits = digits_of(f->n_tok - 1);
    const int x0 = 1 + digits + (half ? 8 : 6) + 1;
    int mrows = h - (KEY_LABEL_ROWS + 1) - 1; /* the legend: 1 row, or 2 (known below) */
    if (mrows < 1 || p->w - x0 - 1 < 4 || f->n_tok == 0) {
        view_legend(p, y, f, "");
        return;
    }
    float *up = rows2, *lo = rows2 + istore_n_ctx(p->a->store);
    ui_heat_view v;
    int lr = 0;
    for (int pass = 0; pass < 2; pass++) { /* again when the legend takes two rows */
        ui_heat_window(f->n_tok, (mrows - (lr > 1)) * rpc, p->w - x0 - 1, *scroll, f->query, &v);
        if (v.n_rows < 1) return;
        if (f->key_auto) { /* the keys that matter to these queries (after a long chat: the diagonal, or far back) */
            v.col0 = most_attended(p->a, f, &v, up, lo);
        } else { /* the key cursor in view */
            if (f->key < v.col0) v.col0 = f->key;
            if (f->key >= v.col0 + v.n_cols) v.col0 = f->key - v.n_cols + 1;
        }
        char how[96], keys[40] = "";
        if (v.n_cols < v.row0 + v.n_rows) snprintf(keys, sizeof keys, "keys %d-%d, ", v.col0, v.col0 + v.n_cols - 1);
        snprintf(how, sizeof how, half ? "%s1 token/col, 2 queries/row \u2580" : "%s1 token/cell", keys);
        int was = lr;
        lr = view_legend(p, y, f, how);
        if (lr <= 1 || was > 1) break;
    }
    *scroll = v.scroll;
    y += lr;
    zoom_key_axis(p, y, x0, &v, f);
    y += KEY_LABEL_ROWS + 1;
    for (int r = 0; r * rpc < v.n_rows; r++) {
        int q0 = v.row0 + r * rpc, q1 = half && q0 + 1 < v.row0 + v.n_rows ? q0 + 1 : -1;
        float s0 = view_row(p->a, f, q0, up), s1 = q1 >= 0 ? view_row(p->a, f, q1, lo) : 0;
        zoom_row_label(p, y + r, digits, q0, half ? q1 : -2, f);
        for (int c = 0; c < v.n_cols; c++) {
            int k = v.col0 + c;
            int lu = k <= q0 ? view_level(up[k], s0) : -1, ll = q1 >= 0 && k <= q1 ? view_level(lo[k], s1) : -1;
            heat_cell(p, y + r, x0 + c, lu, ll, k <= q0 && up[k] != up[k]);
        }
    }
}

/* Query bin qb (queries qb*k .. qb*k + k - 1) max-pooled into b[0..nb):
 * each row scaled first (per-row scale), NaN where no query reaches. */
static void pool_bin_row(const app *a, const inspect_focus *f, int qb, int k, int nb, float *row, float *b) {
    for (int j = 0; j < nb; j++) b[j] = NAN;
    for (int q = qb * k; q < f->n_tok && q < (qb + 1) * k; q++) {
        float s = view_row(a, f, q, row);
        for (int j = 0; j <= q; j++) row[j] = ui_heat_scaled(row[j], s);
        ui_bin_max(row, q + 1, k, b, 1);
    }
}

/* The overview from row y, h rows: the whole matrix max-pooled into square
 * bins of k x k tokens (the legend says k), each bin drawn sc cells wide and
 * sc half-rows tall so that a short context fills the view; the cursor's bin
 * row marked. row: n_ctx floats; bins: 2 * n_ctx floats. */
void view_overview(pane *p, int y, int h, const inspect_focus *f, float *row, float *bins) {
    const int half = term_half_blocks(), rpc = half ? 2 : 1, digits = digits_of(f->n_tok - 1);
    const int x0 = 1 + digits + 2, cols = p->w - x0 - 1, mrows = h - 2 - 2; /* legend (up to 2), key axis */
    if (f->n_tok == 0 || cols < 4 || mrows < 1) return;
    int k = ui_bin_size(f->n_tok, cols), kr = ui_bin_size(f->n_tok, mrows * rpc);
    if (kr > k) k = kr;
    const int nb = (f->n_tok + k - 1) / k, n_ctx = istore_n_ctx(p->a->store);
    const int sc = ui_cell_scale(nb, cols, mrows * rpc), step = ui_axis_step(digits_of((nb - 1) * k), sc);
    char how[64];
    snprintf(how, sizeof how, "%d token%s/cell, max", k, k == 1 ? "" : "s");
    y += view_legend(p, y, f, how);
    term_printf(p->win, y, 1, x0 - 1, term_attr(UI_ROLE_DIM), "q\u2193k\u2192");
    for (int c = 0; c < nb; c += step) {
        char num[16];
        int len = snprintf(num, sizeof num, "%d", c * k);
        if (c * sc + len <= cols) term_put(p->win, y, x0 + c * sc, num, (size_t)len, len, term_attr(UI_ROLE_DIM));
    }
    y++;
    const int qb = f->query / k; /* the cursor's bin row */
    int pooled[2] = {-1, -1}, last_label = -1;
    for (int r = 0; r * rpc < nb * sc && r < mrows; r++) {
        const int bu = r * rpc / sc, bl = half ? (r * rpc + 1) / sc : bu; /* the bin rows of the two halves */
        for (int i = 0; i < rpc; i++) {
            int b = i ? bl : bu;
            if (pooled[i] != b && b < nb) pool_bin_row(p->a, f, b, k, nb, row, bins + (size_t)i * n_ctx), pooled[i] = b;
        }
        const int mark = qb == bu || qb == bl;
        if (bu != last_label || mark)
            term_printf(p->win, y + r, 1, digits + 1, term_attr(mark ? UI_ROLE_SELECTION : UI_ROLE_DIM), "%*d%s",
                        digits, (qb == bl && mark ? bl : bu) * k, mark ? ">" : " ");
        last_label = bu;
        for (int c = 0; c < nb * sc && c < cols; c++) {
            float u = bins[c / sc], l = half && bl < nb ? bins[n_ctx + c / sc] : NAN;
            heat_cell(p, y + r, x0 + c, u == u ? view_level(u, 0) : -1, l == l ? view_level(l, 0) : -1, 0);
        }
    }
}
