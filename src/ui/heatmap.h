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

/* The ramp level (0 .. n_levels - 1) for an attention weight in [0, 1]: square
 * root scale so that small weights stay visible; level 0 only for exactly 0
 * (and NaN). n_levels >= 2. */
int ui_heat_level(float w, int n_levels);

/* The k largest entries of row (n of them): their indices into idx and weights
 * into w, largest first, ties to the lower index. Returns min(k, n). */
int ui_top_entries(const float *row, int n, int k, int *idx, float *w);

#endif
