/* ui_logic.h — the chat app's pure parts: no curses, no terminal, unit-tested
 * on their own (tests/test_ui_*.c).
 *
 *   - UTF-8 decoding and display widths (wcwidth; bad bytes show as U+FFFD, one column)
 *   - word wrapping into lines of at most W columns
 *   - heatmap windowing (which query rows and key columns fit the pane, following
 *     the newest token) and value -> ramp level mapping, top attended keys
 *   - probability bars
 *   - theme files: parsing (errors name the file and line) and colour conversion
 *
 * Widths depend on LC_CTYPE: the app (and the tests) call setlocale(LC_ALL, "")
 * or "C.UTF-8" first.
 */
#ifndef GPTSCOPE_UI_LOGIC_H
#define GPTSCOPE_UI_LOGIC_H

#include <stddef.h>
#include <stdint.h>

/* ---- UTF-8 and widths --------------------------------------------------- */

/* Decodes one character at s (n > 0 bytes available): returns the bytes it
 * takes (1..4) and stores the code point; an invalid or truncated sequence
 * takes 1 byte and decodes as U+FFFD. */
int ui_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Columns a code point takes on screen: 0 for combining marks, 2 for wide
 * characters, 1 for everything else printable; control characters (which the
 * app draws as a placeholder) count 1. */
int ui_cp_width(uint32_t cp);

/* Columns of len bytes of text (no line breaks assumed: '\n' counts 1). */
int ui_text_width(const char *s, size_t len);

/* Input arriving one byte at a time (keys, a paste), decoded as it comes.
 * Each byte yields 0, 1 or 2 code points: a character once its last byte is
 * in, U+FFFD for a byte that cannot begin or continue one (and then the byte
 * that showed it, if it begins a character itself). A valid byte is never
 * lost to an invalid one before it. */
typedef struct {
    unsigned char buf[4];
    int n, need; /* bytes held, bytes the held character takes */
} ui_utf8_input;

int ui_utf8_push(ui_utf8_input *in, unsigned char byte, uint32_t out[2]);

/* A character left incomplete (the input stopped): 1 and U+FFFD in *out; 0 if
 * nothing is held. */
int ui_utf8_flush(ui_utf8_input *in, uint32_t *out);

/* ---- word wrapping ------------------------------------------------------ */

typedef struct {
    size_t start, end; /* byte range [start, end) of the text; the '\n' or the
                          spaces at a break are not included */
    int cols;          /* display columns of the range */
} ui_line;

/* Wraps len bytes into lines of at most width columns (width >= 1): breaks at
 * '\n', else after the last space that fits, else inside a word (never inside
 * a character; a character wider than width gets a line of its own). Spaces at
 * a soft break are dropped. An empty text, and a text ending in '\n', end with
 * an empty line. Writes at most max lines to out (out may be NULL when max is
 * 0) and returns how many lines the whole text needs. */
int ui_wrap(const char *s, size_t len, int width, ui_line *out, int max);

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

/* ---- bars --------------------------------------------------------------- */

/* A bar of width cells for p in [0, 1] with eighth-block resolution
 * (U+2588..U+258F), padded with spaces to width cells: UTF-8 into buf (needs
 * 3 * width + 1 bytes). Returns buf. */
char *ui_bar(float p, int width, char *buf);

/* p as a percentage in 6 columns: " 12.3%", "100.0%", "  <0.1%" style
 * ("<0.1%" for 0 < p < 0.0005). Returns buf (needs 8 bytes). */
char *ui_percent(float p, char *buf);

/* ---- themes ------------------------------------------------------------- */

/* Colour roles the screen uses. */
typedef enum {
    UI_ROLE_TEXT = 0,
    UI_ROLE_DIM,
    UI_ROLE_USER,
    UI_ROLE_ASSISTANT,
    UI_ROLE_BORDER,
    UI_ROLE_TITLE,
    UI_ROLE_STATUS,
    UI_ROLE_SELECTION,
    UI_ROLE_INPUT,
    UI_ROLE_BAR,
    UI_ROLE_BAR_REMOVED,
    UI_ROLE_NOTICE,
    UI_ROLE_ERROR,
    UI_ROLE_CONF_LOW,
    UI_ROLE_CONF_MID,
    UI_ROLE_CONF_HIGH,
    UI_ROLE_DRAFT,     /* draft mode: a draft token the target accepted */
    UI_ROLE_DRAFT_FIX, /* draft mode: the target's correction where drafts were rejected */
    UI_ROLE_COUNT
} ui_role;

/* The role's name in theme files ("text", "bar-removed", ...). */
const char *ui_role_name(ui_role r);

/* A colour: the terminal's default, one of 256 indexed colours, or 24-bit RGB. */
typedef enum { UI_COLOR_DEFAULT = 0, UI_COLOR_INDEX, UI_COLOR_RGB } ui_color_kind;
typedef struct {
    ui_color_kind kind;
    uint32_t value; /* index 0..255, or 0xRRGGBB */
} ui_color;

enum { UI_ATTR_BOLD = 1, UI_ATTR_DIM = 2, UI_ATTR_UNDERLINE = 4, UI_ATTR_REVERSE = 8 };

typedef struct {
    ui_color fg, bg;
    int attrs; /* UI_ATTR_* */
} ui_style;

enum { UI_HEAT_MAX = 16 };

typedef struct {
    char name[64];
    ui_style role[UI_ROLE_COUNT];
    ui_color heat[UI_HEAT_MAX]; /* the heat ramp, low to high */
    int n_heat;                 /* 2 .. UI_HEAT_MAX */
} ui_theme;

/* The built-in default (the same as themes/dark.theme). */
void ui_theme_default(ui_theme *t);

/* Parses a theme file's text (see themes/README for the format) on top of the
 * default. On error returns -1 and writes "PATH:LINE: what was wrong" into
 * err (errlen bytes); 0 on success. */
int ui_theme_parse(const char *text, size_t len, const char *path, ui_theme *t, char *err, size_t errlen);

/* Loads NAME or PATH: an argument containing '/' or ending in ".theme" is a
 * path; otherwise themes_dir/NAME.theme. Errors as above (a missing file
 * names the path). */
int ui_theme_load(const char *name_or_path, const char *themes_dir, ui_theme *t, char *err, size_t errlen);

/* Parses one colour: "default", a name (black red green yellow blue magenta
 * cyan white, bright-NAME, grey), 0..255, or #rrggbb. Returns 0 on success. */
int ui_color_parse(const char *s, ui_color *c);

/* Nearest xterm-256 index of an RGB colour (the 6x6x6 cube or the grey ramp),
 * and the nearest of the 8 basic colours for any colour (-1 for default). */
int ui_rgb_to_256(uint32_t rgb);
int ui_color_to_8(ui_color c);
uint32_t ui_index_to_rgb(int idx);

#endif
