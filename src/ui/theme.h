/* theme.h — colour themes: roles, colours, theme files
 * (parsing with errors that name the file and line) and colour conversion.
 * Pure: no curses, no terminal; unit-tested on its own (tests/test_ui_*.c). */
#ifndef GPTSCOPE_UI_THEME_H
#define GPTSCOPE_UI_THEME_H

#include <stddef.h>
#include <stdint.h>

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
/* 1 when text on background c should be dark (c is light: relative
 * luminance, sRGB-linearised, above 0.18, where black and white text have
 * about equal contrast), 0 when it should be light; -1 for the default
 * colour (unknown: keep the theme's text colour). */
int ui_color_is_light(ui_color c);
int ui_color_to_8(ui_color c);
uint32_t ui_index_to_rgb(int idx);

#endif
