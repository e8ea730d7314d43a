/* term.c — curses init, colour pairs and the theme: the app's one global. */
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ui/term.h"

static struct {
    int active;
    SCREEN *screen;
    int color;      /* 0 none, 8, 16, 256, or 1 << 24 (direct) */
    int glyphs;     /* heatmap as " ░▒▓█" (fewer than 256 colours) */
    ui_theme theme;
    attr_t role[UI_ROLE_COUNT];
    attr_t heat[UI_HEAT_MAX];
    attr_t shade[UI_HEAT_MAX];              /* text on heat level l (term_shade) */
    short half[UI_HEAT_MAX][UI_HEAT_MAX];   /* pair of '▀': fg level [u], bg level [l]; 0: none */
    int n_heat;
    struct termios saved; /* the modes before curses, for term_emergency_restore */
    int have_saved;
} T;

static const char *shade_glyphs[] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};

static int map_color(ui_color c) {
    if (c.kind == UI_COLOR_DEFAULT) return -1;
    if (T.color >= (1 << 24)) return (int)(c.kind == UI_COLOR_RGB ? c.value : ui_index_to_rgb((int)c.value));
    if (T.color >= 256) return c.kind == UI_COLOR_RGB ? ui_rgb_to_256(c.value) : (int)c.value;
    if (T.color >= 16 && c.kind == UI_COLOR_INDEX && c.value < 16) return (int)c.value;
    return ui_color_to_8(c);
}

static attr_t style_attrs(int a) {
    attr_t r = 0;
    if (a & UI_ATTR_BOLD) r |= A_BOLD;
    if (a & UI_ATTR_DIM) r |= A_DIM;
    if (a & UI_ATTR_UNDERLINE) r |= A_UNDERLINE;
    if (a & UI_ATTR_REVERSE) r |= A_REVERSE;
    return r;
}

/* Few or no colours: text is shaded with attributes, a ladder from dim
 * (little attention) to reverse video (the most). */
static void setup_shade_ladder(void) {
    static const attr_t ladder[5] = {0, A_DIM, 0, A_BOLD | A_UNDERLINE, A_BOLD | A_REVERSE};
    for (int i = 0; i < T.n_heat; i++) T.shade[i] = T.role[UI_ROLE_TEXT] | ladder[i];
    memset(T.half, 0, sizeof T.half);
}

/* 256 colours or more: the theme's ramp as cell backgrounds; text on it in
 * black or white, whichever reads on that colour; '▀' pairs for every
 * (upper, lower) level, so that one cell shows two rows. */
static void setup_ramp(int pair) {
    T.n_heat = T.theme.n_heat;
    for (int i = 0; i < T.n_heat; i++) {
        int bg = map_color(T.theme.heat[i]);
        init_extended_pair(pair, map_color(T.theme.role[UI_ROLE_TEXT].fg), bg);
        T.heat[i] = COLOR_PAIR(pair++);
        int light = ui_color_is_light(T.theme.heat[i]);
        ui_color ink = {UI_COLOR_INDEX, light ? 16 : 231};
        init_extended_pair(pair, light < 0 ? map_color(T.theme.role[UI_ROLE_TEXT].fg) : map_color(ink), bg);
        T.shade[i] = i == 0 ? T.role[UI_ROLE_TEXT] : COLOR_PAIR(pair); /* level 0: plain text */
        pair++;
    }
    for (int u = 0; u < T.n_heat; u++)
        for (int l = 0; l < T.n_heat; l++) {
            init_extended_pair(pair, map_color(T.theme.heat[u]), map_color(T.theme.heat[l]));
            T.half[u][l] = (short)pair++;
        }
}

static void setup_pairs(void) {
    int pair = 1;
    for (int r = 0; r < UI_ROLE_COUNT; r++) {
        const ui_style *s = &T.theme.role[r];
        T.role[r] = style_attrs(s->attrs);
        if (T.color) {
            int fg = map_color(s->fg), bg = map_color(s->bg);
            /* a text role without colour still needs the pair to reset colours */
            init_extended_pair(pair, fg, bg);
            T.role[r] |= COLOR_PAIR(pair);
            pair++;
        }
    }
    T.glyphs = T.color < 256; /* few colours: shade the heatmap with glyphs instead of a ramp */
    if (!T.color) {
        /* no colour: reverse video marks what colour would */
        T.role[UI_ROLE_SELECTION] |= A_REVERSE;
        T.role[UI_ROLE_STATUS] |= A_REVERSE;
        T.role[UI_ROLE_USER] |= A_BOLD;
        T.role[UI_ROLE_BAR_REMOVED] |= A_DIM;
        T.role[UI_ROLE_CONF_LOW] |= A_UNDERLINE;
        T.role[UI_ROLE_CONF_HIGH] |= A_BOLD;
        T.n_heat = 5;
        for (int i = 0; i < T.n_heat; i++) T.heat[i] = 0;
        setup_shade_ladder();
        return;
    }
    if (T.glyphs) {
        T.n_heat = 5;
        for (int i = 0; i < T.n_heat; i++) T.heat[i] = T.role[UI_ROLE_BAR];
        setup_shade_ladder();
        return;
    }
    setup_ramp(pair);
}

/* xterm's bracketed paste mode: written straight to the terminal (curses
 * knows nothing of it), after whatever curses has sent. */
static void paste_mode(int on) {
    static const char on_s[] = "\033[?2004h", off_s[] = "\033[?2004l";
    fflush(stdout);
    if (write(STDOUT_FILENO, on ? on_s : off_s, sizeof on_s - 1) < 0) return;
}

int term_init(const ui_theme *theme, char *err, size_t errlen) {
    if (T.active) return 0;
    const char *term = getenv("TERM");
    if (!term || !*term) {
        snprintf(err, errlen, "TERM is not set: cannot open the full-screen app");
        return -1;
    }
    T.have_saved = tcgetattr(STDIN_FILENO, &T.saved) == 0;
    if (!(T.screen = newterm(NULL, stdout, stdin))) {
        snprintf(err, errlen, "cannot initialise the terminal '%s'", term);
        return -1;
    }
    T.active = 1;
    define_key("\033[200~", TERM_KEY_PASTE_BEGIN);
    define_key("\033[201~", TERM_KEY_PASTE_END);
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(1);
    mousemask(BUTTON1_PRESSED | BUTTON1_CLICKED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    mouseinterval(0);
    const char *nc = getenv("NO_COLOR");
    T.color = 0;
    if (!(nc && *nc) && has_colors()) {
        start_color();
        use_default_colors();
        T.color = COLORS >= (1 << 24) ? (1 << 24) : COLORS >= 256 ? 256 : COLORS >= 16 ? 16 : 8;
    }
    term_set_theme(theme);
    paste_mode(1);
    return 0;
}

void term_end(void) {
    if (!T.active) return;
    T.active = 0;
    paste_mode(0);
    endwin();
    delscreen(T.screen);
    T.screen = NULL;
}

int term_active(void) { return T.active; }

void term_emergency_restore(void) {
    if (!T.active) return;
    /* attrs, cursor, mouse, bracketed paste, main screen */
    static const char reset[] = "\033[0m\033[?25h\033[?1000l\033[?2004l\033[?1049l\r\n";
    if (write(STDOUT_FILENO, reset, sizeof reset - 1) < 0) return;
    if (T.have_saved) tcsetattr(STDIN_FILENO, TCSANOW, &T.saved);
}

/* Decoded keys not handed out yet: a byte can complete one character and
 * show an earlier one invalid at once. */
static struct {
    ui_utf8_input in;
    wint_t q[3];
    int q_code[3], n;
    unsigned invalid;
} K;

static void key_queue(wint_t c, int code) {
    if (!code && c == 0xFFFD) K.invalid++;
    K.q[K.n] = c, K.q_code[K.n++] = code;
}

/* Keys put back while the app was busy (term_defer_key), oldest first. */
static struct {
    wint_t *ch;
    int *code;
    size_t head, n, cap;
} D;

void term_defer_key(wint_t ch, int code) {
    if (D.head + D.n == D.cap) { /* full at the end: move down, or grow */
        if (D.head > 0) {
            memmove(D.ch, D.ch + D.head, D.n * sizeof *D.ch);
            memmove(D.code, D.code + D.head, D.n * sizeof *D.code);
            D.head = 0;
        } else {
            size_t cap = D.cap ? 2 * D.cap : 256;
            wint_t *c = realloc(D.ch, cap * sizeof *c);
            if (c) D.ch = c;
            int *k = c ? realloc(D.code, cap * sizeof *k) : NULL;
            if (!k) return; /* out of memory: the key is lost, nothing else */
            D.code = k, D.cap = cap;
        }
    }
    D.ch[D.head + D.n] = ch, D.code[D.head + D.n] = code;
    D.n++;
}

int term_get_key(wint_t *ch) {
    if (D.n > 0) {
        *ch = D.ch[D.head];
        int code = D.code[D.head++];
        if (--D.n == 0) D.head = 0;
        return code;
    }
    return term_get_fresh_key(ch);
}

int term_get_fresh_key(wint_t *ch) {
    while (K.n == 0) {
        int c = wgetch(stdscr);
        uint32_t cp[2];
        if (c == ERR) { /* nothing more waiting: a character cut short is invalid */
            if (!ui_utf8_flush(&K.in, cp)) return ERR;
            key_queue(cp[0], 0);
        } else if (c > 0xFF) { /* KEY_*: after whatever was held */
            if (ui_utf8_flush(&K.in, cp)) key_queue(cp[0], 0);
            key_queue((wint_t)c, 1);
        } else {
            int n = ui_utf8_push(&K.in, (unsigned char)c, cp);
            for (int i = 0; i < n; i++) key_queue(cp[i], 0);
        }
    }
    *ch = K.q[0];
    int code = K.q_code[0];
    K.n--;
    memmove(K.q, K.q + 1, (size_t)K.n * sizeof *K.q);
    memmove(K.q_code, K.q_code + 1, (size_t)K.n * sizeof *K.q_code);
    return code ? KEY_CODE_YES : OK;
}

unsigned term_invalid_bytes(void) { return K.invalid; }

void term_suspend(void) {
    if (!T.active) return;
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    paste_mode(0);
    endwin();
    sigaction(SIGTSTP, &dfl, &old);
    raise(SIGTSTP); /* stopped here until SIGCONT (an orphaned process group is not stopped) */
    sigaction(SIGTSTP, &old, NULL);
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 &&
        (ws.ws_row != LINES || ws.ws_col != COLS))
        resizeterm(ws.ws_row, ws.ws_col);
    clearok(curscr, TRUE);
    refresh(); /* back in curses' modes */
    paste_mode(1);
}

int term_lost(void) {
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

void term_set_theme(const ui_theme *theme) {
    T.theme = *theme;
    if (T.active) setup_pairs();
}

const ui_theme *term_theme(void) { return &T.theme; }
int term_has_color(void) { return T.color != 0; }
attr_t term_attr(ui_role r) { return r < UI_ROLE_COUNT ? T.role[r] : 0; }
int term_heat_levels(void) { return T.n_heat; }

attr_t term_heat(int level) {
    if (level < 0) level = 0;
    if (level >= T.n_heat) level = T.n_heat - 1;
    return T.heat[level];
}

static int clamp_level(int l) { return l < 0 ? 0 : l >= T.n_heat ? T.n_heat - 1 : l; }

attr_t term_shade(int level) { return T.shade[clamp_level(level)]; }

int term_half_blocks(void) { return !T.glyphs && T.color; }

void term_put_half(WINDOW *w, int y, int x, int upper, int lower) {
    if (!term_half_blocks()) return;
    int pn = T.half[clamp_level(upper)][clamp_level(lower)];
    if (lower < 0) pn = T.half[clamp_level(upper)][0]; /* no lower row: the ramp's floor */
    cchar_t cc;
    wchar_t wc[2] = {0x2580, 0};
    setcchar(&cc, wc, 0, 0, &pn);
    mvwadd_wch(w, y, x, &cc);
}

const char *term_heat_glyph(int level) {
    if (!T.glyphs) return " ";
    if (level < 0) level = 0;
    if (level > 4) level = 4;
    return shade_glyphs[level];
}

int term_put(WINDOW *w, int y, int x, const char *s, size_t len, int max_cols, attr_t attr) {
    int cols = 0;
    wmove(w, y, x);
    for (size_t i = 0; i < len && cols < max_cols;) {
        uint32_t cp;
        int nb = ui_utf8_decode(s + i, len - i, &cp);
        i += (size_t)nb;
        int cw = ui_cp_width(cp);
        if (cols + cw > max_cols) break;
        if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) cp = 0xB7;
        wchar_t wc[2] = {(wchar_t)cp, 0};
        if (cw == 0 && cols == 0) continue; /* a combining mark with nothing before */
        cchar_t cc;
        int pn = PAIR_NUMBER(attr);
        setcchar(&cc, wc, attr & ~A_COLOR, 0, &pn);
        wadd_wch(w, &cc);
        cols += cw;
    }
    return cols;
}

int term_put_words(WINDOW *w, int y, int x, const char *s, int max_cols, attr_t attr) {
    size_t len = strlen(s);
    if (max_cols < 1) return 0;
    if (ui_text_width(s, len) <= max_cols) return term_put(w, y, x, s, len, max_cols, attr);
    ui_line first;
    if (ui_wrap(s, len, max_cols - 1, &first, 1) < 1) return 0; /* room for the ellipsis */
    size_t end = first.end;
    while (end > 0 && strchr(",;:(-", s[end - 1])) end--; /* no dangling punctuation before the ellipsis */
    int c = term_put(w, y, x, s, end, max_cols - 1, attr);
    return c + term_put(w, y, x + c, "\u2026", 3, 1, attr);
}

void term_fill(WINDOW *w, int y, int x, int n, attr_t attr) {
    if (n <= 0) return;
    wattrset(w, attr);
    mvwhline(w, y, x, ' ', n);
    wattrset(w, 0);
}

int term_printf(WINDOW *w, int y, int x, int max_cols, attr_t attr, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return 0;
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    return term_put(w, y, x, buf, (size_t)n, max_cols, attr);
}
