/* panes.c — the panes: conversation, sampling panel, inspector (attention
 * heatmap + next-token candidates), input line and status bar. Each draws
 * from the app's data; key handlers return PANE_* flags. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

static void draw_title(pane *p, const char *title) {
    attr_t a = term_attr(p->a->focus == (int)(p - p->a->panes) ? UI_ROLE_SELECTION : UI_ROLE_TITLE);
    term_fill(p->win, 0, 0, p->w, term_attr(UI_ROLE_BORDER));
    term_printf(p->win, 0, 1, p->w - 1, a, " %s ", title);
}

static void left_border(pane *p) {
    wattrset(p->win, term_attr(UI_ROLE_BORDER));
    mvwvline(p->win, 0, 0, ACS_VLINE, p->h);
    wattrset(p->win, 0);
}

/* ---- conversation ------------------------------------------------------- */

typedef struct {
    int turn;       /* -1: a label line */
    size_t start, end;
    int label_role; /* for label lines */
    int indent;
} conv_line;

/* Builds every display line of the transcript (labels + wrapped text). */
static int conv_layout(app *a, int width, conv_line **out) {
    int n_turns = gpt2_session_n_turns(a->s);
    int cap = 64, n = 0;
    conv_line *L = malloc((size_t)cap * sizeof *L);
    if (!L) return 0;
    int tw = width - 2 > 1 ? width - 2 : 1;
    for (int i = 0; i < n_turns; i++) {
        gpt2_turn t;
        if (!gpt2_session_turn(a->s, i, &t)) continue;
        size_t len = t.role == GPT2_ROLE_ASSISTANT ? t.shown : t.len;
        int need = ui_wrap(t.text, len, tw, NULL, 0) + 2;
        if (n + need > cap) {
            while (n + need > cap) cap *= 2;
            conv_line *nl = realloc(L, (size_t)cap * sizeof *L);
            if (!nl) break;
            L = nl;
        }
        L[n++] = (conv_line){.turn = -1 - i, .label_role = t.role == GPT2_ROLE_USER ? UI_ROLE_USER : UI_ROLE_ASSISTANT};
        ui_line *wl = malloc((size_t)need * sizeof *wl);
        if (!wl) break;
        int k = ui_wrap(t.text, len, tw, wl, need);
        for (int j = 0; j < k; j++) L[n++] = (conv_line){.turn = i, .start = wl[j].start, .end = wl[j].end, .indent = 2};
        free(wl);
        L[n++] = (conv_line){.turn = -1000000}; /* blank separator */
    }
    *out = L;
    return n;
}

static ui_role conf_role(float p) {
    return p < 0.2f ? UI_ROLE_CONF_LOW : p < 0.6f ? UI_ROLE_CONF_MID : UI_ROLE_CONF_HIGH;
}

/* Draft mode's marks: accepted drafts in one style, the target's corrections
 * in another, their first cell underlined (the mark of where drafts were
 * rejected and discarded; it is all NO_COLOR shows); sampled and bonus
 * tokens as plain text. -1: no mark. */
static int draft_role(const tok_note *n) {
    return n->origin == GPT2_TOKEN_ACCEPTED ? UI_ROLE_DRAFT : n->origin == GPT2_TOKEN_CORRECTED ? UI_ROLE_DRAFT_FIX : -1;
}

static int turn_drafted(const app *a, int ti) {
    for (int i = 0; i < a->turn_nnotes[ti]; i++)
        if (a->turn_notes[ti][i].origin != GPT2_TOKEN_SAMPLED) return 1;
    return 0;
}

/* Draws bytes [start, end) of turn t, colouring by token probability when asked
 * (F2), else marking draft mode's tokens. */
static void conv_draw_text(app *a, WINDOW *w, int y, int x, int maxc, int ti, const gpt2_turn *t, size_t start,
                           size_t end) {
    attr_t base = term_attr(t->role == GPT2_ROLE_USER ? UI_ROLE_TEXT : UI_ROLE_ASSISTANT);
    if (!t->in_context) base = term_attr(UI_ROLE_DIM);
    int noted = t->role == GPT2_ROLE_ASSISTANT && ti < a->turns_cap && a->turn_nnotes[ti] > 0;
    int conf = noted && a->conf_view;
    int marks = noted && !a->conf_view && t->in_context && turn_drafted(a, ti);
    if (!conf && !marks) {
        term_put(w, y, x, t->text + start, end - start, maxc, base);
        return;
    }
    /* walk token boundaries from the turn's ids to find the token of each byte */
    size_t off = 0;
    int tk = 0;
    int cols = 0;
    for (size_t i = start; i < end && cols < maxc;) {
        while (tk < t->n_ids) {
            size_t bl;
            gpt2_tokenizer_token_bytes(a->tok, t->ids[tk], &bl);
            if (off + bl > i) break;
            off += bl;
            tk++;
        }
        attr_t at = base;
        if (tk < a->turn_nnotes[ti]) {
            const tok_note *nt = &a->turn_notes[ti][tk];
            int dr = draft_role(nt);
            if (conf) at = term_attr(conf_role(nt->p));
            else if (dr >= 0) at = term_attr((ui_role)dr) | (dr == UI_ROLE_DRAFT_FIX && i == off ? A_UNDERLINE : 0);
        }
        uint32_t cp;
        int nb = ui_utf8_decode(t->text + i, end - i, &cp);
        cols += term_put(w, y, x + cols, t->text + i, (size_t)nb, maxc - cols, at);
        i += (size_t)nb;
    }
}

/* The speaker a template's prefix names ("ROMEO:\n" -> "ROMEO"): its text
 * without surrounding blanks and a final colon, if short and on one line;
 * else "". */
static void speaker(const char *prefix, char *out, size_t cap) {
    out[0] = '\0';
    if (!prefix) return;
    while (*prefix == ' ' || *prefix == '\n') prefix++;
    size_t n = strlen(prefix);
    while (n && (prefix[n - 1] == ' ' || prefix[n - 1] == '\n')) n--;
    if (n && prefix[n - 1] == ':') n--;
    if (n == 0 || n >= cap || n > 24 || memchr(prefix, '\n', n)) return;
    memcpy(out, prefix, n);
    out[n] = '\0';
}

/* "you" / the model's name, with the template's speakers when it names them:
 * "you, as ROMEO", "shakespeare, as JULIET". */
static void role_label(const app *a, int user, char *out, size_t cap) {
    const gpt2_chat_template *t = gpt2_session_template(a->s);
    char who[32];
    speaker(user ? t->user_prefix : t->assistant_prefix, who, sizeof who);
    const char *base = user ? "you" : a->model_name;
    if (who[0]) snprintf(out, cap, "%.40s, as %s", base, who);
    else snprintf(out, cap, "%.40s", base);
}

/* The confidence view's legend on the pane's last row: what each colour means. */
static void conf_legend(pane *p) {
    int c = term_printf(p->win, p->h - 1, 0, p->w - 1, term_attr(UI_ROLE_DIM), "confidence (F2): ");
    c += term_printf(p->win, p->h - 1, c, p->w - 1 - c, term_attr(UI_ROLE_CONF_LOW), "p < 20%%");
    c += term_printf(p->win, p->h - 1, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), "  ");
    c += term_printf(p->win, p->h - 1, c, p->w - 1 - c, term_attr(UI_ROLE_CONF_MID), "20-60%%");
    c += term_printf(p->win, p->h - 1, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), "  ");
    term_printf(p->win, p->h - 1, c, p->w - 1 - c, term_attr(UI_ROLE_CONF_HIGH), "p >= 60%%");
}

static void conv_draw(pane *p) {
    app *a = p->a;
    werase(p->win);
    conv_line *L = NULL;
    int n = conv_layout(a, p->w - 1, &L);
    int h = a->conf_view && p->h > 2 ? p->h - 1 : p->h; /* the legend's row */
    if (h < p->h) conf_legend(p);
    int max_scroll = n - h > 0 ? n - h : 0;
    if (a->conv_scroll > max_scroll) a->conv_scroll = max_scroll;
    if (a->conv_scroll < 0) a->conv_scroll = 0;
    int first = n - h - a->conv_scroll;
    if (first < 0) first = 0;
    if (n == 0) {
        term_printf(p->win, 1, 2, p->w - 3, term_attr(UI_ROLE_DIM), "Type a message and press Enter.");
        term_printf(p->win, 2, 2, p->w - 3, term_attr(UI_ROLE_DIM), "F1 or ? (on an empty line): help");
        const gpt2_chat_template *tp = gpt2_session_template(a->s);
        char you[32], them[32];
        speaker(tp->user_prefix, you, sizeof you), speaker(tp->assistant_prefix, them, sizeof them);
        term_printf(p->win, 3, 2, p->w - 3, term_attr(UI_ROLE_DIM), "template: %s", tp->name);
        if (you[0] && them[0])
            term_printf(p->win, 4, 2, p->w - 3, term_attr(UI_ROLE_DIM), "you speak as %s, %.40s as %s", you,
                        a->model_name, them);
    }
    for (int r = 0; r < h && first + r < n; r++) {
        conv_line *l = &L[first + r];
        if (l->turn == -1000000) continue;
        if (l->turn < 0) {
            int ti = -1 - l->turn;
            gpt2_turn t;
            gpt2_session_turn(a->s, ti, &t);
            char who[96];
            role_label(a, t.role == GPT2_ROLE_USER, who, sizeof who);
            attr_t at = term_attr((ui_role)l->label_role) | A_BOLD;
            int c = term_printf(p->win, r, 0, p->w - 1, at, "%s", who);
            if (!t.in_context)
                term_printf(p->win, r, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " (dropped from the context)");
            else if (t.replying)
                term_printf(p->win, r, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " ...");
            continue;
        }
        gpt2_turn t;
        gpt2_session_turn(a->s, l->turn, &t);
        conv_draw_text(a, p->win, r, l->indent, p->w - 1 - l->indent, l->turn, &t, l->start, l->end);
    }
    if (a->conv_scroll > 0)
        term_printf(p->win, 0, p->w - 12 > 0 ? p->w - 12 : 0, 11, term_attr(UI_ROLE_NOTICE), "[+%d lines]",
                    a->conv_scroll);
    free(L);
}

static int conv_key(pane *p, int key, int is_code) {
    app *a = p->a;
    int page = p->h > 2 ? p->h - 1 : 1;
    if (!is_code) return PANE_IGNORED;
    switch (key) {
    case KEY_UP: a->conv_scroll++; return PANE_REDRAW;
    case KEY_DOWN: a->conv_scroll--; return PANE_REDRAW;
    case KEY_PPAGE: a->conv_scroll += page; return PANE_REDRAW;
    case KEY_NPAGE: a->conv_scroll -= page; return PANE_REDRAW;
    case KEY_HOME: a->conv_scroll = 1 << 28; return PANE_REDRAW;
    case KEY_END: a->conv_scroll = 0; return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
}

static void noop(pane *p) { (void)p; }

const pane_ops conv_pane_ops = {.name = "conversation", .draw = conv_draw, .key = conv_key, .resize = noop, .free = noop};

/* ---- sampling panel ----------------------------------------------------- */

static const char *sp_names[SP_COUNT] = {"temp", "top-k", "top-p", "min-p", "repeat", "max-new", "seed", "draft-k"};

static void sampling_draw(pane *p) {
    app *a = p->a;
    werase(p->win);
    gpt2_sampler_params sp = gpt2_session_sampler_params(a->s);
    char title[64];
    snprintf(title, sizeof title, "sampling%s", a->focus == PANE_SAMPLING ? " (\u2191\u2193 pick, \u2190\u2192 change)" : "");
    draw_title(p, title);
    left_border(p);
    int colw = (p->w - 2) / 2;
    for (int i = 0; i < SP_COUNT; i++) {
        char v[32];
        switch (i) {
        case SP_TEMP: snprintf(v, sizeof v, "%.2f", (double)sp.temperature); break;
        case SP_TOPK: snprintf(v, sizeof v, sp.top_k ? "%d" : "off", sp.top_k); break;
        case SP_TOPP: snprintf(v, sizeof v, "%.2f", (double)sp.top_p); break;
        case SP_MINP: snprintf(v, sizeof v, "%.2f", (double)sp.min_p); break;
        case SP_REP: snprintf(v, sizeof v, "%.2f", (double)sp.repeat_penalty); break;
        case SP_MAXNEW: {
            int m = gpt2_session_max_new_tokens(a->s);
            snprintf(v, sizeof v, m ? "%d" : "none", m);
            break;
        }
        case SP_DRAFTK: /* K of draft mode; "off" while a draft is loaded but not used */
            if (!gpt2_session_draft_model(a->s)) snprintf(v, sizeof v, "none");
            else snprintf(v, sizeof v, gpt2_session_draft_enabled(a->s) ? "%d" : "%d off", gpt2_session_draft_k(a->s));
            break;
        default: snprintf(v, sizeof v, "%llu", (unsigned long long)sp.seed); break;
        }
        int row = 1 + i % 4, col = 2 + (i / 4) * colw;
        if (row >= p->h) continue;
        attr_t at = (a->focus == PANE_SAMPLING && a->sp_sel == i) ? term_attr(UI_ROLE_SELECTION) : term_attr(UI_ROLE_TEXT);
        term_printf(p->win, row, col, colw - 1, at, "%-7s %-8s", sp_names[i], v);
    }
}

static int sampling_key(pane *p, int key, int is_code) {
    app *a = p->a;
    if (!is_code) {
        if (key == '+' || key == '=') return app_apply_sampling(a, a->sp_sel, +1, 0), PANE_REDRAW;
        if (key == '-') return app_apply_sampling(a, a->sp_sel, -1, 0), PANE_REDRAW;
        return PANE_IGNORED;
    }
    switch (key) {
    case KEY_UP: a->sp_sel = (a->sp_sel + SP_COUNT - 1) % SP_COUNT; return PANE_REDRAW;
    case KEY_DOWN: a->sp_sel = (a->sp_sel + 1) % SP_COUNT; return PANE_REDRAW;
    case KEY_LEFT: app_apply_sampling(a, a->sp_sel, -1, 0); return PANE_REDRAW;
    case KEY_RIGHT: app_apply_sampling(a, a->sp_sel, +1, 0); return PANE_REDRAW;
    case KEY_PPAGE: app_apply_sampling(a, a->sp_sel, +1, 1); return PANE_REDRAW;
    case KEY_NPAGE: app_apply_sampling(a, a->sp_sel, -1, 1); return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
}

const pane_ops sampling_pane_ops = {
    .name = "sampling", .draw = sampling_draw, .key = sampling_key, .resize = noop, .free = noop};

/* ---- inspector ---------------------------------------------------------- */

static const char *stage_tag(gpt2_sampler_stage s) {
    switch (s) {
    case GPT2_STAGE_GREEDY: return "temp0";
    case GPT2_STAGE_TOP_K: return "top-k";
    case GPT2_STAGE_TOP_P: return "top-p";
    case GPT2_STAGE_MIN_P: return "min-p";
    default: return "";
    }
}

/* The weight of query q on key k for the shown layer/head (average when head < 0). */
static float heat_value(app *a, int q, int k) {
    if (a->head >= 0) {
        const float *row = app_att_row(a, a->layer, a->head, q);
        return row ? row[k] : NAN;
    }
    float s = 0;
    for (int h = 0; h < a->cfg->n_head; h++) {
        const float *row = app_att_row(a, a->layer, h, q);
        if (!row) return NAN;
        s += row[k];
    }
    return s / (float)a->cfg->n_head;
}

/* The candidates recorded for the reply token at context position q (which
 * the session keeps with its turn, through context drops and /load); 0 for
 * a prompt token or a token with none recorded. */
static int snap_at(app *a, int q, int32_t tok, token_snap *out) {
    for (int i = gpt2_session_n_turns(a->s) - 1; i >= 0; i--) {
        gpt2_turn t;
        if (!gpt2_session_turn(a->s, i, &t) || t.pos < 0 || q < t.pos || q >= t.pos + t.n_ids) continue;
        gpt2_token_candidates tc;
        if (gpt2_session_candidates(a->s, i, q - t.pos, &tc) != GPT2_OK || tc.n == 0) return 0;
        *out = (token_snap){.valid = 1, .chosen = tok, .n = tc.n, .params = tc.params};
        memcpy(out->c, tc.c, (size_t)tc.n * sizeof *tc.c);
        for (int k = 0; k < tc.n; k++)
            if (tc.c[k].id == tok) out->chosen_prob = tc.c[k].prob;
        return 1;
    }
    return 0;
}

static void inspector_draw(pane *p) {
    app *a = p->a;
    werase(p->win);
    int n_tok = 0;
    const int32_t *toks = gpt2_session_tokens(a->s, &n_tok);
    int avail = p->h - 1;
    int k_lines = (avail - 2) / 2;
    if (k_lines > 10) k_lines = 10;
    if (k_lines < 1) k_lines = 1;
    int heat_rows = avail - 1 - (1 + k_lines);
    if (heat_rows < 1) heat_rows = 1;
    int heat_cols = p->w - 3;
    char title[96];
    int top_l = a->cfg->n_layer - 1, top_h = a->cfg->n_head - 1;
    int wide = p->w >= 42; /* "layer"/"head" spelled out when they fit, else L and H */
    if (a->head >= 0)
        snprintf(title, sizeof title, wide ? "attention  layer %d (0-%d)  head %d (0-%d)" : "attention  L%d (0-%d)  H%d (0-%d)",
                 a->layer, top_l, a->head, top_h);
    else
        snprintf(title, sizeof title, wide ? "attention  layer %d (0-%d)  average of heads" : "attention  L%d (0-%d)  avg of heads",
                 a->layer, top_l);
    draw_title(p, title);
    left_border(p);

    ui_heat_view v;
    ui_heat_window(n_tok, heat_rows, heat_cols, a->heat_scroll, a->heat_cursor, &v);
    a->heat_scroll = a->heat_cursor < 0 ? 0 : v.scroll;
    int nl = term_heat_levels();
    for (int r = 0; r < v.n_rows; r++) {
        int q = v.row0 + r;
        int y = 1 + r;
        if (q == v.cursor) term_printf(p->win, y, 1, 1, term_attr(UI_ROLE_SELECTION), ">");
        for (int c = 0; c < v.n_cols; c++) {
            int k = v.col0 + c;
            if (k > q) break;
            float x = heat_value(a, q, k);
            if (x != x) {
                term_put(p->win, y, 2 + c, "?", 1, 1, term_attr(UI_ROLE_DIM));
                continue;
            }
            int lv = ui_heat_level(x, nl);
            const char *g = term_heat_glyph(lv);
            term_put(p->win, y, 2 + c, g, strlen(g), 1, term_heat(lv));
        }
    }
    int y = 1 + heat_rows;
    if (n_tok == 0) term_printf(p->win, 1, 2, p->w - 3, term_attr(UI_ROLE_DIM), "(no tokens yet)");
    /* the cursor's top attended tokens */
    if (v.cursor >= 0 && y < p->h) {
        char lab[48];
        app_token_label(a, toks[v.cursor], lab, sizeof lab);
        int c = term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), "#%d %s\u2192", v.cursor, lab);
        int idx[3];
        float wts[3];
        float *tmp = malloc((size_t)(v.cursor + 1) * sizeof *tmp);
        if (tmp) {
            for (int k = 0; k <= v.cursor; k++) tmp[k] = heat_value(a, v.cursor, k);
            int m = ui_top_entries(tmp, v.cursor + 1, 3, idx, wts);
            for (int i = 0; i < m && c < p->w - 2; i++) {
                if (wts[i] != wts[i] || wts[i] < 0) continue;
                app_token_label(a, toks[idx[i]], lab, sizeof lab);
                c += term_printf(p->win, y, 1 + c, p->w - 2 - c, term_attr(UI_ROLE_TEXT), " #%d %s %.2f", idx[i], lab,
                                 (double)wts[i]);
            }
            free(tmp);
        }
    }
    y++;
    /* next-token candidates: at the cursor's token when the session recorded them, else the latest */
    const token_snap *sn = &a->last_snap;
    token_snap here;
    int at_pos = -1;
    if (a->heat_cursor >= 0 && v.cursor >= 0 && snap_at(a, v.cursor, toks[v.cursor], &here)) {
        sn = &here;
        at_pos = v.cursor;
    }
    const int none_here = a->heat_cursor >= 0 && v.cursor >= 0 && at_pos < 0;
    if (none_here && y < p->h) { /* a prompt token, or one from before a context drop or /load */
        term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_TITLE), " #%d: no candidates recorded", v.cursor);
        term_printf(p->win, y + 1 < p->h ? y + 1 : y, 1, p->w - 2, term_attr(UI_ROLE_DIM),
                    " (prompt tokens, drafted and re-encoded ones have none)");
        return;
    }
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
    int barw = p->w - 2 - 12 - 7 - 6;
    if (barw < 3) barw = 3;
    for (int i = 0; sn->valid && i < sn->n && i < k_lines && y < p->h; i++, y++) {
        const gpt2_candidate *c = &sn->c[i];
        char lab[48], bar[3 * 64 + 1], pct[8];
        app_token_label(a, c->id, lab, sizeof lab);
        int removed = c->removed_by != GPT2_STAGE_KEPT;
        attr_t at = term_attr(removed ? UI_ROLE_BAR_REMOVED : UI_ROLE_BAR);
        int bw = barw > 64 ? 64 : barw;
        int col = 1;
        col += term_printf(p->win, y, col, 1, term_attr(UI_ROLE_NOTICE), "%s", c->id == sn->chosen ? "*" : " ");
        term_printf(p->win, y, col, 11, term_attr(removed ? UI_ROLE_DIM : UI_ROLE_TEXT), "%s", lab);
        col += 12;
        term_printf(p->win, y, col, bw, at, "%s", ui_bar(c->prob_temp, bw, bar));
        col += bw;
        attr_t ta = term_attr(removed ? UI_ROLE_DIM : UI_ROLE_TEXT);
        col += term_printf(p->win, y, col, 7, ta, "%s", ui_percent(c->prob_temp, pct));
        if (removed) term_printf(p->win, y, col + 1, p->w - col - 2, term_attr(UI_ROLE_DIM), "%s", stage_tag(c->removed_by));
    }
}

static int inspector_key(pane *p, int key, int is_code) {
    app *a = p->a;
    int n_tok = 0;
    gpt2_session_tokens(a->s, &n_tok);
    if (!is_code) {
        switch (key) {
        case 'l': app_set_layer(a, a->layer + 1); return PANE_REDRAW;
        case 'L': app_set_layer(a, a->layer - 1); return PANE_REDRAW;
        case 'h': app_set_head(a, a->head + 1); return PANE_REDRAW;
        case 'H': app_set_head(a, a->head - 1); return PANE_REDRAW;
        case 'a': app_set_head(a, a->head < 0 ? 0 : -1); return PANE_REDRAW;
        default: return PANE_IGNORED;
        }
    }
    int cur = a->heat_cursor < 0 ? n_tok - 1 : a->heat_cursor;
    int page = p->h / 2 > 1 ? p->h / 2 : 1;
    switch (key) {
    case KEY_UP: cur--; break;
    case KEY_DOWN: cur++; break;
    case KEY_PPAGE: cur -= page; break;
    case KEY_NPAGE: cur += page; break;
    case KEY_HOME: cur = 0; break;
    case KEY_END: a->heat_cursor = -1; a->heat_scroll = 0; return PANE_REDRAW;
    case KEY_LEFT: app_set_head(a, a->head - 1); return PANE_REDRAW;
    case KEY_RIGHT: app_set_head(a, a->head + 1); return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
    if (cur < 0) cur = 0;
    if (cur >= n_tok - 1) cur = -1; /* back to following the newest */
    a->heat_cursor = cur;
    return PANE_REDRAW;
}

const pane_ops inspector_pane_ops = {
    .name = "inspector", .draw = inspector_draw, .key = inspector_key, .resize = noop, .free = noop};

/* ---- input line and status bar ------------------------------------------ */

static void input_draw(pane *p) {
    app *a = p->a;
    werase(p->win);
    if (a->prefill_msg[0] || a->msg[0])
        screen_draw_message(a, p->win, p->w);
    else {
        wattrset(p->win, term_attr(UI_ROLE_BORDER));
        mvwhline(p->win, 0, 0, ACS_HLINE, p->w);
        wattrset(p->win, 0);
    }
    input_draw_line(p);
}

static int no_key(pane *p, int key, int is_code) { return PANE_IGNORED; }

const pane_ops input_pane_ops = {.name = "input", .draw = input_draw, .key = no_key, .resize = noop, .free = noop};

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
    /* the reply's kept tokens (the tokens evaluated for it, draft passes and
       rejected drafts included, are in the --log) */
    int n = snprintf(buf, sizeof buf, " %s \u2502 ctx %d/%d \u2502 %.*f tok/s \u2502 turn: prefill %d, reply %d%s",
                     a->model_name, n_tok, a->n_ctx, a->last_tps >= 100 ? 0 : 1, a->last_tps, a->turn_prefill,
                     a->reply_tokens, draft);
    if (n < 0) return;
    int c = term_put(p->win, 0, 0, buf, strlen(buf), p->w, at);
    const char *hint = a->generating ? " \u2502 Esc stops" : " \u2502 F1 help"; /* when it fits */
    if (c + ui_text_width(hint, strlen(hint)) <= p->w) c += term_put(p->win, 0, c, hint, strlen(hint), p->w - c, at);
    else return;
    /* more hints when there is room */
    static const char *more[] = {"  Tab focus", "  F2 confidence", "  F3/F4 layer", "  F5/F6 head", "  /quit"};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
        int w = ui_text_width(more[i], strlen(more[i]));
        if (c + w > p->w) break;
        c += term_put(p->win, 0, c, more[i], strlen(more[i]), p->w - c, at);
    }
}

const pane_ops status_pane_ops = {.name = "status", .draw = status_draw, .key = no_key, .resize = noop, .free = noop};
