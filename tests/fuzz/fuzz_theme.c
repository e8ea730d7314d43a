/* fuzz_theme.c — the input is a theme file (src/ui/theme.c; themes/README.md).
 *
 * ui_theme_load (the file) and ui_theme_parse (its bytes) must agree, and either
 *   - fail with "PATH:LINE: message": one line, valid UTF-8 without control
 *     bytes, LINE a line of the file, the theme passed in untouched, and the
 *     message cut cleanly into a small buffer; or
 *   - give a theme whose name is printable UTF-8 and whose colours and
 *     attributes are in range: n_heat 2..UI_HEAT_MAX, indices 0..255, RGB at most
 *     0xFFFFFF, attributes UI_ATTR_*; every colour converts to 256 and 8 colours.
 */
#include "fuzz_common.h"
#include "ui/theme.h"

static char *g_dir, g_path[300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_dir = fuzz_tmpdir("theme");
    snprintf(g_path, sizeof g_path, "%s/fz.theme", g_dir);
    return 0;
}

static void check_text(const char *what, const char *s) {
    FUZZ_CHECK(fuzz_utf8_valid((const unsigned char *)s, strlen(s)), "%s is not valid UTF-8", what);
    char shown[1024];
    gpt2_text_escape(s, strlen(s), shown, sizeof shown);
    FUZZ_CHECK(strcmp(shown, s) == 0, "%s has control characters: %s", what, shown);
}

static void check_color(ui_color c, const char *what) {
    FUZZ_CHECK(c.kind == UI_COLOR_DEFAULT || c.kind == UI_COLOR_INDEX || c.kind == UI_COLOR_RGB, "%s kind %d", what,
               (int)c.kind);
    FUZZ_CHECK(c.kind != UI_COLOR_DEFAULT || c.value == 0, "%s: default with value %u", what, c.value);
    FUZZ_CHECK(c.kind != UI_COLOR_INDEX || c.value <= 255, "%s: index %u", what, c.value);
    FUZZ_CHECK(c.kind != UI_COLOR_RGB || c.value <= 0xFFFFFF, "%s: rgb 0x%x", what, c.value);
    int c8 = ui_color_to_8(c);
    FUZZ_CHECK(c8 >= -1 && c8 <= 7 && (c8 == -1) == (c.kind == UI_COLOR_DEFAULT), "%s: 8-colour %d", what, c8);
    if (c.kind == UI_COLOR_RGB) {
        int i = ui_rgb_to_256(c.value);
        FUZZ_CHECK(i >= 16 && i <= 255, "%s: 256-colour %d", what, i);
    }
}

static void check_theme(const ui_theme *t) {
    FUZZ_CHECK(memchr(t->name, '\0', sizeof t->name) != NULL, "name not NUL-terminated");
    FUZZ_CHECK(t->name[0] != '\0', "empty name");
    check_text("the name", t->name);
    FUZZ_CHECK(t->n_heat >= 2 && t->n_heat <= UI_HEAT_MAX, "n_heat %d", t->n_heat);
    for (int i = 0; i < t->n_heat; i++) check_color(t->heat[i], "heat");
    for (int r = 0; r < UI_ROLE_COUNT; r++) {
        check_color(t->role[r].fg, ui_role_name((ui_role)r));
        check_color(t->role[r].bg, ui_role_name((ui_role)r));
        FUZZ_CHECK((t->role[r].attrs & ~15) == 0, "%s: attrs 0x%x", ui_role_name((ui_role)r), t->role[r].attrs);
    }
}

/* "PATH:LINE: message" for a file of size bytes. */
static void check_error(const char *err, const uint8_t *data, size_t size) {
    size_t pl = strlen(g_path);
    FUZZ_CHECK(strncmp(err, g_path, pl) == 0 && err[pl] == ':', "error does not start with the path: %s", err);
    char *end;
    long line = strtol(err + pl + 1, &end, 10);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    FUZZ_CHECK(line >= 1 && (size_t)line <= lines && end[0] == ':' && end[1] == ' ' && end[2],
               "error has no LINE of the file's %zu: %s", lines, err);
    check_text("the error", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 1 << 16) return 0; /* the loader's limit; parse alone below */
    fuzz_write(g_dir, "fz.theme", data, size);
    ui_theme t, t2, orig;
    memset(&orig, 0xA5, sizeof orig);
    t = t2 = orig;
    char err[512] = "", err2[512] = "";
    int rc = ui_theme_load(g_path, NULL, &t, err, sizeof err);
    int rc2 = ui_theme_parse((const char *)data, size, g_path, &t2, err2, sizeof err2);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", rc ? err : "parsed");
    FUZZ_CHECK(rc == rc2 && strcmp(err, err2) == 0, "load and parse disagree: %s | %s", err, err2);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1, "rc %d", rc);
        FUZZ_CHECK(memcmp(&t, &orig, sizeof t) == 0, "a failed parse changed the theme");
        check_error(err, data, size);
        char *small = malloc(16); /* exactly 16 bytes: ASan sees an overrun */
        if (!small) FUZZ_DIE("out of memory");
        FUZZ_CHECK(ui_theme_parse((const char *)data, size, g_path, &t2, small, 16) == -1, "second parse");
        FUZZ_CHECK(strlen(small) < 16 && fuzz_utf8_valid((const unsigned char *)small, strlen(small)),
                   "a message cut to 16 bytes is not clean");
        free(small);
        return 0;
    }
    FUZZ_CHECK(memcmp(&t, &t2, sizeof t) == 0, "load and parse give different themes");
    check_theme(&t);
    return 0;
}
