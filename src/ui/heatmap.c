/* heatmap.c — which cells of an attention matrix a pane shows, and how dark (no curses). */
#include <math.h>

#include "ui/heatmap.h"

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void ui_heat_window(int n, int rows, int cols, int scroll, int cursor, ui_heat_view *v) {
    if (rows < 0) rows = 0;
    if (cols < 0) cols = 0;
    *v = (ui_heat_view){.cursor = -1};
    if (n <= 0 || rows == 0 || cols == 0) return;
    int nr = rows < n ? rows : n;
    int max_scroll = n - nr;
    scroll = clampi(scroll, 0, max_scroll);
    int row0 = n - nr - scroll;
    if (cursor < 0 || cursor >= n) cursor = cursor < 0 ? n - 1 : n - 1;
    if (cursor < row0) row0 = cursor;
    if (cursor >= row0 + nr) row0 = cursor - nr + 1;
    v->row0 = row0;
    v->n_rows = nr;
    v->scroll = n - nr - row0;
    v->cursor = cursor;
    /* keys: causal, so the last shown query sees keys 0 .. row0 + nr - 1 */
    int last_key = row0 + nr - 1;
    int nc = cols < last_key + 1 ? cols : last_key + 1;
    int col0 = last_key + 1 - nc;
    /* keep the cursor row's own diagonal visible when it is older */
    if (cursor < col0) col0 = cursor;
    v->col0 = col0;
    v->n_cols = nc;
}

int ui_heat_key_window(const float *mass, int n, int cols) {
    if (cols >= n) return 0;
    double sum = 0, best = -1;
    int best0 = n - cols;
    for (int k = 0; k < n; k++) {
        sum += mass[k] == mass[k] ? mass[k] : 0;
        if (k >= cols) sum -= mass[k - cols] == mass[k - cols] ? mass[k - cols] : 0;
        if (k >= cols - 1 && sum > best + 1e-9) best = sum, best0 = k - cols + 1;
    }
    return best > 2 * sum + 1e-9 ? best0 : n - cols; /* sum: the last window's */
}

int ui_heat_level(float w, int n_levels) {
    if (n_levels < 2) n_levels = 2;
    if (!(w > 0)) return 0;
    if (w > 1) w = 1;
    int l = 1 + (int)(sqrtf(w) * (float)(n_levels - 1));
    return l > n_levels - 1 ? n_levels - 1 : l;
}

int ui_top_entries(const float *row, int n, int k, int *idx, float *w) {
    int m = 0;
    if (k > n) k = n;
    for (int j = 0; j < n; j++) {
        float x = row[j] == row[j] ? row[j] : -1.0f;
        if (m == k && !(x > w[m - 1])) continue;
        int p = m < k ? m++ : m - 1;
        while (p > 0 && x > w[p - 1]) {
            w[p] = w[p - 1];
            idx[p] = idx[p - 1];
            p--;
        }
        w[p] = x;
        idx[p] = j;
    }
    return m;
}

float ui_heat_level_floor(int level, int n_levels) {
    if (n_levels < 2) n_levels = 2;
    if (level <= 1) return 0;
    if (level > n_levels - 1) level = n_levels - 1;
    float x = (float)(level - 1) / (float)(n_levels - 1);
    return x * x;
}

float ui_heat_scaled(float w, float row_max) {
    if (w != w || row_max <= 0) return w;
    float x = w / row_max;
    return x > 1 ? 1 : x;
}

float ui_row_max(const float *row, int n) {
    float m = 0;
    for (int i = 0; i < n; i++)
        if (row[i] > m) m = row[i];
    return m;
}

int ui_bin_size(int n, int cells) {
    if (n <= 0) return 1;
    if (cells <= 0) return n;
    int k = (n + cells - 1) / cells;
    return k < 1 ? 1 : k;
}

int ui_cell_scale(int nb, int cols, int half_rows) {
    if (nb <= 0) return 1;
    int s = cols / nb < half_rows / nb ? cols / nb : half_rows / nb;
    return s < 1 ? 1 : s;
}

int ui_axis_step(int len, int s) {
    if (s < 1) s = 1;
    for (int step = 1;; step *= 10) {
        if (step * s >= len + 2) return step;
        if (2 * step * s >= len + 2) return 2 * step;
        if (5 * step * s >= len + 2) return 5 * step;
    }
}

int ui_bin_max(const float *row, int n, int k, float *out, int accumulate) {
    if (k < 1) k = 1;
    int nb = n > 0 ? (n + k - 1) / k : 0;
    for (int b = 0; b < nb; b++) {
        float m = NAN;
        for (int j = b * k; j < n && j < (b + 1) * k; j++)
            if (row[j] == row[j] && !(m >= row[j])) m = row[j];
        if (accumulate && out[b] == out[b] && !(m > out[b])) continue;
        out[b] = m;
    }
    return nb;
}
