/* pane_conv.c — the conversation pane: every turn under a label ("you, as
 * ROMEO"), wrapped to the pane's width, scrolled from the bottom. Reply
 * tokens are coloured by their probability in the confidence view (F2), else
 * draft mode's tokens are marked; both read the store's per-token notes.
 * In the inspector's text view it shows instead the context as the model
 * sees it — every cached token, template text included, across turns —
 * each token shaded by how much the inspector's query attends to it.
 * State: the scroll, the view, and the display lines it lays out (kept
 * between frames so that a frame does not allocate). */
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

/* conv_line.turn of the blank line after a turn, and of the system message's
 * label and text lines (which come first) */
enum { LINE_BLANK = -1000000, LINE_SYSTEM_LABEL = -1000001, LINE_SYSTEM = -1000002 };

typedef struct {
    int turn;       /* -1 - t: the label line of turn t; LINE_BLANK, LINE_SYSTEM_LABEL, LINE_SYSTEM */
    size_t start, end;
    int label_role; /* for label lines */
    int indent;
} conv_line;

typedef struct {
    pane base;
    int scroll;     /* lines scrolled back from the bottom */
    int confidence; /* colour reply tokens by probability */
    conv_line *lines; /* (cap) the layout of the last frame */
    int cap;
    ui_line *wrap;  /* (wrap_cap) one turn's wrapped lines (the text view: the context's) */
    int wrap_cap;
    /* the text view */
    int text_view;  /* the last frame drew it */
    char *ctx;      /* (ctx_cap) the context's bytes, token after token */
    int ctx_cap;
    int *tok_end;   /* (tok_cap) where token i's bytes end in ctx */
    int tok_cap;
    int *cell_tok;  /* (cell_cap >= h * w) the token drawn at each cell, -1: none */
    int cell_cap;
    float *row;     /* (n_ctx) the query's weights */
} conv_pane;

/* Room for n entries of size sz in *buf (capacity *cap): 0 when out of memory. */
static int reserve(void **buf, int *cap, int n, size_t sz) {
    if (n <= *cap) return 1;
    int c = *cap ? *cap : 64;
    while (c < n) c *= 2;
    void *nb = realloc(*buf, (size_t)c * sz);
    if (!nb) return 0;
    *buf = nb, *cap = c;
    return 1;
}

/* Lays out every display line of the transcript (labels + wrapped text +
 * blank separators) into cp->lines; returns how many. */
static int conv_layout(conv_pane *cp, int width) {
    app *a = cp->base.a;
    int n_turns = gpt2_session_n_turns(a->s), n = 0;
    int tw = width - 2 > 1 ? width - 2 : 1;
    const char *sys = gpt2_session_system(a->s);
    if (sys[0]) { /* the system message, dim, above the turns */
        int need = ui_wrap(sys, strlen(sys), tw, NULL, 0);
        if (!reserve((void **)&cp->lines, &cp->cap, need + 2, sizeof *cp->lines) ||
            !reserve((void **)&cp->wrap, &cp->wrap_cap, need, sizeof *cp->wrap))
            return 0;
        cp->lines[n++] = (conv_line){.turn = LINE_SYSTEM_LABEL};
        int k = ui_wrap(sys, strlen(sys), tw, cp->wrap, need);
        for (int j = 0; j < k; j++)
            cp->lines[n++] = (conv_line){.turn = LINE_SYSTEM, .start = cp->wrap[j].start, .end = cp->wrap[j].end,
                                         .indent = 2};
        cp->lines[n++] = (conv_line){.turn = LINE_BLANK};
    }
    for (int i = 0; i < n_turns; i++) {
        gpt2_turn t;
        if (!gpt2_session_turn(a->s, i, &t)) continue;
        size_t end = t.role == GPT2_ROLE_ASSISTANT ? t.shown : t.len, len = end > t.start ? end - t.start : 0;
        int need = ui_wrap(t.text + t.start, len, tw, NULL, 0);
        if (!reserve((void **)&cp->lines, &cp->cap, n + need + 2, sizeof *cp->lines) ||
            !reserve((void **)&cp->wrap, &cp->wrap_cap, need, sizeof *cp->wrap))
            break;
        cp->lines[n++] = (conv_line){.turn = -1 - i,
                                     .label_role = t.role == GPT2_ROLE_USER ? UI_ROLE_USER : UI_ROLE_ASSISTANT};
        int k = ui_wrap(t.text + t.start, len, tw, cp->wrap, need);
        for (int j = 0; j < k; j++)
            cp->lines[n++] = (conv_line){.turn = i, .start = t.start + cp->wrap[j].start,
                                         .end = t.start + cp->wrap[j].end, .indent = 2};
        cp->lines[n++] = (conv_line){.turn = LINE_BLANK};
    }
    return n;
}

static ui_role conf_role(float p) {
    return p < 0.2f ? UI_ROLE_CONF_LOW : p < 0.6f ? UI_ROLE_CONF_MID : UI_ROLE_CONF_HIGH;
}

/* Draft mode's marks: accepted drafts in one style, the target's corrections
 * in another, their first cell underlined (the mark of where drafts were
 * rejected and discarded; it is all NO_COLOR shows); sampled and bonus
 * tokens as plain text. -1: no mark. */
static int draft_role(const istore_note *n) {
    return n->origin == GPT2_TOKEN_ACCEPTED ? UI_ROLE_DRAFT : n->origin == GPT2_TOKEN_CORRECTED ? UI_ROLE_DRAFT_FIX : -1;
}

static int turn_drafted(const istore_note *notes, int n) {
    for (int i = 0; i < n; i++)
        if (notes[i].origin != GPT2_TOKEN_SAMPLED) return 1;
    return 0;
}

/* The attribute of the byte at i, token tk of the turn (its note, if any). */
static attr_t note_attr(attr_t base, const istore_note *notes, int n_notes, int tk, int conf, size_t i, size_t off) {
    if (tk >= n_notes) return base;
    const istore_note *nt = &notes[tk];
    int dr = draft_role(nt);
    if (conf) return term_attr(conf_role(nt->p));
    if (dr >= 0) return term_attr((ui_role)dr) | (dr == UI_ROLE_DRAFT_FIX && i == off ? A_UNDERLINE : 0);
    return base;
}

/* Draws bytes [start, end) of turn t, colouring by token probability when asked
 * (F2), else marking draft mode's tokens. */
static void conv_draw_text(conv_pane *cp, int y, int x, int maxc, int ti, const gpt2_turn *t, size_t start,
                           size_t end) {
    app *a = cp->base.a;
    WINDOW *w = cp->base.win;
    attr_t base = term_attr(t->role == GPT2_ROLE_USER ? UI_ROLE_TEXT : UI_ROLE_ASSISTANT);
    if (!t->in_context) base = term_attr(UI_ROLE_DIM);
    int n_notes = 0;
    const istore_note *notes = t->role == GPT2_ROLE_ASSISTANT ? istore_notes(a->store, ti, &n_notes) : NULL;
    int conf = n_notes > 0 && cp->confidence;
    int marks = n_notes > 0 && !cp->confidence && t->in_context && turn_drafted(notes, n_notes);
    if (!conf && !marks) {
        term_put(w, y, x, t->text + start, end - start, maxc, base);
        return;
    }
    /* walk token boundaries from the turn's ids to find the token of each byte */
    size_t off = 0;
    int tk = 0, cols = 0;
    for (size_t i = start; i < end && cols < maxc;) {
        while (tk < t->n_ids) {
            size_t bl;
            gpt2_tokenizer_token_bytes(a->tok, t->ids[tk], &bl);
            if (off + bl > i) break;
            off += bl;
            tk++;
        }
        attr_t at = note_attr(base, notes, n_notes, tk, conf, i, off);
        uint32_t cp32;
        int nb = ui_utf8_decode(t->text + i, end - i, &cp32);
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
    const char *base = a->prompt_mode ? (user ? "prompt (as typed, raw template)" : "generated") : user ? "you" : a->model_name;
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

/* An empty conversation: what to do, and who speaks as whom. */
static void draw_intro(pane *p) {
    const gpt2_chat_template *tp = gpt2_session_template(p->a->s);
    attr_t dim = term_attr(UI_ROLE_DIM);
    term_printf(p->win, 1, 2, p->w - 3, dim, "Type a message and press Enter.");
    term_printf(p->win, 2, 2, p->w - 3, dim, "F1 or ? (on an empty line): help");
    char you[32], them[32];
    speaker(tp->user_prefix, you, sizeof you), speaker(tp->assistant_prefix, them, sizeof them);
    term_printf(p->win, 3, 2, p->w - 3, dim, "template: %s", tp->name);
    if (you[0] && them[0])
        term_printf(p->win, 4, 2, p->w - 3, dim, "you speak as %s, %.40s as %s", you, p->a->model_name, them);
}

/* A turn's label line at row r: who, and whether it was dropped or is being written. */
static void draw_label(pane *p, int r, const conv_line *l) {
    gpt2_turn t;
    gpt2_session_turn(p->a->s, -1 - l->turn, &t);
    char who[96];
    role_label(p->a, t.role == GPT2_ROLE_USER, who, sizeof who);
    int c = term_printf(p->win, r, 0, p->w - 1, term_attr((ui_role)l->label_role) | A_BOLD, "%s", who);
    if (!t.in_context)
        c += term_printf(p->win, r, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " (dropped from the context)");
    else if (t.replying)
        c += term_printf(p->win, r, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " ...");
    /* where other branches part from this one in this reply (/fork made them) */
    for (int i = 0, n = gpt2_session_n_branches(p->a->s); i < n && c < p->w - 1; i++) {
        int at, tok;
        if (gpt2_session_branch_diverges(p->a->s, i, &at, &tok) && at == -1 - l->turn && tok >= 0)
            c += term_printf(p->win, r, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " [branch %d parts at token %d]", i,
                             tok);
    }
}

/* The context's bytes, token after token, into cp->ctx (token i ends at
 * tok_end[i]); returns the length, -1 when out of memory. */
static int context_text(conv_pane *cp, const inspect_focus *f) {
    int len = 0;
    if (!reserve((void **)&cp->tok_end, &cp->tok_cap, f->n_tok, sizeof *cp->tok_end)) return -1;
    for (int i = 0; i < f->n_tok; i++) {
        size_t bl;
        const char *b = gpt2_tokenizer_token_bytes(cp->base.a->tok, f->toks[i], &bl);
        if (!b) bl = 0;
        if (!reserve((void **)&cp->ctx, &cp->ctx_cap, len + (int)bl + 1, 1)) return -1;
        memcpy(cp->ctx + len, b, bl);
        len += (int)bl;
        cp->tok_end[i] = len;
    }
    return len;
}

/* How token t reads under the query's attention: the query marked, later
 * tokens (which it cannot see) dim, the rest shaded by weight. */
static attr_t token_shade(const conv_pane *cp, const inspect_focus *f, int t, float scale) {
    if (t == f->query) return term_attr(UI_ROLE_SELECTION) | A_BOLD | A_UNDERLINE;
    if (t > f->query || cp->row[t] != cp->row[t]) return term_attr(UI_ROLE_DIM);
    return term_shade(view_level(cp->row[t], scale));
}

/* Row r of the text view: bytes [start, end) of the context (tk: the token
 * of byte start, advanced), a '↵' where the line ended in a newline. */
static void text_line(conv_pane *cp, int r, const ui_line *l, int len, int *tk, const inspect_focus *f, float scale) {
    pane *p = &cp->base;
    int cols = 0, maxc = p->w - 1;
    for (int i = (int)l->start; i <= (int)l->end && cols < maxc;) {
        while (*tk < f->n_tok - 1 && cp->tok_end[*tk] <= i) (*tk)++;
        attr_t at = token_shade(cp, f, *tk, scale);
        int c0 = cols;
        if (i == (int)l->end) { /* past the text: a newline token shows as ↵ */
            if (i < len && cp->ctx[i] == '\n') cols += term_put(p->win, r, cols, "\u21B5", 3, maxc - cols, at);
            i++;
        } else {
            uint32_t cp32;
            int nb = ui_utf8_decode(cp->ctx + i, (size_t)(len - i), &cp32);
            cols += term_put(p->win, r, cols, cp->ctx + i, (size_t)nb, maxc - cols, at);
            i += nb;
        }
        for (int c = c0; c < cols; c++) cp->cell_tok[r * p->w + c] = *tk;
    }
}

/* The text view: a header saying what it shows, then the context wrapped,
 * scrolled so that the query's line shows. */
static void draw_context(conv_pane *cp) {
    pane *p = &cp->base;
    app *a = p->a;
    inspect_focus f;
    inspector_focus(a->panes[PANE_INSPECTOR], &f);
    int len = context_text(cp, &f);
    if (len < 0 || !reserve((void **)&cp->cell_tok, &cp->cell_cap, p->h * p->w, sizeof *cp->cell_tok)) return;
    for (int i = 0; i < p->h * p->w; i++) cp->cell_tok[i] = -1;
    float scale = f.query >= 0 ? view_row(a, &f, f.query, cp->row) : 0;
    char who[64];
    inspector_head_name(a, &f, who, sizeof who);
    char line[256];
    if (f.n_tok == 0) {
        term_put_words(p->win, 0, 0, "text view: the model's context is empty (send a message, or /inspect TEXT)",
                       p->w - 1, term_attr(UI_ROLE_TITLE));
        return;
    }
    snprintf(line, sizeof line, "text view: the model's context, %d token%s, template text included", f.n_tok,
             f.n_tok == 1 ? "" : "s");
    term_put_words(p->win, 0, 0, line, p->w - 1, term_attr(UI_ROLE_TITLE));
    snprintf(line, sizeof line, "shade = attention of query #%d (marked), %s; click a token or \u2191\u2193 in the "
             "inspector", f.query, who);
    term_put_words(p->win, 1, 0, line, p->w - 1, term_attr(UI_ROLE_DIM));
    int tw = p->w - 1 > 1 ? p->w - 1 : 1, need = ui_wrap(cp->ctx, (size_t)len, tw, NULL, 0);
    if (!reserve((void **)&cp->wrap, &cp->wrap_cap, need, sizeof *cp->wrap)) return;
    ui_wrap(cp->ctx, (size_t)len, tw, cp->wrap, need);
    int qstart = f.query > 0 ? cp->tok_end[f.query - 1] : 0, ql = 0, h = p->h - 2;
    while (ql + 1 < need && (int)cp->wrap[ql + 1].start <= qstart) ql++;
    int first = need - h > 0 ? need - h : 0;
    if (ql < first) first = ql - h / 3 > 0 ? ql - h / 3 : 0; /* the query's line in view */
    int tk = 0;
    for (int r = 0; r < h && first + r < need; r++) text_line(cp, 2 + r, &cp->wrap[first + r], len, &tk, &f, scale);
}

int conv_token_at(const pane *p, int y, int x) {
    const conv_pane *cp = (const conv_pane *)p;
    int ly = y - p->y, lx = x - p->x;
    if (!cp->text_view || !p->win || ly < 0 || ly >= p->h || lx < 0 || lx >= p->w) return -1;
    return cp->cell_tok[ly * p->w + lx];
}

static void conv_draw(pane *p) {
    conv_pane *cp = (conv_pane *)p;
    werase(p->win);
    inspect_focus f;
    inspector_focus(p->a->panes[PANE_INSPECTOR], &f);
    cp->text_view = f.view == INSPECT_TEXT;
    if (cp->text_view) {
        draw_context(cp);
        return;
    }
    int n = conv_layout(cp, p->w - 1);
    int h = cp->confidence && p->h > 2 ? p->h - 1 : p->h; /* the legend's row */
    if (h < p->h) conf_legend(p);
    int max_scroll = n - h > 0 ? n - h : 0;
    if (cp->scroll > max_scroll) cp->scroll = max_scroll;
    int first = n - h - cp->scroll;
    if (first < 0) first = 0;
    if (n == 0) draw_intro(p);
    for (int r = 0; r < h && first + r < n; r++) {
        const conv_line *l = &cp->lines[first + r];
        if (l->turn == LINE_BLANK) continue;
        if (l->turn == LINE_SYSTEM_LABEL) {
            int c = term_printf(p->win, r, 0, p->w - 1, term_attr(UI_ROLE_DIM) | A_BOLD, "system");
            term_printf(p->win, r, c, p->w - 1 - c, term_attr(UI_ROLE_DIM), " (/system changes it)");
            continue;
        }
        if (l->turn == LINE_SYSTEM) {
            term_put(p->win, r, l->indent, gpt2_session_system(p->a->s) + l->start, l->end - l->start,
                     p->w - 1 - l->indent, term_attr(UI_ROLE_DIM));
            continue;
        }
        if (l->turn < 0) {
            draw_label(p, r, l);
            continue;
        }
        gpt2_turn t;
        gpt2_session_turn(p->a->s, l->turn, &t);
        conv_draw_text(cp, r, l->indent, p->w - 1 - l->indent, l->turn, &t, l->start, l->end);
    }
    if (cp->scroll > 0)
        term_printf(p->win, 0, p->w - 12 > 0 ? p->w - 12 : 0, 11, term_attr(UI_ROLE_NOTICE), "[+%d lines]", cp->scroll);
}

void conv_scroll(pane *p, int lines) {
    conv_pane *cp = (conv_pane *)p;
    long s = (long)cp->scroll + lines; /* the top is clamped when drawn, knowing the lines */
    cp->scroll = s < 0 ? 0 : s > (1 << 28) ? 1 << 28 : (int)s;
}

int conv_toggle_confidence(pane *p) {
    conv_pane *cp = (conv_pane *)p;
    return cp->confidence = !cp->confidence;
}

static int conv_key(pane *p, int key, int is_code) {
    int page = p->h > 2 ? p->h - 1 : 1;
    if (!is_code) return PANE_IGNORED;
    switch (key) {
    case KEY_UP: conv_scroll(p, 1); return PANE_REDRAW;
    case KEY_DOWN: conv_scroll(p, -1); return PANE_REDRAW;
    case KEY_PPAGE: conv_scroll(p, page); return PANE_REDRAW;
    case KEY_NPAGE: conv_scroll(p, -page); return PANE_REDRAW;
    case KEY_HOME: conv_scroll(p, 1 << 28); return PANE_REDRAW;
    case KEY_END: conv_scroll(p, -(1 << 28)); return PANE_REDRAW;
    default: return PANE_IGNORED;
    }
}

static void conv_free(pane *p) {
    conv_pane *cp = (conv_pane *)p;
    free(cp->lines);
    free(cp->wrap);
    free(cp->ctx), free(cp->tok_end), free(cp->cell_tok), free(cp->row);
    pane_release(p);
}

static const pane_ops conv_ops = {
    .name = "conversation", .draw = conv_draw, .key = conv_key, .resize = pane_place, .free = conv_free};

pane *conv_pane_new(app *a) {
    conv_pane *cp = calloc(1, sizeof *cp);
    if (!cp) return NULL;
    cp->base = (pane){.ops = &conv_ops, .a = a};
    if (!(cp->row = malloc((size_t)istore_n_ctx(a->store) * sizeof *cp->row))) {
        free(cp);
        return NULL;
    }
    return &cp->base;
}
