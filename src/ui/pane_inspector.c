/* pane_inspector.c — the inspector: one layer's attention in one of its
 * views (inspect_view: the zoomed heatmap, the binned overview, or the text
 * view, where the conversation pane shades the context), a head, the mean
 * or the max of the layer's heads, a query cursor with a readout of the
 * keys it attends to most, and the next-token candidates (at the cursor's
 * token when the session recorded them, else the latest; beside the
 * candidates before an ablation right after one). It draws from the store
 * and the session; it computes nothing the model did not.
 * State: the view, layer, head, the query and key cursors, the scale, the
 * heatmap's scroll, and the rows it draws from (allocated once). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

typedef struct {
    pane base;
    inspect_view view;
    int layer, head; /* head: 0..n_head-1, ISTORE_MEAN, ISTORE_MAX */
    int last_head;   /* the single head to come back to from mean/max */
    int cursor;      /* the query under the cursor, -1: follow the newest */
    int key;         /* the key cursor, -1: the query's top key */
    int row_scale;   /* colour scale per query row (1) or global (0) */
    int scroll;      /* the heatmap's rows scrolled back */
    float *row;      /* (n_ctx) one query's weights */
    float *rows2;    /* (2, n_ctx) a cell's two query rows */
    float *bins;     /* (2, n_ctx) the overview's pooled rows */
    inspect_view why_from; /* the view the why view was opened from */
    why_choice why;  /* the why view's baseline and selected part */
} inspector_pane;

static const char *view_name(inspect_view v) {
    switch (v) {
    case INSPECT_ZOOM: return "attention heatmap";
    case INSPECT_OVERVIEW: return "attention overview";
    case INSPECT_TEXT: return "attention text";
    case INSPECT_LENS: return "logit lens";
    case INSPECT_WHY: return "why this token";
    default: return "?";
    }
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
    if (ip->head == ISTORE_MAX) ip->head = ISTORE_MEAN;
    if (head < 0) head = head == -1 && ip->head == 0 ? n : head; /* 0 - 1 -> average */
    int h = ((head % (n + 1)) + (n + 1)) % (n + 1);
    ip->head = h == n ? ISTORE_MEAN : h;
    if (ip->head >= 0) ip->last_head = ip->head;
}

void inspector_toggle_average(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    inspector_set_head(p, ip->head < 0 ? ip->last_head : -1);
}

void inspector_cycle_mode(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    ip->head = ip->head >= 0 ? ISTORE_MEAN : ip->head == ISTORE_MEAN ? ISTORE_MAX : ip->last_head;
}

void inspector_next_view(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    ip->view = ip->view == INSPECT_WHY ? ip->why_from : (inspect_view)((ip->view + 1) % N_INSPECT_VIEWS);
}

void inspector_set_view(pane *p, int view) {
    inspector_pane *ip = (inspector_pane *)p;
    if (view == INSPECT_WHY && ip->view != INSPECT_WHY) ip->why_from = ip->view;
    ip->view = view == INSPECT_WHY ? INSPECT_WHY : (inspect_view)(view % N_INSPECT_VIEWS);
}

void inspector_toggle_why(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    if (ip->view == INSPECT_WHY) ip->view = ip->why_from;
    else inspector_set_view(p, INSPECT_WHY);
}

why_choice *inspector_why(pane *p) { return &((inspector_pane *)p)->why; }

int inspector_layer(const pane *p) { return ((const inspector_pane *)p)->layer; }
int inspector_view(const pane *p) { return ((const inspector_pane *)p)->view; }
int inspector_head(const pane *p) { return ((const inspector_pane *)p)->head; }

void inspector_follow_newest(pane *p) {
    if (p) ((inspector_pane *)p)->cursor = -1, ((inspector_pane *)p)->key = -1;
}

void inspector_set_query(pane *p, int q, int key) {
    inspector_pane *ip = (inspector_pane *)p;
    int n_tok = 0;
    gpt2_session_tokens(p->a->s, &n_tok);
    if (q < 0 || q >= n_tok) return;
    ip->cursor = q == n_tok - 1 ? -1 : q;
    ip->key = key >= 0 && key <= q ? key : -1;
}

void inspector_focus(pane *p, inspect_focus *f) {
    inspector_pane *ip = (inspector_pane *)p;
    *f = (inspect_focus){.view = ip->view, .layer = ip->layer, .head = ip->head, .row_scale = ip->row_scale};
    f->toks = gpt2_session_tokens(p->a->s, &f->n_tok);
    f->query = ip->cursor < 0 || ip->cursor >= f->n_tok ? f->n_tok - 1 : ip->cursor;
    f->key = ip->key;
    f->key_auto = f->key < 0 || f->key > f->query;
    if (f->query >= 0 && f->key_auto) { /* the query's top key */
        int idx;
        float w;
        view_row(p->a, f, f->query, ip->row);
        f->key = ui_top_entries(ip->row, f->query + 1, 1, &idx, &w) ? idx : f->query;
    }
}

void inspector_head_name(const app *a, const inspect_focus *f, char *buf, size_t cap) {
    const int H = a->cfg->n_head, KV = gpt2_config_kv_heads(a->cfg);
    char kv[24] = ""; /* grouped-query attention: the key/value head this query head reads */
    if (KV < H) snprintf(kv, sizeof kv, " (KV %d)", f->head / (H / KV));
    if (f->head >= 0)
        snprintf(buf, cap, "L%d H%d%s%s", f->layer, f->head, kv,
                 gpt2_session_ablated(a->s, f->layer, f->head) ? " (ablated)" : "");
    else
        snprintf(buf, cap, "L%d %s of heads", f->layer, f->head == ISTORE_MAX ? "max" : "mean");
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

/* The title: the view, the layer and what of its heads, and whether that
 * head is ablated. */
static void draw_title_line(inspector_pane *ip, const inspect_focus *f) {
    pane *p = &ip->base;
    char title[160], who[64];
    inspector_head_name(p->a, f, who, sizeof who);
    int top_l = p->a->cfg->n_layer - 1, top_h = p->a->cfg->n_head - 1;
    if (ip->view == INSPECT_LENS) /* every layer, no head: the residual stream */
        snprintf(title, sizeof title, "logit lens  (layers 0-%d; F8 next view)", top_l);
    else if (ip->view == INSPECT_WHY) /* every head and MLP: the logit's parts */
        snprintf(title, sizeof title, "why this token  (w: back)");
    else if (p->w >= 42)
        snprintf(title, sizeof title, "%s  %s  (layers 0-%d, heads 0-%d)", view_name(ip->view), who, top_l, top_h);
    else
        snprintf(title, sizeof title, "%s %s", view_name(ip->view), who);
    pane_title(p, title);
    pane_left_border(p);
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
        char t[128];
        snprintf(t, sizeof t, " #%d then: T %.2f k %d p %.2f m %.2f", at_pos, (double)sp->temperature, sp->top_k,
                 (double)sp->top_p, (double)sp->min_p);
        if (at_pos >= 0) /* an earlier token: its candidates and the knobs then (a knob cut short: an ellipsis) */
            term_put_words(p->win, y, 1, t, p->w - 2, term_attr(UI_ROLE_TITLE));
        else
            term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " next token%s%s",
                        sn->valid ? "" : " (none yet)", app_ablation_count(p->a) ? " (under the ablation)" : "");
    }
    y++;
    for (int i = 0; sn->valid && i < sn->n && i < k_lines && y < p->h; i++, y++)
        draw_candidate(p, y, &sn->c[i], sn->c[i].id == sn->chosen);
}

/* The next-token panel from row y: right after an ablation changed, the
 * distribution before and after it; at an earlier token, that token's
 * candidates; else the latest. */
static void draw_next_token(inspector_pane *ip, int y, int k_lines, const inspect_focus *f) {
    pane *p = &ip->base;
    app *a = p->a;
    if (ip->cursor < 0 && app_compare_draw(a, p, y, k_lines + 1)) return;
    istore_snap here;
    if (ip->cursor >= 0 && f->query >= 0) {
        if (snap_at(a, f->query, f->toks[f->query], &here)) {
            draw_candidates(p, y, &here, f->query, k_lines);
        } else if (f->query > 0 && app_next_at(a, f->query - 1, &here)) {
            /* nothing sampled there (a prompt token): what the model predicted for it, the token marked */
            char lab[48], t[128];
            app_token_label(a, f->toks[f->query], lab, sizeof lab);
            here.chosen = f->toks[f->query];
            snprintf(t, sizeof t, " #%d \"%s\": the model's guesses (T 1)", f->query, lab);
            if (y < p->h) term_put_words(p->win, y, 1, t, p->w - 2, term_attr(UI_ROLE_TITLE));
            int shown = 0, rows = 0;
            for (int i = 0; i < here.n && i < k_lines && y + 1 + i < p->h; i++, rows++) {
                shown |= here.c[i].id == here.chosen;
                draw_candidate(p, y + 1 + i, &here.c[i], here.c[i].id == here.chosen);
            }
            long rank;
            float prob;
            if (!shown && rows > 0 && app_rank_at(a, here.chosen, &rank, &prob)) { /* the token itself, on the last row */
                gpt2_candidate c = {.id = here.chosen, .prob_temp = prob, .removed_by = GPT2_STAGE_KEPT};
                term_fill(p->win, y + rows, 1, p->w - 1, term_attr(UI_ROLE_TEXT)); /* over the last candidate */
                draw_candidate(p, y + rows, &c, 1);
                char rk[24];
                snprintf(rk, sizeof rk, " #%ld", rank);
                term_printf(p->win, y + rows, p->w - 1 - (int)strlen(rk), (int)strlen(rk), term_attr(UI_ROLE_DIM), "%s", rk);
            }
        } else if (y < p->h) { /* a token from before a context drop or /load, its residual not kept */
            term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " #%d: no candidates recorded", f->query);
            term_printf(p->win, y + 1 < p->h ? y + 1 : y, 1, p->w - 2, term_attr(UI_ROLE_DIM),
                        " (prompt tokens, drafted and re-encoded ones have none)");
        }
        return;
    }
    const istore_snap *last = istore_last(a->store);
    if (!last->valid && app_next_now(a, &here)) last = &here; /* nothing sampled yet: the model's own distribution */
    draw_candidates(p, y, last, -1, k_lines);
}

/* The text view's note in the inspector: where the drawing is. */
static int text_view_note(pane *p, int y) {
    static const char note[] = "The conversation pane shows the context as the model sees it, each token shaded "
                               "by the attention the query (marked) pays to it. Up/Down move the query.";
    ui_line wl[4];
    int n = ui_wrap(note, sizeof note - 1, p->w - 2, wl, 4);
    for (int i = 0; i < n && i < 4; i++)
        term_put(p->win, y + i, 1, note + wl[i].start, wl[i].end - wl[i].start, p->w - 2, term_attr(UI_ROLE_DIM));
    return (n < 4 ? n : 4) + 1;
}

static void inspector_draw(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    werase(p->win);
    inspect_focus f;
    inspector_focus(p, &f);
    draw_title_line(ip, &f);
    /* rows: the view, the readout (2-3; none for the lens, which is not
       attention), the next-token panel (title + k) */
    int k = f.view == INSPECT_TEXT ? (p->h - 6) : (p->h - 1) / 4;
    k = k > 10 ? 10 : k < 2 ? 2 : k;
    int read_rows = f.view == INSPECT_TEXT ? 4 : f.view == INSPECT_LENS ? 0 : 3;
    if (p->h < 24 && (f.view == INSPECT_ZOOM || f.view == INSPECT_OVERVIEW)) /* short (zoomed at 80x24 too): the matrix first */
        k = 2, read_rows = 2;
    if (f.view == INSPECT_WHY) k = 0, read_rows = 0; /* the whole pane: the grid and the parts */
    if (f.view == INSPECT_LENS) { /* every layer first: the panel takes what is left, 2 to 5 */
        int left = p->h - 1 - 1 - (2 + p->a->cfg->n_layer);
        k = left > 5 ? 5 : left < 2 ? 2 : left;
    }
    int view_h = p->h - 1 - read_rows - 1 - k;
    int y = 1;
    if (f.n_tok == 0) term_printf(p->win, 4, 2, p->w - 3, term_attr(UI_ROLE_DIM), "(no tokens yet)"); /* below the legend */
    switch (f.view) {
    case INSPECT_ZOOM: view_zoom(p, y, view_h, &f, ip->rows2, &ip->scroll); break;
    case INSPECT_OVERVIEW: view_overview(p, y, view_h, &f, ip->row, ip->bins); break;
    case INSPECT_TEXT:
        view_h = view_legend(p, y, &f, NULL) + text_view_note(p, y + 2);
        break;
    case INSPECT_LENS: view_h = view_lens(p, y, view_h, &f); break;
    case INSPECT_WHY: view_why(p, y, p->h - 1, &f, &ip->why); return;
    default: break;
    }
    if (ip->cursor < 0) ip->scroll = 0;
    y = 1 + (view_h > 0 ? view_h : 0);
    if (read_rows) view_readout(p, y, read_rows, &f, ip->row);
    draw_next_token(ip, y + read_rows, k, &f);
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
    case KEY_END: ip->cursor = -1, ip->key = -1, ip->scroll = 0; return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
    if (cur < 0) cur = 0;
    if (cur >= n_tok - 1) cur = -1; /* back to following the newest */
    ip->cursor = cur;
    ip->key = -1; /* the new query's top key */
    return PANE_REDRAW;
}

/* </> (or ,/.) move the key cursor along the query's row. */
static int move_key(inspector_pane *ip, int d) {
    inspect_focus f;
    inspector_focus(&ip->base, &f);
    if (f.query < 0) return PANE_HANDLED;
    int k = f.key + d;
    ip->key = k < 0 ? 0 : k > f.query ? f.query : k;
    return PANE_REDRAW;
}

/* The why view's keys: [ ] select a part, b the baseline, Enter opens the selected head. */
static int why_char(inspector_pane *ip, int key) {
    pane *p = &ip->base;
    int layer, head;
    inspect_focus f;
    switch (key) {
    case '[': ip->why.sel--; return PANE_REDRAW;
    case ']': ip->why.sel++; return PANE_REDRAW;
    case 'b': ip->why.vs = !ip->why.vs, ip->why.sel = 0; return PANE_REDRAW;
    case '\n': case '\r':
        inspector_focus(p, &f);
        if (!app_why_head(p->a, &f, &ip->why, &layer, &head)) {
            app_message(p->a, UI_ROLE_TEXT, "the selected part is not a head: [ ] select another");
            return PANE_REDRAW;
        }
        inspector_set_layer(p, layer);
        inspector_set_head(p, head);
        ip->view = INSPECT_ZOOM;
        return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
}

static int inspector_char(inspector_pane *ip, int key) {
    pane *p = &ip->base;
    if (ip->view == INSPECT_WHY && why_char(ip, key)) return PANE_REDRAW;
    switch (key) {
    case 'l': inspector_set_layer(p, ip->layer + 1); return PANE_REDRAW;
    case 'L': inspector_set_layer(p, ip->layer - 1); return PANE_REDRAW;
    case 'h': inspector_set_head(p, ip->head + 1); return PANE_REDRAW;
    case 'H': inspector_set_head(p, ip->head - 1); return PANE_REDRAW;
    case 'a': inspector_toggle_average(p); return PANE_REDRAW;
    case 'm': inspector_cycle_mode(p); return PANE_REDRAW;
    case 'v': inspector_next_view(p); return PANE_REDRAW;
    case 'w': inspector_toggle_why(p); return PANE_REDRAW;
    case 'g': model_view_open(p->a); return PANE_REDRAW;
    case 'z': screen_toggle_zoom(p->a); return PANE_REDRAW;
    case 's': ip->row_scale = !ip->row_scale; return PANE_REDRAW;
    case '<': case ',': return move_key(ip, -1);
    case '>': case '.': return move_key(ip, +1);
    case 'x': app_ablate_toggle(p->a, ip->layer, ip->head >= 0 ? ip->head : ip->last_head); return PANE_REDRAW;
    case 'X': app_ablate_toggle(p->a, ip->layer, -1); return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
}

static int inspector_key(pane *p, int key, int is_code) {
    inspector_pane *ip = (inspector_pane *)p;
    if (!is_code) return inspector_char(ip, key);
    if (key == KEY_ENTER && ip->view == INSPECT_WHY) return inspector_char(ip, '\n');
    if (key == KEY_LEFT || key == KEY_RIGHT) {
        inspector_set_head(p, ip->head + (key == KEY_LEFT ? -1 : 1));
        return PANE_REDRAW;
    }
    if (key == KEY_SLEFT || key == KEY_SRIGHT) return move_key(ip, key == KEY_SLEFT ? -1 : 1);
    return move_cursor(ip, key);
}

static void inspector_free(pane *p) {
    inspector_pane *ip = (inspector_pane *)p;
    free(ip->row), free(ip->rows2), free(ip->bins);
    pane_release(p);
}

static const pane_ops inspector_ops = {
    .name = "inspector", .draw = inspector_draw, .key = inspector_key, .resize = pane_place, .free = inspector_free};

pane *inspector_pane_new(app *a) {
    inspector_pane *ip = calloc(1, sizeof *ip);
    if (!ip) return NULL;
    size_t n = (size_t)istore_n_ctx(a->store);
    ip->base = (pane){.ops = &inspector_ops, .a = a};
    ip->row = malloc(n * sizeof *ip->row);
    ip->rows2 = malloc(2 * n * sizeof *ip->rows2);
    ip->bins = malloc(2 * n * sizeof *ip->bins);
    if (!ip->row || !ip->rows2 || !ip->bins) {
        inspector_free(&ip->base);
        return NULL;
    }
    ip->cursor = -1, ip->key = -1;
    inspector_set_layer(&ip->base, 0);
    return &ip->base;
}
