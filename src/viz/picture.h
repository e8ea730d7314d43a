/* viz/picture.h — one attention matrix as a picture to put in a paper: the
 * heatmap (rows = queries, columns = keys) with the tokens on both axes, a
 * title, and a colour bar with its numbers. SVG (text stays text: labels
 * can be searched and edited) always; PNG (twice the SVG's size in pixels)
 * when gptscope is built with cairo (viz_png_available).
 *
 *     const char *labels[T];  // viz_token_label of each token
 *     viz_heatmap h = {.title = "shakespeare: layer 1, head 2", .labels = labels, .T = T, .w = w};
 *     if (viz_heatmap_write("attn.svg", &h, &err) != GPT2_OK) ...  // written atomically
 *
 * Layout, in SVG user units (PNG pixels / 2): each cell is a square of
 * `cell` units, cell = 560 / T cut to 4..22 and rounded down; the labels of
 * every position (or of every n-th one, where cells are too small for text);
 * keys future to a query (j > q, masked) in light grey. Colours: viridis
 * from 0 (dark violet) to vmax (yellow), 11 anchors interpolated linearly
 * (viz_colormap). In the SVG every cell is a <rect> with data-q and data-k.
 */
#ifndef GPTSCOPE_VIZ_PICTURE_H
#define GPTSCOPE_VIZ_PICTURE_H

#include <stddef.h>

#include "gpt2.h"
#include "viz/export.h"

typedef struct {
    const char *title;          /* one line, UTF-8 */
    const char *const *labels;  /* (T) token labels, UTF-8 */
    int T;
    const float *w;             /* (T, T), row q = query q; entries j > q are not read */
    float vmax;                 /* the colour scale's top; 0 means 1 */
} viz_heatmap;

/* Whether PNG pictures are built in (cairo). */
int viz_png_available(void);

/* viridis at t in [0, 1] (clamped; NaN reads 0) as 0xRRGGBB. */
unsigned viz_colormap(double t);

/* A token's bytes as a label a reader can see (gpt2_token_escape: space
 * "·", newline "↵", tab "→", other controls and bytes that are not UTF-8
 * \xNN), an empty token as "∅"; more than max_chars characters cut to
 * max_chars - 1 and "…". Returns out (cap bytes, NUL-terminated). */
char *viz_token_label(const char *bytes, size_t n, int max_chars, char *out, size_t cap);

/* Draws h into path as SVG or PNG by the name's ending (.svg, .png),
 * through gpt2_fileio_write_atomic. GPT2_ERR_INVALID_ARG for another ending
 * or PNG without cairo; GPT2_ERR_IO naming the path; the file is then as it was. */
gpt2_status viz_heatmap_write(const char *path, const viz_heatmap *h, gpt2_error *err);

/* The picture of one head's attention (or the mean, head -1, of n_head):
 * its tokens as labels, a title naming the model, layer and head. */
gpt2_status viz_attention_picture(const char *path, const viz_attention *a, int n_head, gpt2_error *err);

#endif
