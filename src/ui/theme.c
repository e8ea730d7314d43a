/* theme.c — theme files: parsing, loading and colour conversion (no curses).
 *
 * Format (themes/README.md): one setting per line, '#' starts a comment.
 *     name = dark
 *     ROLE = FG [on BG] [bold] [dim] [underline] [reverse]
 *     heat = C1 C2 ... Cn          (2..16 colours, low to high)
 * Colours: default, black red green yellow blue magenta cyan white,
 * bright-NAME, grey, an index 0..255, or #rrggbb. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpt2_status.h"
#include "ui/theme.h"

static const char *role_names[UI_ROLE_COUNT] = {
    [UI_ROLE_TEXT] = "text",         [UI_ROLE_DIM] = "dim",
    [UI_ROLE_USER] = "user",         [UI_ROLE_ASSISTANT] = "assistant",
    [UI_ROLE_BORDER] = "border",     [UI_ROLE_TITLE] = "title",
    [UI_ROLE_STATUS] = "status",     [UI_ROLE_SELECTION] = "selection",
    [UI_ROLE_INPUT] = "input",       [UI_ROLE_BAR] = "bar",
    [UI_ROLE_BAR_REMOVED] = "bar-removed", [UI_ROLE_NOTICE] = "notice",
    [UI_ROLE_ERROR] = "error",       [UI_ROLE_CONF_LOW] = "conf-low",
    [UI_ROLE_CONF_MID] = "conf-mid", [UI_ROLE_CONF_HIGH] = "conf-high",
    [UI_ROLE_DRAFT] = "draft",       [UI_ROLE_DRAFT_FIX] = "draft-fix",
};

const char *ui_role_name(ui_role r) { return r < UI_ROLE_COUNT ? role_names[r] : "?"; }

static const char *basic_names[8] = {"black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"};

int ui_color_parse(const char *s, ui_color *c) {
    if (strcmp(s, "default") == 0) {
        *c = (ui_color){UI_COLOR_DEFAULT, 0};
        return 0;
    }
    if (strcmp(s, "grey") == 0 || strcmp(s, "gray") == 0) {
        *c = (ui_color){UI_COLOR_INDEX, 8};
        return 0;
    }
    for (int i = 0; i < 8; i++) {
        if (strcmp(s, basic_names[i]) == 0) {
            *c = (ui_color){UI_COLOR_INDEX, (uint32_t)i};
            return 0;
        }
        if (strncmp(s, "bright-", 7) == 0 && strcmp(s + 7, basic_names[i]) == 0) {
            *c = (ui_color){UI_COLOR_INDEX, (uint32_t)(8 + i)};
            return 0;
        }
    }
    if (s[0] == '#') {
        if (strlen(s) != 7) return -1;
        for (int i = 1; i < 7; i++)
            if (!isxdigit((unsigned char)s[i])) return -1;
        *c = (ui_color){UI_COLOR_RGB, (uint32_t)strtoul(s + 1, NULL, 16)};
        return 0;
    }
    if (isdigit((unsigned char)s[0])) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || *end || v < 0 || v > 255) return -1;
        *c = (ui_color){UI_COLOR_INDEX, (uint32_t)v};
        return 0;
    }
    return -1;
}

/* ---- colour conversion ---- */

static const uint32_t ansi16[16] = {0x000000, 0xcd0000, 0x00cd00, 0xcdcd00, 0x0000ee, 0xcd00cd,
                                    0x00cdcd, 0xe5e5e5, 0x7f7f7f, 0xff0000, 0x00ff00, 0xffff00,
                                    0x5c5cff, 0xff00ff, 0x00ffff, 0xffffff};
static const int cube[6] = {0, 95, 135, 175, 215, 255};

uint32_t ui_index_to_rgb(int idx) {
    if (idx < 0) return 0;
    if (idx < 16) return ansi16[idx];
    if (idx < 232) {
        int i = idx - 16;
        return (uint32_t)(cube[i / 36] << 16 | cube[(i / 6) % 6] << 8 | cube[i % 6]);
    }
    int g = 8 + 10 * (idx - 232);
    return (uint32_t)(g << 16 | g << 8 | g);
}

static long dist2(uint32_t a, uint32_t b) {
    long dr = (long)(a >> 16 & 255) - (long)(b >> 16 & 255);
    long dg = (long)(a >> 8 & 255) - (long)(b >> 8 & 255);
    long db = (long)(a & 255) - (long)(b & 255);
    return 2 * dr * dr + 4 * dg * dg + 3 * db * db;
}

int ui_rgb_to_256(uint32_t rgb) {
    int best = 16;
    long bd = -1;
    for (int i = 16; i < 256; i++) {
        long d = dist2(rgb, ui_index_to_rgb(i));
        if (bd < 0 || d < bd) bd = d, best = i;
    }
    return best;
}

int ui_color_to_8(ui_color c) {
    if (c.kind == UI_COLOR_DEFAULT) return -1;
    if (c.kind == UI_COLOR_INDEX && c.value < 8) return (int)c.value;
    if (c.kind == UI_COLOR_INDEX && c.value < 16) return (int)c.value - 8;
    uint32_t rgb = c.kind == UI_COLOR_RGB ? c.value : ui_index_to_rgb((int)c.value);
    /* the basic colour by thresholded channels; greys go to black or white */
    int r = (rgb >> 16 & 255) > 110, g = (rgb >> 8 & 255) > 110, b = (rgb & 255) > 110;
    return r | g << 1 | b << 2;
}

/* ---- defaults ---- */

static ui_color ix(int i) { return (ui_color){UI_COLOR_INDEX, (uint32_t)i}; }
static ui_color dflt(void) { return (ui_color){UI_COLOR_DEFAULT, 0}; }

void ui_theme_default(ui_theme *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "dark");
    for (int r = 0; r < UI_ROLE_COUNT; r++) t->role[r] = (ui_style){dflt(), dflt(), 0};
    t->role[UI_ROLE_TEXT].fg = ix(252);
    t->role[UI_ROLE_DIM].fg = ix(244);
    t->role[UI_ROLE_USER] = (ui_style){ix(75), dflt(), UI_ATTR_BOLD};
    t->role[UI_ROLE_ASSISTANT].fg = ix(222);
    t->role[UI_ROLE_BORDER].fg = ix(240);
    t->role[UI_ROLE_TITLE] = (ui_style){ix(117), dflt(), UI_ATTR_BOLD};
    t->role[UI_ROLE_STATUS] = (ui_style){ix(252), ix(236), 0};
    t->role[UI_ROLE_SELECTION] = (ui_style){ix(16), ix(117), 0};
    t->role[UI_ROLE_INPUT].fg = ix(255);
    t->role[UI_ROLE_BAR].fg = ix(114);
    t->role[UI_ROLE_BAR_REMOVED].fg = ix(239);
    t->role[UI_ROLE_NOTICE] = (ui_style){ix(221), dflt(), UI_ATTR_BOLD};
    t->role[UI_ROLE_ERROR] = (ui_style){ix(203), dflt(), UI_ATTR_BOLD};
    t->role[UI_ROLE_CONF_LOW].fg = ix(203);
    t->role[UI_ROLE_CONF_MID].fg = ix(221);
    t->role[UI_ROLE_CONF_HIGH].fg = ix(114);
    t->role[UI_ROLE_DRAFT].fg = ix(152);
    t->role[UI_ROLE_DRAFT_FIX].fg = ix(211);
    static const int heat[] = {233, 17, 18, 25, 31, 37, 79, 185, 220, 231};
    t->n_heat = (int)(sizeof heat / sizeof *heat);
    for (int i = 0; i < t->n_heat; i++) t->heat[i] = ix(heat[i]);
}

/* ---- parsing ---- */

/* prefix + the formatted message into err, escaped (gpt2_text_escape): the
 * path and the values quoted come from the user's files and must not reach
 * the terminal raw. */
static int theme_error(char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap) {
    char raw[1536];
    int o = snprintf(raw, sizeof raw, "%s", prefix);
    if (o >= 0 && (size_t)o < sizeof raw) vsnprintf(raw + o, sizeof raw - (size_t)o, fmt, ap);
    gpt2_text_escape(raw, strlen(raw), err, errlen);
    return -1;
}

static int load_error(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    theme_error(err, errlen, "", fmt, ap);
    va_end(ap);
    return -1;
}

/* Where a line is being parsed, for its error messages. */
typedef struct {
    const char *path;
    int lineno;
    char *err;
    size_t errlen;
    char glued[64]; /* the word glued to the '#' of the line's comment ("" if none) */
} line_ctx;

/* "PATH:LINE: message" */
static int fail(const line_ctx *c, const char *fmt, ...) {
    char where[1040];
    snprintf(where, sizeof where, "%.1024s:%d: ", c->path, c->lineno);
    va_list ap;
    va_start(ap, fmt);
    theme_error(c->err, c->errlen, where, fmt, ap);
    va_end(ap);
    return -1;
}

enum { MAX_WORDS = 24 };

#define COLOUR_FORMS "expected default, black, red, green, yellow, blue, magenta, cyan, white, bright-NAME, grey, 0..255 or #rrggbb"

/* A line whose value is missing but whose comment begins with a word glued to
 * the '#' ("text = #zzzzzz"): that word was meant as a colour, so say that. */
static int not_a_colour(const line_ctx *c, const char *key) {
    return fail(c, "%s: '#%s' is not a colour (" COLOUR_FORMS "; a '#' not followed by a hex digit starts a comment)",
                key, c->glued);
}

/* The next line of text from *pos into line (cap bytes), NUL-terminated. */
static int next_line(const char *text, size_t len, size_t *pos, char *line, size_t cap, const line_ctx *c) {
    size_t e = *pos;
    while (e < len && text[e] != '\n') e++;
    size_t ll = e - *pos;
    if (ll >= cap) return fail(c, "line longer than %zu bytes", cap - 1);
    memcpy(line, text + *pos, ll);
    line[ll] = '\0';
    *pos = e < len ? e + 1 : e;
    if (memchr(line, '\0', ll)) return fail(c, "NUL byte in the line");
    return 0;
}

/* Cuts the comment off: '#' starts one unless a hex digit follows it (a
 * #rrggbb colour). The word glued to its '#' goes to c->glued. */
static void strip_comment(char *line, line_ctx *c) {
    char *hash = strchr(line, '#');
    while (hash && isxdigit((unsigned char)hash[1])) hash = strchr(hash + 1, '#');
    c->glued[0] = '\0';
    if (hash) {
        sscanf(hash + 1, "%63[^ \t\r#]", c->glued);
        *hash = '\0';
    }
}

/* "KEY = V1 V2", "KEY= V1", "KEY=V1 V2": the key, and the values after it. */
static int split_setting(char *line, char *words[MAX_WORDS], char **key, char ***vals, int *nv, const line_ctx *c) {
    int nw = 0;
    *key = NULL;
    for (char *tok = strtok(line, " \t\r"); tok; tok = strtok(NULL, " \t\r")) {
        if (nw == MAX_WORDS) return fail(c, "too many words (at most %d)", MAX_WORDS);
        words[nw++] = tok;
    }
    if (nw == 0) return 0;
    *key = words[0];
    char *eq = strchr(*key, '=');
    int first = 1;
    if (eq) { /* "KEY=" glued, maybe with the first value glued too */
        *eq = '\0';
        if (eq[1]) words[0] = eq + 1, first = 0;
    } else {
        if (nw < 2 || strcmp(words[1], "=") != 0) return fail(c, "expected 'NAME = VALUE', found '%s'", *key);
        first = 2;
    }
    if (!**key) return fail(c, "missing name before '='");
    *vals = words + first;
    *nv = nw - first;
    return 0;
}

/* name = WORD: printable, short enough to be kept whole. */
static int parse_name(char **vals, int nv, ui_theme *th, const line_ctx *c) {
    if (nv != 1) return fail(c, "name: expected one word");
    size_t nl = strlen(vals[0]); /* a longer name would be cut, maybe inside a character */
    if (nl >= sizeof th->name) return fail(c, "name: expected at most %zu bytes, found %zu", sizeof th->name - 1, nl);
    char shown[sizeof th->name * 4];
    gpt2_text_escape(vals[0], strlen(vals[0]), shown, sizeof shown);
    if (strcmp(shown, vals[0]) != 0) /* the app shows the name: no control bytes */
        return fail(c, "name: '%s' has control characters or invalid UTF-8, expected printable text", vals[0]);
    snprintf(th->name, sizeof th->name, "%s", vals[0]);
    return 0;
}

/* heat = C1 C2 ...: the ramp, low to high. */
static int parse_heat(char **vals, int nv, ui_theme *th, const line_ctx *c) {
    if (nv < 2 || nv > UI_HEAT_MAX) return fail(c, "heat: expected 2 to %d colours, found %d", UI_HEAT_MAX, nv);
    for (int i = 0; i < nv; i++)
        if (ui_color_parse(vals[i], &th->heat[i]) != 0)
            return fail(c, "heat: '%s' is not a colour (" COLOUR_FORMS ")", vals[i]);
    th->n_heat = nv;
    return 0;
}

/* An attribute word's UI_ATTR_* bit; 0 if the word is not one. */
static int attr_bit(const char *w) {
    static const struct { const char *name; int bit; } attrs[] = {
        {"bold", UI_ATTR_BOLD}, {"dim", UI_ATTR_DIM}, {"underline", UI_ATTR_UNDERLINE}, {"reverse", UI_ATTR_REVERSE}};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++)
        if (strcmp(w, attrs[i].name) == 0) return attrs[i].bit;
    return 0;
}

/* ROLE = [FG] [on BG] [bold dim underline reverse]: into st. */
static int parse_style(const char *key, char **vals, int nv, ui_style *st, const line_ctx *c) {
    *st = (ui_style){dflt(), dflt(), 0};
    int have_fg = 0;
    for (int i = 0; i < nv; i++) {
        const char *w = vals[i];
        int bit = attr_bit(w);
        if (bit) {
            st->attrs |= bit;
        } else if (strcmp(w, "on") == 0) {
            if (i + 1 >= nv && c->glued[0]) return not_a_colour(c, key);
            if (i + 1 >= nv) return fail(c, "%s: 'on' needs a background colour", key);
            if (ui_color_parse(vals[++i], &st->bg) != 0)
                return fail(c, "%s: '%s' is not a colour (" COLOUR_FORMS ")", key, vals[i]);
        } else if (!have_fg) {
            if (ui_color_parse(w, &st->fg) != 0)
                return fail(c, "%s: '%s' is not a colour or attribute (" COLOUR_FORMS
                            "; attributes: bold, dim, underline, reverse)", key, w);
            have_fg = 1;
        } else {
            return fail(c, "%s: unexpected '%s' (background colours follow 'on')", key, w);
        }
    }
    return 0;
}

/* One line (comment already cut) applied to th. */
static int parse_setting(char *line, ui_theme *th, const line_ctx *c) {
    char *words[MAX_WORDS], *key, **vals = NULL;
    int nv = 0;
    if (split_setting(line, words, &key, &vals, &nv, c) != 0) return -1;
    if (!key) return 0; /* blank */
    if (nv < 1 && c->glued[0] && strcmp(key, "name") != 0) return not_a_colour(c, key);
    if (nv < 1) return fail(c, "'%s' has no value", key);
    if (strcmp(key, "name") == 0) return parse_name(vals, nv, th, c);
    if (strcmp(key, "heat") == 0) return parse_heat(vals, nv, th, c);
    int r = 0;
    while (r < UI_ROLE_COUNT && strcmp(role_names[r], key) != 0) r++;
    if (r == UI_ROLE_COUNT) return fail(c, "unknown setting '%s'", key);
    return parse_style(key, vals, nv, &th->role[r], c);
}

int ui_theme_parse(const char *text, size_t len, const char *path, ui_theme *t, char *err, size_t errlen) {
    ui_theme th;
    ui_theme_default(&th);
    line_ctx c = {.path = path, .err = err, .errlen = errlen};
    char line[1024];
    for (size_t pos = 0; pos < len;) {
        c.lineno++;
        if (next_line(text, len, &pos, line, sizeof line, &c) != 0) return -1;
        strip_comment(line, &c);
        if (parse_setting(line, &th, &c) != 0) return -1;
    }
    *t = th;
    return 0;
}

/* Reads a theme file of at most 64 KiB into a malloc'd buffer; -1 with the message in err. */
static int read_theme(const char *path, char **text, size_t *len, char *err, size_t errlen) {
    /* O_NONBLOCK: a FIFO must not hang the open; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return load_error(err, errlen, "%s: cannot open theme: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return load_error(err, errlen, "%s: %s, expected a theme file", path,
                          S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
    }
    if (sb.st_size >= 1 << 16) {
        close(fd);
        return load_error(err, errlen, "%s: %lld bytes, more than the 64 KiB a theme file may have", path,
                          (long long)sb.st_size);
    }
    char *buf = malloc(1 << 16);
    size_t n = 0;
    ssize_t got = 1;
    while (buf && got > 0 && n < 1 << 16) /* one byte more than fits: a file that grew */
        if ((got = read(fd, buf + n, (1 << 16) - n)) > 0) n += (size_t)got;
    int e = errno;
    close(fd);
    if (!buf || got < 0 || n >= 1 << 16) {
        free(buf);
        return load_error(err, errlen, "%s: %s", path,
                          !buf ? "out of memory" : got < 0 ? strerror(e) : "more than the 64 KiB a theme file may have");
    }
    *text = buf;
    *len = n;
    return 0;
}

int ui_theme_load(const char *name_or_path, const char *themes_dir, ui_theme *t, char *err, size_t errlen) {
    char path[4096];
    size_t nl = strlen(name_or_path);
    if (strchr(name_or_path, '/') || (nl > 6 && strcmp(name_or_path + nl - 6, ".theme") == 0))
        snprintf(path, sizeof path, "%s", name_or_path);
    else
        snprintf(path, sizeof path, "%s/%s.theme", themes_dir ? themes_dir : "themes", name_or_path);
    char *buf = NULL;
    size_t n = 0;
    if (read_theme(path, &buf, &n, err, errlen) != 0) return -1;
    int rc = ui_theme_parse(buf, n, path, t, err, errlen);
    free(buf);
    return rc;
}

static double srgb_linear(unsigned v) {
    double c = v / 255.0;
    return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4);
}

int ui_color_is_light(ui_color c) {
    if (c.kind == UI_COLOR_DEFAULT) return -1;
    uint32_t rgb = c.kind == UI_COLOR_RGB ? c.value : ui_index_to_rgb((int)c.value);
    double y = 0.2126 * srgb_linear(rgb >> 16 & 0xFF) + 0.7152 * srgb_linear(rgb >> 8 & 0xFF) +
               0.0722 * srgb_linear(rgb & 0xFF);
    return y > 0.18;
}
