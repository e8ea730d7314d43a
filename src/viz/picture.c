/* picture.c — the attention heatmap as a picture (viz/picture.h): laid out
 * once into a list of rectangles, lines and texts, then written by one of two
 * small back ends: SVG by hand, PNG through cairo. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef GPTSCOPE_HAVE_CAIRO
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#endif

#include "gpt2_fileio.h"
#include "viz/export.h"
#include "viz/picture.h"

/* --- colours and labels ---------------------------------------------------- */

unsigned viz_colormap(double t) {
    /* matplotlib's viridis at 0, 0.1, ..., 1 */
    static const unsigned anchors[11] = {0x440154, 0x482475, 0x414487, 0x355f8d, 0x2a788e, 0x21918c,
                                         0x22a884, 0x44bf70, 0x7ad151, 0xbddf26, 0xfde725};
    if (!(t > 0)) t = 0;
    if (t > 1) t = 1;
    const int i = t >= 1 ? 9 : (int)(t * 10);
    const double f = t * 10 - i;
    unsigned rgb = 0;
    for (int shift = 16; shift >= 0; shift -= 8) {
        const double a = (anchors[i] >> shift) & 0xff, b = (anchors[i + 1] >> shift) & 0xff;
        rgb |= (unsigned)lround(a + (b - a) * f) << shift;
    }
    return rgb;
}

char *viz_token_label(const char *bytes, size_t n, int max_chars, char *out, size_t cap) {
    out[0] = '\0';
    if (n == 0) snprintf(out, cap, "\xe2\x88\x85"); /* ∅ */
    else gpt2_token_escape(bytes, n, out, cap);
    /* cut by characters (UTF-8 lead bytes) */
    int chars = 0;
    for (size_t i = 0; out[i]; i++) {
        if (((unsigned char)out[i] & 0xC0) == 0x80) continue;
        if (++chars == max_chars && strlen(out + i) > 1 && cap > i + 4) {
            size_t len = 1;
            while (((unsigned char)out[i + len] & 0xC0) == 0x80) len++;
            if (out[i + len]) memcpy(out + i, "\xe2\x80\xa6", 4); /* … */
            break;
        }
    }
    return out;
}

/* Characters (not bytes) of a UTF-8 string: widths are estimated from them. */
static int n_chars(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* --- the figure: what both back ends draw ------------------------------------ */

typedef enum { ITEM_RECT, ITEM_LINE, ITEM_TEXT } item_kind;
enum { ANCHOR_START, ANCHOR_MIDDLE, ANCHOR_END };

typedef struct {
    item_kind kind;
    double x, y, w, h;  /* rect: corner and size; line: from (x, y) to (x + w, y + h); text: anchor point */
    unsigned rgb;
    double size;        /* text: font size */
    int anchor, vertical, bold;
    int q, k;           /* a matrix cell's query and key, else -1 */
    const char *text;   /* text: a caller's string, or NULL for own */
    char own[24];
} item;

typedef struct {
    item *v;
    size_t n, cap;
    int oom;
    double width, height;
} figure;

static item *add_item(figure *f, item_kind kind, double x, double y, double w, double h, unsigned rgb) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 256;
        item *v = realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->oom = 1;
            return NULL;
        }
        f->v = v, f->cap = cap;
    }
    item *it = &f->v[f->n++];
    *it = (item){.kind = kind, .x = x, .y = y, .w = w, .h = h, .rgb = rgb, .q = -1, .k = -1};
    return it;
}

static void add_text(figure *f, double x, double y, double size, int anchor, int vertical, const char *text) {
    item *it = add_item(f, ITEM_TEXT, x, y, 0, 0, 0x222222);
    if (!it) return;
    it->size = size, it->anchor = anchor, it->vertical = vertical, it->text = text;
}

static void add_frame(figure *f, double x, double y, double w, double h) {
    add_item(f, ITEM_LINE, x, y, w, 0, 0x333333);
    add_item(f, ITEM_LINE, x, y + h, w, 0, 0x333333);
    add_item(f, ITEM_LINE, x, y, 0, h, 0x333333);
    add_item(f, ITEM_LINE, x + w, y, 0, h, 0x333333);
}

enum { MARGIN = 16, TITLE_SIZE = 14, NOTE_SIZE = 11, BAR_W = 14, BAR_STEPS = 64 };
static const double CHAR_W = 0.6; /* DejaVu Sans Mono's advance, in ems */

typedef struct {
    int T, cell, step;  /* a label every step positions */
    double fs, label_w; /* label font size; the widest label */
    double x0, y0;      /* the matrix's top-left corner */
} layout;

static layout plan(const viz_heatmap *h) {
    layout L = {.T = h->T};
    L.cell = h->T > 0 ? 560 / h->T : 22;
    L.cell = L.cell < 4 ? 4 : L.cell > 22 ? 22 : L.cell;
    L.step = (9 + L.cell - 1) / L.cell;
    L.fs = fmin(11, L.cell * L.step - 1);
    int widest = 1;
    for (int i = 0; i < h->T; i += L.step) widest = fmax(widest, n_chars(h->labels[i]));
    L.label_w = widest * CHAR_W * L.fs;
    L.x0 = ceil(MARGIN + NOTE_SIZE + 8 + L.label_w + 6);
    L.y0 = ceil(MARGIN + TITLE_SIZE + 8 + NOTE_SIZE + 12);
    return L;
}

static void draw_cells(figure *f, const viz_heatmap *h, const layout *L, double vmax) {
    for (int q = 0; q < h->T; q++)
        for (int k = 0; k < h->T; k++) {
            const double v = h->w[(size_t)q * h->T + k];
            item *it = add_item(f, ITEM_RECT, L->x0 + k * L->cell, L->y0 + q * L->cell, L->cell, L->cell,
                                k > q ? 0xeeeeee : viz_colormap(v / vmax));
            if (it) it->q = q, it->k = k;
        }
    add_frame(f, L->x0, L->y0, (double)h->T * L->cell, (double)h->T * L->cell);
}

static void draw_labels(figure *f, const viz_heatmap *h, const layout *L) {
    const double side = (double)h->T * L->cell, nudge = 0.35 * L->fs;
    for (int i = 0; i < h->T; i += L->step) {
        const double mid = (i + 0.5) * L->cell;
        add_text(f, L->x0 - 4, L->y0 + mid + nudge, L->fs, ANCHOR_END, 0, h->labels[i]);
        add_text(f, L->x0 + mid + nudge, L->y0 + side + 4, L->fs, ANCHOR_END, 1, h->labels[i]);
    }
    add_text(f, MARGIN + NOTE_SIZE, L->y0 + side / 2, NOTE_SIZE, ANCHOR_MIDDLE, 1, "query");
    add_text(f, L->x0 + side / 2, L->y0 + side + 4 + L->label_w + 6 + NOTE_SIZE, NOTE_SIZE, ANCHOR_MIDDLE, 0, "key");
}

/* The colour bar right of the matrix, its ticks (0, 1/4 .. of vmax) and name; returns its right edge. */
static double draw_bar(figure *f, const layout *L, double vmax) {
    const double bx = L->x0 + (double)L->T * L->cell + 24, by = L->y0, bh = fmax((double)L->T * L->cell, 160);
    for (int i = 0; i < BAR_STEPS; i++)
        add_item(f, ITEM_RECT, bx, by + bh * i / BAR_STEPS, BAR_W, bh / BAR_STEPS + 0.5,
                 viz_colormap(1.0 - (i + 0.5) / BAR_STEPS));
    add_frame(f, bx, by, BAR_W, bh);
    for (int i = 0; i <= 4; i++) {
        const double y = by + bh * (1 - i / 4.0);
        add_item(f, ITEM_LINE, bx + BAR_W, y, 4, 0, 0x333333);
        item *it = add_item(f, ITEM_TEXT, bx + BAR_W + 7, y + 0.35 * NOTE_SIZE, 0, 0, 0x222222);
        if (it) it->size = NOTE_SIZE, snprintf(it->own, sizeof it->own, "%.3g", vmax * i / 4);
    }
    const double right = bx + BAR_W + 7 + 5 * CHAR_W * NOTE_SIZE + 6;
    add_text(f, right + NOTE_SIZE, by + bh / 2, NOTE_SIZE, ANCHOR_MIDDLE, 1, "attention weight");
    f->height = fmax(f->height, by + bh + MARGIN);
    return right + NOTE_SIZE + 4;
}

static void build(figure *f, const viz_heatmap *h) {
    const layout L = plan(h);
    const double vmax = h->vmax > 0 ? h->vmax : 1;
    add_item(f, ITEM_RECT, 0, 0, 0, 0, 0xffffff); /* the background: sized below */
    item *title = add_item(f, ITEM_TEXT, MARGIN, MARGIN + TITLE_SIZE, 0, 0, 0x000000);
    if (title) title->size = TITLE_SIZE, title->bold = 1, title->text = h->title;
    add_text(f, MARGIN, MARGIN + TITLE_SIZE + 8 + NOTE_SIZE, NOTE_SIZE, ANCHOR_START, 0,
             "rows: queries, columns: keys; grey: future keys (masked)");
    draw_cells(f, h, &L, vmax);
    draw_labels(f, h, &L);
    f->height = L.y0 + (double)h->T * L.cell + 4 + L.label_w + 6 + NOTE_SIZE + 4 + MARGIN;
    const double right = draw_bar(f, &L, vmax);
    const double title_w = MARGIN + CHAR_W * TITLE_SIZE * n_chars(h->title ? h->title : "") + MARGIN;
    f->width = ceil(fmax(fmax(right + MARGIN, title_w), MARGIN + 56 * CHAR_W * NOTE_SIZE + MARGIN));
    f->height = ceil(f->height);
    if (!f->oom) f->v[0].w = f->width, f->v[0].h = f->height;
}

static const char *text_of(const item *it) { return it->text ? it->text : it->own; }

/* --- SVG ------------------------------------------------------------------- */

static void svg_escaped(FILE *out, const char *s) {
    for (; *s; s++) switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out);
        }
}

static void svg_item(FILE *out, const item *it) {
    static const char *const anchors[] = {"start", "middle", "end"};
    switch (it->kind) {
    case ITEM_RECT:
        fprintf(out, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"#%06x\"", it->x, it->y, it->w, it->h,
                it->rgb);
        if (it->q >= 0) fprintf(out, " data-q=\"%d\" data-k=\"%d\"", it->q, it->k);
        fputs("/>\n", out);
        break;
    case ITEM_LINE:
        fprintf(out, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#%06x\" stroke-width=\"1\"/>\n", it->x,
                it->y, it->x + it->w, it->y + it->h, it->rgb);
        break;
    case ITEM_TEXT:
        fprintf(out, "<text x=\"%g\" y=\"%g\" font-size=\"%g\" text-anchor=\"%s\" fill=\"#%06x\"%s", it->x, it->y,
                it->size, anchors[it->anchor], it->rgb, it->bold ? " font-weight=\"bold\"" : "");
        if (it->vertical) fprintf(out, " transform=\"rotate(-90 %g %g)\"", it->x, it->y);
        fputs(">", out);
        svg_escaped(out, text_of(it));
        fputs("</text>\n", out);
        break;
    }
}

static gpt2_status put_svg(FILE *out, void *user, gpt2_error *err) {
    const figure *f = user;
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
            "font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" shape-rendering=\"crispEdges\">\n",
            f->width, f->height, f->width, f->height);
    for (size_t i = 0; i < f->n; i++) svg_item(out, &f->v[i]);
    fputs("</svg>\n", out);
    return GPT2_OK;
}

/* --- PNG (cairo) ------------------------------------------------------------ */

int viz_png_available(void) {
#ifdef GPTSCOPE_HAVE_CAIRO
    return 1;
#else
    return 0;
#endif
}

#ifdef GPTSCOPE_HAVE_CAIRO
enum { PNG_SCALE = 2 };

static void cairo_rgb(cairo_t *cr, unsigned rgb) {
    cairo_set_source_rgb(cr, (rgb >> 16 & 0xff) / 255.0, (rgb >> 8 & 0xff) / 255.0, (rgb & 0xff) / 255.0);
}

static void cairo_item(cairo_t *cr, const item *it) {
    cairo_rgb(cr, it->rgb);
    if (it->kind == ITEM_RECT) {
        cairo_rectangle(cr, it->x, it->y, it->w, it->h);
        cairo_fill(cr);
    } else if (it->kind == ITEM_LINE) {
        cairo_move_to(cr, it->x, it->y);
        cairo_line_to(cr, it->x + it->w, it->y + it->h);
        cairo_stroke(cr);
    } else {
        cairo_select_font_face(cr, "DejaVu Sans Mono", CAIRO_FONT_SLANT_NORMAL,
                               it->bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
        cairo_set_font_size(cr, it->size);
        cairo_text_extents_t ext;
        cairo_text_extents(cr, text_of(it), &ext);
        cairo_save(cr);
        cairo_translate(cr, it->x, it->y);
        if (it->vertical) cairo_rotate(cr, -M_PI / 2);
        cairo_move_to(cr, it->anchor == ANCHOR_START ? 0 : it->anchor == ANCHOR_MIDDLE ? -ext.x_advance / 2 : -ext.x_advance, 0);
        cairo_show_text(cr, text_of(it));
        cairo_restore(cr);
    }
}

static cairo_status_t png_out(void *closure, const unsigned char *data, unsigned int len) {
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static gpt2_status put_png(FILE *out, void *user, gpt2_error *err) {
    const figure *f = user;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)f->width * PNG_SCALE,
                                                    (int)f->height * PNG_SCALE);
    cairo_t *cr = cairo_create(s);
    cairo_scale(cr, PNG_SCALE, PNG_SCALE);
    cairo_set_line_width(cr, 1);
    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i].kind == ITEM_RECT) cairo_set_antialias(cr, f->v[i].q >= 0 ? CAIRO_ANTIALIAS_NONE : CAIRO_ANTIALIAS_DEFAULT);
        cairo_item(cr, &f->v[i]);
    }
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png_stream(s, png_out, out);
    cairo_surface_destroy(s);
    /* no cairo object is left: its font caches (fontconfig patterns) go too, so that
     * nothing drawn here outlives the picture (LeakSanitizer reports them otherwise) */
    cairo_debug_reset_static_data();
    FcFini();
    if (st != CAIRO_STATUS_SUCCESS) return viz_fail(err, GPT2_ERR_IO, "drawing the PNG: %s", cairo_status_to_string(st));
    return GPT2_OK;
}
#endif

gpt2_status viz_heatmap_write(const char *path, const viz_heatmap *h, gpt2_error *err) {
    const viz_format fmt = viz_format_of(path);
    if (fmt != VIZ_FORMAT_SVG && fmt != VIZ_FORMAT_PNG)
        return viz_fail(err, GPT2_ERR_INVALID_ARG, "%s: a picture is written as .svg or .png (the name's ending says which)",
                        path);
    if (fmt == VIZ_FORMAT_PNG && !viz_png_available())
        return viz_fail(err, GPT2_ERR_INVALID_ARG, "%s: PNG pictures need gptscope built with cairo; SVG works without", path);
    figure f = {0};
    build(&f, h);
    gpt2_status st = f.oom ? viz_fail(err, GPT2_ERR_NOMEM, "%s: out of memory drawing the picture", path) : GPT2_OK;
#ifdef GPTSCOPE_HAVE_CAIRO
    if (st == GPT2_OK && fmt == VIZ_FORMAT_PNG) st = gpt2_fileio_write_atomic(path, put_png, &f, err);
#endif
    if (st == GPT2_OK && fmt == VIZ_FORMAT_SVG) st = gpt2_fileio_write_atomic(path, put_svg, &f, err);
    free(f.v);
    return st;
}

gpt2_status viz_attention_picture(const char *path, const viz_attention *a, int n_head, gpt2_error *err) {
    enum { LABEL_CAP = 96 };
    char *store = malloc((size_t)a->T * LABEL_CAP), title[512];
    const char **labels = malloc((size_t)a->T * sizeof *labels);
    gpt2_status st = GPT2_OK;
    if (!store || !labels) st = viz_fail(err, GPT2_ERR_NOMEM, "out of memory for %d token labels", a->T);
    for (int i = 0; st == GPT2_OK && i < a->T; i++) {
        size_t bl = 0;
        const char *b = gpt2_tokenizer_token_bytes(a->tok, a->ids[i], &bl);
        labels[i] = viz_token_label(b ? b : "", b ? bl : 0, 16, store + (size_t)i * LABEL_CAP, LABEL_CAP);
    }
    /* the name as the messages show it: control bytes and bytes that are not
       UTF-8 as \xNN, so that the SVG stays XML and the PNG's text UTF-8 */
    char model[200], ab[200], what[64];
    gpt2_text_escape(a->model ? a->model : "model", strlen(a->model ? a->model : "model"), model, sizeof model);
    viz_ablation_text(a->ablated, ab, sizeof ab);
    if (a->head >= 0) snprintf(what, sizeof what, "head %d", a->head);
    else snprintf(what, sizeof what, "mean of %d heads", n_head);
    snprintf(title, sizeof title, "%s: layer %d, %s%s%s", model, a->layer, what, ab[0] ? "; ablated " : "", ab);
    viz_heatmap h = {.title = title, .labels = labels, .T = a->T, .w = a->w};
    if (st == GPT2_OK) st = viz_heatmap_write(path, &h, err);
    free(labels);
    free(store);
    return st;
}
