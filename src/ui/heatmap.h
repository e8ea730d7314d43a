/* heatmap.h — the attention heatmap's arithmetic: which rows
 * and columns fit a pane, weight -> colour-ramp level, the top keys of a row.
 * Pure: no curses, no terminal; unit-tested on its own (tests/test_ui_*.c). */
#ifndef GPTSCOPE_UI_HEATMAP_H
#define GPTSCOPE_UI_HEATMAP_H

#include <stddef.h>
#include <stdint.h>

/* ---- heatmap ------------------------------------------------------------ */

/* Which part of an n x n causal attention matrix a pane of rows x cols cells
 * shows (one cell per query row and key column). Without scrolling the window
 * follows the newest token: the last rows queries, and keys ending at the last
 * query shown. scroll moves the window back by that many rows (clamped). The
 * cursor (a query index, -1 = the newest) is clamped into [0, n) and the
 * window moves to keep it visible. */
typedef struct {
    int row0, n_rows; /* queries row0 .. row0 + n_rows - 1 */
    int col0, n_cols; /* keys col0 .. col0 + n_cols - 1 */
    int cursor;       /* the query under the cursor, -1 when n is 0 */
    int scroll;       /* the scroll actually applied */
} ui_heat_view;

void ui_heat_window(int n, int rows, int cols, int scroll, int cursor, ui_heat_view *v);

/* The first of cols keys to show, given mass[k] (k < n), the attention the
 * shown queries pay key k: the latest window (the diagonal, n - cols) unless
 * one further back holds at least twice its mass (a head that looks far
 * back; the earliest such maximum); attention spread alike over every
 * window stays on the diagonal. 0 when cols >= n. */
int ui_heat_key_window(const float *mass, int n, int cols);

/* The ramp level (0 .. n_levels - 1) for an attention weight in [0, 1]: square
 * root scale so that small weights stay visible; level 0 only for exactly 0
 * (and NaN). n_levels >= 2. */
int ui_heat_level(float w, int n_levels);

/* The lowest weight that level (1 .. n_levels - 1) stands for under
 * ui_heat_level: ((level - 1) / (n_levels - 1))^2 (level 1: anything above
 * 0); 0 for level 0. The legend's tick numbers. */
float ui_heat_level_floor(int level, int n_levels);

/* A weight as the ramp sees it under a scale: global (row_max <= 0: w as it
 * is, weights being in [0, 1]) or per row (w / row_max, so that each row's
 * largest weight is 1). NaN stays NaN. */
float ui_heat_scaled(float w, float row_max);

/* The largest finite entry of row (n of them; NaN skipped), 0 if none. */
float ui_row_max(const float *row, int n);

/* ---- overview: the whole matrix binned -------------------------------- */

/* Tokens per cell so that n tokens fit into cells cells: ceil(n / cells),
 * at least 1 (0 cells: n). Rows and columns use the same size, so the
 * diagonal stays a diagonal. */
int ui_bin_size(int n, int cells);

/* How many cells wide and half-rows tall each of nb bins is drawn so that
 * nb x nb bins fill cols columns by half_rows half-rows without losing the
 * square: min(cols / nb, half_rows / nb), at least 1. A short context then
 * fills the view instead of a corner of it. */
int ui_cell_scale(int nb, int cols, int half_rows);

/* The step, in bins, between key-axis numbers of len characters when a bin
 * is s columns wide: the smallest of 1, 2, 5, 10, 20, 50, ... whose labels
 * (len + 2 columns each) keep a gap of two. */
int ui_axis_step(int len, int s);

/* Max-pools row (n entries, NaN skipped) into bins of k: bin b covers
 * entries b*k .. b*k + k - 1. accumulate 0: out[b] = that maximum (NaN for a
 * bin with no finite entry); 1: out[b] = max(out[b], it), a NaN out[b]
 * replaced. Returns the bins written, ceil(n / k). Max, not mean: one sharp
 * weight in a bin stays visible. */
int ui_bin_max(const float *row, int n, int k, float *out, int accumulate);

/* The k largest entries of row (n of them): their indices into idx and weights
 * into w, largest first, ties to the lower index. Returns min(k, n). */
int ui_top_entries(const float *row, int n, int k, int *idx, float *w);

#endif
