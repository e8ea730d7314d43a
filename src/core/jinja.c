/* jinja.c — a chat template's text into a syntax tree: Jinja2's lexer (with
 * trim_blocks and lstrip_blocks, as Hugging Face sets them) and its parser,
 * rule for rule (jinja2/lexer.py, jinja2/parser.py), over the subset that
 * jinja.h names. */
#include "jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

enum { T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP };
/* operators, longest first (Jinja's operator_re tries them so) */
enum {
    O_FLOORDIV, O_POW, O_EQ, O_NE, O_GTEQ, O_LTEQ, O_ADD, O_SUB, O_DIV, O_MUL, O_MOD, O_TILDE, O_LBRACKET, O_RBRACKET,
    O_LPAREN, O_RPAREN, O_LBRACE, O_RBRACE, O_GT, O_LT, O_ASSIGN, O_DOT, O_COLON, O_PIPE, O_COMMA, O_SEMICOLON, N_OPS
};
static const char *const op_text[N_OPS] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                           "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};

typedef struct {
    uint8_t type, op;
    int line, col;
    const char *name; /* T_NAME: interned */
    jv val;           /* T_DATA, T_STRING, T_INT, T_FLOAT */
} jtok;

typedef struct {
    jmp_buf jmp;
    gpt2_status status;
    gpt2_error *err;
    jinja_template *t;
    const char *src; /* newlines normalized */
    size_t n;
    /* lexer */
    size_t pos, line_start;
    int line;
    jtok *toks;
    size_t n_toks, cap_toks;
    /* interned names: open addressing */
    const char **names;
    size_t n_names, cap_names;
    /* parser */
    size_t i;
    int depth, loops; /* recursion; enclosing loops (break, continue) */
    long work;        /* the scoping analysis's, bounded */
} jparser;

static _Noreturn void pfail_at(jparser *P, int line, int col, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static _Noreturn void pfail_at(jparser *P, int line, int col, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->status = gpt2_fail(P->err, GPT2_ERR_FORMAT, "%s:%d:%d: %s", P->t->name, line, col, msg);
    longjmp(P->jmp, 1);
}

static void *palloc(jparser *P, size_t n) {
    void *p = jarena_alloc(&P->t->arena, n);
    if (!p) {
        P->status = gpt2_fail(P->err, GPT2_ERR_NOMEM, "%s: out of memory", P->t->name);
        longjmp(P->jmp, 1);
    }
    return p;
}

/* ---- interning ---- */
static size_t name_hash(const char *s, size_t n) {
    size_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static const char *intern(jparser *P, const char *s, size_t n) {
    if (2 * (P->n_names + 1) > P->cap_names) {
        size_t cap = P->cap_names ? 2 * P->cap_names : 64;
        const char **nt = palloc(P, cap * sizeof *nt);
        memset(nt, 0, cap * sizeof *nt);
        for (size_t i = 0; i < P->cap_names; i++) {
            const char *x = P->names[i];
            if (!x) continue;
            size_t h = name_hash(x, strlen(x)) & (cap - 1);
            while (nt[h]) h = (h + 1) & (cap - 1);
            nt[h] = x;
        }
        P->names = nt;
        P->cap_names = cap;
    }
    size_t h = name_hash(s, n) & (P->cap_names - 1);
    for (; P->names[h]; h = (h + 1) & (P->cap_names - 1))
        if (strncmp(P->names[h], s, n) == 0 && P->names[h][n] == '\0') return P->names[h];
    char *c = palloc(P, n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    P->n_names++;
    return P->names[h] = c;
}

/* ---- lexer ---- */
static jtok *emit(jparser *P, uint8_t type, int line, int col) {
    if (P->n_toks == P->cap_toks) {
        size_t cap = P->cap_toks ? 2 * P->cap_toks : 256;
        jtok *nt = palloc(P, cap * sizeof *nt);
        if (P->n_toks) memcpy(nt, P->toks, P->n_toks * sizeof *nt);
        P->toks = nt;
        P->cap_toks = cap;
    }
    jtok *t = &P->toks[P->n_toks++];
    *t = (jtok){.type = type, .line = line, .col = col};
    return t;
}

static int col_of(const jparser *P, size_t pos) { return (int)(pos - P->line_start) + 1; }

/* Moves the lexer to pos, counting the lines on the way. */
static void advance(jparser *P, size_t pos) {
    for (size_t i = P->pos; i < pos; i++)
        if (P->src[i] == '\n') P->line++, P->line_start = i + 1;
    P->pos = pos;
}

/* The length of the Python whitespace character at i, or 0. */
static size_t space_at(const jparser *P, size_t i) {
    uint32_t cp;
    size_t k = u8_next(P->src, P->n, i, &cp);
    return py_isspace(cp) ? k : 0;
}

static size_t skip_spaces(const jparser *P, size_t i) {
    size_t k;
    while (i < P->n && (k = space_at(P, i))) i += k;
    return i;
}

/* str.rstrip() of src[from..to): the new end. */
static size_t rstrip_end(const jparser *P, size_t from, size_t to) {
    while (to > from) {
        size_t p = u8_prev(P->src, to);
        if (p < from || space_at(P, p) != to - p) break;
        to = p;
    }
    return to;
}

static int starts(const jparser *P, size_t i, const char *s) {
    size_t n = strlen(s);
    return i <= P->n && P->n - i >= n && memcmp(P->src + i, s, n) == 0;
}

/* Jinja's root_raw_re at i: "{%" [-+]? \s* "raw" \s* ("-%}" \s* | "%}"); the end of the match, or 0. */
static size_t raw_begin(const jparser *P, size_t i) {
    size_t p = i + 2;
    if (p < P->n && (P->src[p] == '-' || P->src[p] == '+')) p++;
    p = skip_spaces(P, p);
    if (!starts(P, p, "raw")) return 0;
    p = skip_spaces(P, p + 3);
    if (starts(P, p, "-%}")) return skip_spaces(P, p + 3);
    if (starts(P, p, "%}")) return p + 2;
    return 0;
}

/* The text before a tag, src[from..to), as a data token: stripped before a
 * "-" sign; lstrip_blocks before a block or comment tag unless "+": the
 * whitespace between the line's start and the tag goes (Jinja2 3.1.2's
 * whitespace_re.fullmatch: any Unicode whitespace, not only spaces and tabs). */
static void emit_text(jparser *P, size_t from, size_t to, char sign, int is_var, int line_starting) {
    if (sign == '-') {
        to = rstrip_end(P, from, to);
    } else if (sign != '+' && !is_var) {
        size_t l = to, k = 0;
        while (l > from && P->src[l - 1] != '\n') l--;
        for (size_t i = l; i < to && (k = space_at(P, i)); i += k) {
        }
        if ((l > from || line_starting) && k) to = l; /* k: the last character looked at was a space */
    }
    if (to > from) emit(P, T_DATA, P->line, col_of(P, from))->val = jv_str(P->src + from, to - from);
}

/* The end of a {% raw %} block from p: its text, then {% endraw %}. */
static size_t lex_raw(jparser *P, size_t p, int line_starting) {
    for (size_t q = p; q + 1 < P->n; q++) {
        if (P->src[q] != '{' || P->src[q + 1] != '%') continue;
        size_t e = q + 2;
        char sign = e < P->n && (P->src[e] == '-' || P->src[e] == '+') ? P->src[e++] : 0;
        e = skip_spaces(P, e);
        if (!starts(P, e, "endraw")) continue;
        e = skip_spaces(P, e + 6);
        if (starts(P, e, "+%}")) e += 3;
        else if (starts(P, e, "-%}")) e = skip_spaces(P, e + 3);
        else if (starts(P, e, "%}")) e += 2 + starts(P, e + 2, "\n");
        else continue;
        emit_text(P, p, q, sign, 0, line_starting);
        return e;
    }
    pfail_at(P, P->line, col_of(P, P->pos), "missing end of raw directive ({%% endraw %%})");
}

/* The digits of Jinja's (\d+_)*\d+ at i: the end, or i. */
static size_t digit_run(const jparser *P, size_t i) {
    size_t p = i;
    while (p < P->n && P->src[p] >= '0' && P->src[p] <= '9') {
        p++;
        if (p + 1 < P->n && P->src[p] == '_' && P->src[p + 1] >= '0' && P->src[p + 1] <= '9') p++;
    }
    return p;
}

/* float_re at i: the end, or 0. */
static size_t float_end(const jparser *P, size_t i) {
    if (i > 0 && P->src[i - 1] == '.') return 0;
    size_t p = digit_run(P, i);
    if (p == i) return 0;
    size_t frac = 0;
    if (p < P->n && P->src[p] == '.') {
        size_t f = digit_run(P, p + 1);
        if (f > p + 1) frac = f;
    }
    size_t e = frac ? frac : p;
    if (e < P->n && (P->src[e] == 'e' || P->src[e] == 'E')) {
        size_t x = e + 1;
        if (x < P->n && (P->src[x] == '+' || P->src[x] == '-')) x++;
        size_t d = digit_run(P, x);
        if (d > x) return d;
    }
    return frac;
}

static int is_digit_in(char c, int base) {
    if (base == 16) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return c >= '0' && c < '0' + base;
}

/* integer_re at i: the end and the base, or 0. */
static size_t int_end(const jparser *P, size_t i, int *base) {
    const char *s = P->src;
    *base = 10;
    if (s[i] == '0' && i + 1 < P->n) {
        char x = (char)(s[i + 1] | 0x20);
        int b = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 0;
        if (b) {
            size_t p = i + 2;
            for (;;) {
                size_t q = p < P->n && s[p] == '_' ? p + 1 : p;
                if (q < P->n && is_digit_in(s[q], b)) p = q + 1;
                else break;
            }
            if (p > i + 2) {
                *base = b;
                return p;
            }
        }
    }
    if (s[i] < '0' || s[i] > '9') return 0;
    size_t p = i + 1;
    char first = s[i];
    for (;;) { /* [1-9](_?\d)* or 0(_?0)* */
        size_t q = p < P->n && s[p] == '_' ? p + 1 : p;
        if (q < P->n && s[q] >= '0' && s[q] <= '9' && (first != '0' || s[q] == '0')) p = q + 1;
        else break;
    }
    return p;
}

static void lex_number(jparser *P, size_t i, size_t e, int is_float, int base, int line, int col) {
    char buf[128];
    size_t k = 0;
    size_t from = i + (base != 10 ? 2 : 0);
    for (size_t p = from; p < e; p++)
        if (P->src[p] != '_') {
            if (k + 1 >= sizeof buf) pfail_at(P, line, col, "number literal too long");
            buf[k++] = P->src[p];
        }
    buf[k] = '\0';
    jtok *t = emit(P, is_float ? T_FLOAT : T_INT, line, col);
    if (is_float) {
        t->val = jv_float(strtod(buf, NULL));
        return;
    }
    unsigned long long v = 0;
    for (size_t p = 0; p < k; p++) {
        unsigned d = (unsigned)(buf[p] <= '9' ? buf[p] - '0' : (buf[p] | 0x20) - 'a' + 10);
        if (v > (9223372036854775807ULL - d) / (unsigned)base)
            pfail_at(P, line, col, "integer literal too large (this interpreter holds 64-bit integers)");
        v = v * (unsigned)base + d;
    }
    t->val = jv_int((int64_t)v);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Appends code point cp as UTF-8 to buf. */
static size_t put_cp(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)),
               3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string literal's body s[0..n) as Jinja reads it: Python's unicode-escape
 * codec over the text with its non-ASCII characters backslash-replaced. */
static jv unescape(jparser *P, const char *s, size_t n, int line, int col) {
    char *o = palloc(P, n * 3 + 1), *w = o; /* "\é" becomes "\xe9": at most 3 bytes per byte */
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\' || i + 1 >= n) {
            *w++ = s[i++];
            continue;
        }
        char c = s[i + 1];
        i += 2;
        static const char simple_in[] = "\n\\'\"abfnrtv", simple_out[] = "\0\\'\"\a\b\f\n\r\t\v";
        const char *hit = c ? strchr(simple_in, c) : NULL;
        if (hit) {
            if (c != '\n') *w++ = simple_out[hit - simple_in]; /* backslash-newline: a line continuation */
        } else if (c >= '0' && c <= '7') {
            uint32_t v = (uint32_t)(c - '0');
            for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++) v = v * 8 + (uint32_t)(s[i++] - '0');
            w += put_cp(w, v);
        } else if (c == 'x' || c == 'u' || c == 'U') {
            int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i < n ? hexval(s[i]) : -1;
                if (h < 0)
                    pfail_at(P, line, col, "truncated \\%s escape", c == 'x' ? "xXX" : c == 'u' ? "uXXXX" : "UXXXXXXXX");
                v = v * 16 + (uint32_t)h;
                i++;
            }
            if (v > 0x10FFFF) pfail_at(P, line, col, "illegal Unicode character");
            w += put_cp(w, v);
        } else if (c == 'N') {
            pfail_at(P, line, col, "\\N{...} escapes are not supported by this interpreter");
        } else if ((unsigned char)c >= 0x80) { /* backslash-replaced first: "\" then "xe9" as text */
            uint32_t cp;
            size_t k = u8_next(s, n, i - 1, &cp);
            *w++ = '\\';
            if (cp >= 0x110000) cp -= 0x110000 - 0xDC00;
            w += (size_t)sprintf(w, cp < 0x100 ? "x%02x" : cp < 0x10000 ? "u%04x" : "U%08x", cp);
            i += k - 1;
        } else { /* an unknown escape stays as it is */
            *w++ = '\\';
            *w++ = c;
        }
    }
    return jv_str(o, (size_t)(w - o));
}

/* One token inside {{ }} or {% %} at P->pos (not whitespace, not the end). */
static void lex_token(jparser *P, char *stack, int *depth) {
    size_t i = P->pos, e;
    const char *s = P->src;
    int line = P->line, col = col_of(P, i), base;
    char c = s[i];
    if ((e = float_end(P, i))) {
        lex_number(P, i, e, 1, 10, line, col);
    } else if ((e = int_end(P, i, &base))) {
        lex_number(P, i, e, 0, base, line, col);
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        e = i + 1;
        while (e < P->n && ((s[e] >= 'a' && s[e] <= 'z') || (s[e] >= 'A' && s[e] <= 'Z') || s[e] == '_' ||
                            (s[e] >= '0' && s[e] <= '9')))
            e++;
        emit(P, T_NAME, line, col)->name = intern(P, s + i, e - i);
    } else if (c == '\'' || c == '"') {
        e = i + 1;
        while (e < P->n && s[e] != c) e += s[e] == '\\' && e + 1 < P->n ? 2 : 1;
        if (e >= P->n) pfail_at(P, line, col, "unexpected char %s (a string that does not end)", c == '"' ? "'\"'" : "\"'\"");
        jv v = unescape(P, s + i + 1, e - i - 1, line, col);
        emit(P, T_STRING, line, col)->val = v;
        e++;
    } else {
        int op = 0;
        while (op < N_OPS && !starts(P, i, op_text[op])) op++;
        if (op == N_OPS) {
            uint32_t cp;
            size_t k = u8_next(s, P->n, i, &cp);
            char shown[32];
            gpt2_text_escape(s + i, k, shown, sizeof shown);
            pfail_at(P, line, col, "unexpected char '%s'", shown);
        }
        if (op == O_LPAREN || op == O_LBRACKET || op == O_LBRACE) {
            if (*depth >= JINJA_MAX_NESTING)
                pfail_at(P, line, col, "the template nests deeper than %d levels (a bound of this interpreter)",
                         JINJA_MAX_NESTING);
            stack[(*depth)++] = op_text[op][0];
        } else if (op == O_RPAREN || op == O_RBRACKET || op == O_RBRACE) {
            char want = op == O_RPAREN ? '(' : op == O_RBRACKET ? '[' : '{';
            if (*depth == 0) pfail_at(P, line, col, "unexpected '%s'", op_text[op]);
            if (stack[*depth - 1] != want) {
                char open = stack[*depth - 1];
                pfail_at(P, line, col, "unexpected '%s', expected '%c'", op_text[op],
                         open == '(' ? ')' : open == '[' ? ']' : '}');
            }
            (*depth)--;
        }
        emit(P, T_OP, line, col)->op = (uint8_t)op;
        e = i + strlen(op_text[op]);
    }
    advance(P, e);
}

/* Inside {{ }} (var) or {% %} from P->pos to the tag's end, which it
 * consumes; returns whether that end closed a line (for lstrip_blocks). */
static int lex_tag(jparser *P, int var) {
    char stack[JINJA_MAX_NESTING];
    int depth = 0;
    for (;;) {
        size_t i = P->pos, e = 0;
        if (i >= P->n) return 0; /* the parser says what is missing */
        if (depth == 0) {
            if (var && starts(P, i, "-}}")) e = skip_spaces(P, i + 3);
            else if (var && starts(P, i, "}}")) e = i + 2;
            else if (!var && starts(P, i, "+%}")) e = i + 3;
            else if (!var && starts(P, i, "-%}")) e = skip_spaces(P, i + 3);
            else if (!var && starts(P, i, "%}")) e = i + 2 + starts(P, i + 2, "\n"); /* trim_blocks */
            if (e) {
                emit(P, var ? T_VAR_END : T_BLOCK_END, P->line, col_of(P, i));
                advance(P, e);
                return P->src[e - 1] == '\n';
            }
        }
        if (space_at(P, i)) advance(P, skip_spaces(P, i));
        else lex_token(P, stack, &depth);
    }
}

/* The whole template into P->toks, ending in T_EOF. */
static void lex(jparser *P) {
    int line_starting = 1;
    while (P->pos < P->n) {
        size_t p = P->pos, raw_end = 0;
        int kind = 0; /* '#', '%', '{' */
        for (; p + 1 < P->n; p++)
            if (P->src[p] == '{' && (P->src[p + 1] == '#' || P->src[p + 1] == '%' || P->src[p + 1] == '{')) {
                kind = P->src[p + 1];
                break;
            }
        if (!kind) {
            emit(P, T_DATA, P->line, col_of(P, P->pos))->val = jv_str(P->src + P->pos, P->n - P->pos);
            advance(P, P->n);
            break;
        }
        if (kind == '%') raw_end = raw_begin(P, p);
        char sign = p + 2 < P->n && (P->src[p + 2] == '-' || P->src[p + 2] == '+') ? P->src[p + 2] : 0;
        emit_text(P, P->pos, p, sign, kind == '{', line_starting);
        advance(P, p);
        int line = P->line, col = col_of(P, p);
        if (raw_end) {
            advance(P, raw_end);
            size_t e = lex_raw(P, raw_end, P->src[raw_end - 1] == '\n');
            advance(P, e);
            line_starting = P->src[e - 1] == '\n';
            continue;
        }
        advance(P, p + 2 + (sign != 0));
        if (kind == '#') {
            size_t q = P->pos, e = 0;
            for (; q + 1 < P->n && !e; q++) {
                if ((P->src[q] == '-' || P->src[q] == '+') && starts(P, q + 1, "#}"))
                    e = P->src[q] == '-' ? skip_spaces(P, q + 3) : q + 3;
                else if (starts(P, q, "#}")) e = q + 2 + starts(P, q + 2, "\n");
            }
            if (!e) pfail_at(P, line, col, "missing end of comment tag");
            advance(P, e);
            line_starting = P->src[e - 1] == '\n';
            continue;
        }
        emit(P, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, line, col);
        line_starting = lex_tag(P, kind == '{');
    }
    emit(P, T_EOF, P->line, col_of(P, P->pos));
}

/* ---- parser ---- */
typedef struct {
    jnode **v;
    int n, cap;
} nlist;

static void nl_push(jparser *P, nlist *l, jnode *x) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        jnode **nv = palloc(P, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static jtok *cur(jparser *P) { return &P->toks[P->i]; }
static jtok *peek(jparser *P, size_t k) { return &P->toks[P->i + k < P->n_toks ? P->i + k : P->n_toks - 1]; }
static jtok *take(jparser *P) {
    jtok *t = cur(P);
    if (t->type != T_EOF) P->i++;
    return t;
}
static int is_op(jparser *P, int op) { return cur(P)->type == T_OP && cur(P)->op == op; }
static int tok_is(const jtok *t, const char *name) { return t->type == T_NAME && strcmp(t->name, name) == 0; }
static int is_name(jparser *P, const char *name) { return tok_is(cur(P), name); }

/* A token as Jinja's messages name it. */
static const char *describe(const jtok *t, char buf[80]) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_BLOCK_END: return "end of statement block";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_NAME: snprintf(buf, 80, "'%.60s'", t->name); return buf;
    default: snprintf(buf, 80, "'%s'", op_text[t->op]); return buf;
    }
}

static _Noreturn void pfail(jparser *P, const jtok *at, const char *what) {
    char b[80];
    pfail_at(P, at->line, at->col, "expected %s, found %s", what, describe(at, b));
}

static void expect_op(jparser *P, int op) {
    char want[16];
    snprintf(want, sizeof want, "'%s'", op_text[op]);
    if (!is_op(P, op)) pfail(P, cur(P), want);
    take(P);
}

static void expect_type(jparser *P, int type, const char *what) {
    if (cur(P)->type != type) pfail(P, cur(P), what);
    take(P);
}

static jnode *mk(jparser *P, int kind, const jtok *at) {
    jnode *n = palloc(P, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    n->depth = 1;
    return n;
}

static int deeper(int d, const jnode *c, int same_level) {
    int x = c ? c->depth + !same_level : 0;
    return x > d ? x : d;
}

/* Sets n's depth from its children and bounds it. An elif (an N_IF with op 1
 * alone in its parent's else) counts at its parent's level. */
static jnode *done(jparser *P, jnode *n) {
    int d = 1;
    d = deeper(d, n->a, 0), d = deeper(d, n->b, 0), d = deeper(d, n->c, 0);
    for (int i = 0; i < n->n_kids; i++) d = deeper(d, n->kids[i], 0);
    for (int i = 0; i < n->n_els; i++) d = deeper(d, n->els[i], n->els[i]->kind == N_IF && n->els[i]->op == 1);
    for (int i = 0; i < n->n_kw; i++) d = deeper(d, n->kwval[i], 0);
    if (d > JINJA_MAX_NESTING)
        pfail_at(P, n->line, n->col, "the template nests deeper than %d levels (a bound of this interpreter)",
                 JINJA_MAX_NESTING);
    n->depth = (int16_t)d;
    return n;
}

static void enter(jparser *P) {
    if (++P->depth > JINJA_MAX_NESTING)
        pfail_at(P, cur(P)->line, cur(P)->col, "the template nests deeper than %d levels (a bound of this interpreter)",
                 JINJA_MAX_NESTING);
}
static void leave(jparser *P) { P->depth--; }

static void set_kids(jnode *n, nlist *l) { n->kids = l->v, n->n_kids = l->n; }

static jnode *parse_expression(jparser *P, int condexpr);
static jnode *parse_or_(jparser *P);
static jnode *parse_unary(jparser *P, int with_filter);
static jnode *parse_tuple(jparser *P, int simplified, int condexpr, const char *extra_end, int explicit_parens);

static jnode *binary(jparser *P, int kind, int op, jnode *a, jnode *b, const jtok *at) {
    jnode *n = mk(P, kind, at);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return done(P, n);
}

static jnode *parse_condexpr(jparser *P) {
    jnode *e1 = NULL;
    enter(P);
    jtok *at = cur(P);
    e1 = parse_or_(P);
    while (is_name(P, "if")) {
        take(P);
        jnode *n = mk(P, N_CONDEXPR, at);
        n->b = e1;
        n->a = parse_or_(P);
        if (is_name(P, "else")) {
            take(P);
            n->c = parse_condexpr(P);
        }
        e1 = done(P, n);
    }
    leave(P);
    return e1;
}

static jnode *parse_compare(jparser *P);

static jnode *parse_not(jparser *P) {
    if (!is_name(P, "not")) return parse_compare(P);
    jtok *at = take(P);
    enter(P);
    jnode *n = mk(P, N_NOT, at);
    n->a = parse_not(P);
    leave(P);
    return done(P, n);
}

static jnode *parse_and(jparser *P) {
    jnode *l = parse_not(P);
    while (is_name(P, "and")) {
        jtok *at = take(P);
        l = binary(P, N_AND, 0, l, parse_not(P), at);
    }
    return l;
}

static jnode *parse_or_(jparser *P) {
    jnode *l = parse_and(P);
    while (is_name(P, "or")) {
        jtok *at = take(P);
        l = binary(P, N_OR, 0, l, parse_and(P), at);
    }
    return l;
}

static jnode *parse_pow(jparser *P) {
    jnode *l = parse_unary(P, 1);
    while (is_op(P, O_POW)) {
        jtok *at = take(P);
        l = binary(P, N_BINOP, OP_POW, l, parse_unary(P, 1), at);
    }
    return l;
}

static jnode *parse_math2(jparser *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        int op = is_op(P, O_MUL) ? OP_MUL : is_op(P, O_DIV) ? OP_DIV : is_op(P, O_FLOORDIV) ? OP_FLOORDIV
               : is_op(P, O_MOD) ? OP_MOD : -1;
        if (op < 0) return l;
        jtok *at = take(P);
        l = binary(P, N_BINOP, op, l, parse_pow(P), at);
    }
}

static jnode *parse_concat(jparser *P) {
    jtok *at = cur(P);
    jnode *first = parse_math2(P);
    if (!is_op(P, O_TILDE)) return first;
    nlist l = {0};
    nl_push(P, &l, first);
    while (is_op(P, O_TILDE)) {
        take(P);
        nl_push(P, &l, parse_math2(P));
    }
    jnode *n = mk(P, N_CONCAT, at);
    set_kids(n, &l);
    return done(P, n);
}

static jnode *parse_math1(jparser *P) {
    jnode *l = parse_concat(P);
    while (is_op(P, O_ADD) || is_op(P, O_SUB)) {
        int op = is_op(P, O_ADD) ? OP_ADD : OP_SUB;
        jtok *at = take(P);
        l = binary(P, N_BINOP, op, l, parse_concat(P), at);
    }
    return l;
}

static jnode *parse_compare(jparser *P) {
    jtok *at = cur(P);
    jnode *expr = parse_math1(P);
    nlist kids = {0};
    uint8_t ops[256];
    for (;;) {
        int c = is_op(P, O_EQ) ? CMP_EQ : is_op(P, O_NE) ? CMP_NE : is_op(P, O_LT) ? CMP_LT : is_op(P, O_LTEQ) ? CMP_LE
              : is_op(P, O_GT) ? CMP_GT : is_op(P, O_GTEQ) ? CMP_GE : -1;
        if (c >= 0) take(P);
        else if (is_name(P, "in")) take(P), c = CMP_IN;
        else if (is_name(P, "not") && tok_is(peek(P, 1), "in")) take(P), take(P), c = CMP_NOTIN;
        else break;
        if (kids.n == (int)sizeof ops) pfail_at(P, at->line, at->col, "too many comparisons in a row");
        ops[kids.n] = (uint8_t)c;
        nl_push(P, &kids, parse_math1(P));
    }
    if (!kids.n) return expr;
    jnode *n = mk(P, N_COMPARE, at);
    n->a = expr;
    set_kids(n, &kids);
    n->cmp = palloc(P, (size_t)kids.n);
    memcpy(n->cmp, ops, (size_t)kids.n);
    return done(P, n);
}

/* (args, name=value, ...) into n's kids and kw. */
static void parse_call_args(jparser *P, jnode *n) {
    jtok *open = cur(P);
    expect_op(P, O_LPAREN);
    nlist args = {0}, vals = {0};
    const char **names = NULL;
    int cap = 0, require_comma = 0;
    while (!is_op(P, O_RPAREN)) {
        if (require_comma) {
            expect_op(P, O_COMMA);
            if (is_op(P, O_RPAREN)) break;
        }
        if (is_op(P, O_MUL) || is_op(P, O_POW))
            pfail_at(P, cur(P)->line, cur(P)->col, "*args and **kwargs in calls are not supported by this interpreter");
        if (cur(P)->type == T_NAME && peek(P, 1)->type == T_OP && peek(P, 1)->op == O_ASSIGN) {
            if (vals.n == cap) {
                cap = cap ? 2 * cap : 4;
                const char **nn = palloc(P, (size_t)cap * sizeof *nn);
                if (vals.n) memcpy(nn, names, (size_t)vals.n * sizeof *nn);
                names = nn;
            }
            names[vals.n] = take(P)->name;
            take(P);
            nl_push(P, &vals, parse_expression(P, 1));
        } else {
            if (vals.n) pfail_at(P, open->line, open->col, "invalid syntax for function call expression");
            nl_push(P, &args, parse_expression(P, 1));
        }
        require_comma = 1;
    }
    expect_op(P, O_RPAREN);
    set_kids(n, &args);
    n->kwname = names;
    n->kwval = vals.v;
    n->n_kw = vals.n;
}

static jnode *parse_call(jparser *P, jnode *callee) {
    jnode *n = mk(P, N_CALL, cur(P));
    n->a = callee;
    parse_call_args(P, n);
    return done(P, n);
}

/* A dotted name after | or is. */
static const char *dotted_name(jparser *P) {
    if (cur(P)->type != T_NAME) pfail(P, cur(P), "a name");
    const char *name = take(P)->name;
    while (is_op(P, O_DOT)) {
        take(P);
        if (cur(P)->type != T_NAME) pfail(P, cur(P), "a name");
        char buf[512];
        snprintf(buf, sizeof buf, "%s.%s", name, take(P)->name);
        name = intern(P, buf, strlen(buf));
    }
    return name;
}

/* node | f | g(args) ...; node NULL: a filter block's chain (start_inline: no first |). */
static jnode *parse_filter(jparser *P, jnode *node, int start_inline) {
    while (is_op(P, O_PIPE) || start_inline) {
        if (!start_inline) take(P);
        start_inline = 0;
        jtok *at = cur(P);
        jnode *n = mk(P, N_FILTER, at);
        n->name = dotted_name(P);
        int supported;
        n->fid = jb_filter_id(n->name, &supported);
        if (n->fid >= 0 && !supported) n->fid = -2;
        n->a = node;
        if (is_op(P, O_LPAREN)) parse_call_args(P, n);
        node = done(P, n);
    }
    return node;
}

static jnode *parse_primary(jparser *P);
static jnode *parse_postfix(jparser *P, jnode *node);

static jnode *parse_test(jparser *P, jnode *node) {
    jtok *at = take(P); /* is */
    int negated = 0;
    if (is_name(P, "not")) take(P), negated = 1;
    jnode *n = mk(P, N_TEST, at);
    n->a = node;
    n->name = dotted_name(P);
    int supported;
    n->fid = jb_test_id(n->name, &supported);
    if (n->fid >= 0 && !supported) n->fid = -2;
    int t = cur(P)->type;
    if (is_op(P, O_LPAREN)) {
        parse_call_args(P, n);
    } else if ((t == T_NAME || t == T_STRING || t == T_INT || t == T_FLOAT || is_op(P, O_LBRACKET) ||
                is_op(P, O_LBRACE)) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is")) pfail_at(P, cur(P)->line, cur(P)->col, "You cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        n->kids = palloc(P, sizeof *n->kids);
        n->kids[0] = arg;
        n->n_kids = 1;
    }
    n = done(P, n);
    if (!negated) return n;
    jnode *no = mk(P, N_NOT, at);
    no->a = n;
    return done(P, no);
}

static jnode *parse_filter_expr(jparser *P, jnode *node) {
    for (;;) {
        if (is_op(P, O_PIPE)) node = parse_filter(P, node, 0);
        else if (is_name(P, "is")) node = parse_test(P, node);
        else if (is_op(P, O_LPAREN)) node = parse_call(P, node);
        else return node;
    }
}

/* One part of a subscript: an expression, or a slice start:stop:step. */
static jnode *parse_subscribed(jparser *P) {
    jtok *at = cur(P);
    jnode *start = NULL;
    if (!is_op(P, O_COLON)) {
        start = parse_expression(P, 1);
        if (!is_op(P, O_COLON)) return start;
    }
    take(P);
    jnode *n = mk(P, N_SLICE, at);
    n->a = start;
    if (!is_op(P, O_COLON) && !is_op(P, O_RBRACKET) && !is_op(P, O_COMMA)) n->b = parse_expression(P, 1);
    if (is_op(P, O_COLON)) {
        take(P);
        if (!is_op(P, O_RBRACKET) && !is_op(P, O_COMMA)) n->c = parse_expression(P, 1);
    }
    return done(P, n);
}

static jnode *parse_subscript(jparser *P, jnode *node) {
    jtok *at = take(P);
    if (at->op == O_DOT) {
        jtok *attr = take(P);
        if (attr->type == T_NAME) {
            jnode *n = mk(P, N_GETATTR, at);
            n->a = node;
            n->name = attr->name;
            return done(P, n);
        }
        if (attr->type != T_INT) pfail(P, attr, "a name or number");
        jnode *k = mk(P, N_CONST, attr);
        k->val = attr->val;
        return binary(P, N_GETITEM, 0, node, k, at);
    }
    nlist args = {0};
    while (!is_op(P, O_RBRACKET)) {
        if (args.n) expect_op(P, O_COMMA);
        nl_push(P, &args, parse_subscribed(P));
    }
    expect_op(P, O_RBRACKET);
    jnode *key = args.n ? args.v[0] : NULL;
    if (args.n != 1) { /* x[a, b] and x[] (an empty tuple) */
        key = mk(P, N_TUPLE, at);
        set_kids(key, &args);
        key = done(P, key);
    }
    return binary(P, N_GETITEM, 0, node, key, at);
}

static jnode *parse_postfix(jparser *P, jnode *node) {
    for (;;) {
        if (is_op(P, O_DOT) || is_op(P, O_LBRACKET)) node = parse_subscript(P, node);
        else if (is_op(P, O_LPAREN)) node = parse_call(P, node);
        else return node;
    }
}

static jnode *parse_list(jparser *P) {
    jtok *at = take(P);
    nlist items = {0};
    while (!is_op(P, O_RBRACKET)) {
        if (items.n) expect_op(P, O_COMMA);
        if (is_op(P, O_RBRACKET)) break;
        nl_push(P, &items, parse_expression(P, 1));
    }
    expect_op(P, O_RBRACKET);
    jnode *n = mk(P, N_LIST, at);
    set_kids(n, &items);
    return done(P, n);
}

static jnode *parse_dict(jparser *P) {
    jtok *at = take(P);
    nlist items = {0};
    while (!is_op(P, O_RBRACE)) {
        if (items.n) expect_op(P, O_COMMA);
        if (is_op(P, O_RBRACE)) break;
        nl_push(P, &items, parse_expression(P, 1));
        expect_op(P, O_COLON);
        nl_push(P, &items, parse_expression(P, 1));
    }
    expect_op(P, O_RBRACE);
    jnode *n = mk(P, N_DICT, at);
    set_kids(n, &items);
    return done(P, n);
}

static jnode *parse_primary(jparser *P) {
    jtok *t = cur(P);
    jnode *n;
    if (t->type == T_NAME) {
        const char *s = t->name;
        take(P);
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "false") || !strcmp(s, "False")) {
            n = mk(P, N_CONST, t);
            n->val = jv_bool(s[0] == 't' || s[0] == 'T');
        } else if (!strcmp(s, "none") || !strcmp(s, "None")) {
            n = mk(P, N_CONST, t);
            n->val = jv_none();
        } else {
            n = mk(P, N_NAME, t);
            n->name = s;
        }
        return n;
    }
    if (t->type == T_STRING) { /* adjacent strings are one */
        take(P);
        n = mk(P, N_CONST, t);
        n->val = t->val;
        if (cur(P)->type == T_STRING) {
            size_t len = 0;
            for (size_t j = P->i - 1; P->toks[j].type == T_STRING; j++) len += P->toks[j].val.s.n;
            char *buf = palloc(P, len + 1), *w = buf;
            memcpy(w, t->val.s.p, t->val.s.n), w += t->val.s.n;
            while (cur(P)->type == T_STRING) {
                jtok *u = take(P);
                memcpy(w, u->val.s.p, u->val.s.n), w += u->val.s.n;
            }
            n->val = jv_str(buf, len);
        }
        return n;
    }
    if (t->type == T_INT || t->type == T_FLOAT) {
        take(P);
        n = mk(P, N_CONST, t);
        n->val = t->val;
        return n;
    }
    if (is_op(P, O_LPAREN)) {
        take(P);
        n = parse_tuple(P, 0, 1, NULL, 1);
        expect_op(P, O_RPAREN);
        return n;
    }
    if (is_op(P, O_LBRACKET)) return parse_list(P);
    if (is_op(P, O_LBRACE)) return parse_dict(P);
    char b[80];
    pfail_at(P, t->line, t->col, "unexpected %s", describe(t, b));
}

static jnode *parse_unary(jparser *P, int with_filter) {
    enter(P);
    jnode *node;
    if (is_op(P, O_SUB) || is_op(P, O_ADD)) {
        jtok *at = take(P);
        node = mk(P, at->op == O_SUB ? N_NEG : N_POS, at);
        node->a = parse_unary(P, 0);
        node = done(P, node);
    } else {
        node = parse_primary(P);
    }
    node = parse_postfix(P, node);
    if (with_filter) node = parse_filter_expr(P, node);
    leave(P);
    return node;
}

static jnode *parse_expression(jparser *P, int condexpr) {
    enter(P);
    jnode *n = condexpr ? parse_condexpr(P) : parse_or_(P);
    leave(P);
    return n;
}

static int tuple_end(jparser *P, const char *extra_end) {
    int t = cur(P)->type;
    return t == T_VAR_END || t == T_BLOCK_END || is_op(P, O_RPAREN) || (extra_end && is_name(P, extra_end));
}

static jnode *parse_tuple(jparser *P, int simplified, int condexpr, const char *extra_end, int explicit_parens) {
    jtok *at = cur(P);
    nlist args = {0};
    int is_tuple = 0;
    for (;;) {
        if (args.n) expect_op(P, O_COMMA);
        if (tuple_end(P, extra_end)) break;
        nl_push(P, &args, simplified ? parse_primary(P) : parse_expression(P, condexpr));
        if (is_op(P, O_COMMA)) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens) pfail(P, cur(P), "an expression");
    }
    jnode *n = mk(P, N_TUPLE, at);
    set_kids(n, &args);
    return done(P, n);
}

/* ---- statements ---- */
static void parse_body(jparser *P, nlist *body, const char *const *ends, int n_ends, const jtok *opener);

/* [:] %} body {% END ... where END is one of ends; drop: consume END's name. */
static void parse_block(jparser *P, nlist *body, const char *const *ends, int n_ends, const jtok *opener, int drop) {
    if (is_op(P, O_COLON)) take(P);
    expect_type(P, T_BLOCK_END, "end of statement block");
    enter(P);
    parse_body(P, body, ends, n_ends, opener);
    leave(P);
    if (drop) take(P);
}

/* A name, ns.attr (with_ns), or names a, b (not name_only) to assign to. */
static jnode *parse_target(jparser *P, const char *extra_end, int name_only, int with_ns) {
    jtok *at = cur(P);
    if (with_ns && at->type == T_NAME && peek(P, 1)->type == T_OP && peek(P, 1)->op == O_DOT &&
        peek(P, 2)->type == T_NAME) {
        jnode *ns = mk(P, N_NAME, at);
        ns->name = take(P)->name;
        take(P);
        jnode *n = mk(P, N_GETATTR, at);
        n->a = ns;
        n->name = take(P)->name;
        return done(P, n);
    }
    if (name_only) {
        if (at->type != T_NAME) pfail(P, at, "a name");
        jnode *n = mk(P, N_NAME, at);
        n->name = take(P)->name;
        return n;
    }
    jnode *t = parse_tuple(P, 1, 0, extra_end, 0);
    int ok = t->kind == N_NAME;
    if (t->kind == N_TUPLE) {
        ok = 1;
        for (int i = 0; i < t->n_kids; i++) ok &= t->kids[i]->kind == N_NAME;
    }
    if (!ok) pfail_at(P, t->line, t->col, "can't assign to that (expected a name or names)");
    return t;
}

static jnode *parse_for(jparser *P, const jtok *at) {
    static const char *const ends[] = {"endfor", "else"}, *const ends2[] = {"endfor"};
    jnode *n = mk(P, N_FOR, at);
    n->b = parse_target(P, "in", 0, 0);
    if (!is_name(P, "in")) pfail(P, cur(P), "'in'");
    take(P);
    n->a = parse_tuple(P, 0, 0, "recursive", 0);
    if (is_name(P, "if")) {
        take(P);
        n->c = parse_expression(P, 1);
    }
    if (is_name(P, "recursive")) pfail_at(P, cur(P)->line, cur(P)->col, "recursive loops are not supported by this interpreter");
    nlist body = {0}, els = {0};
    P->loops++;
    parse_block(P, &body, ends, 2, at, 0);
    P->loops--;
    if (tok_is(take(P), "else")) parse_block(P, &els, ends2, 1, at, 1);
    set_kids(n, &body);
    n->els = els.v, n->n_els = els.n;
    return done(P, n);
}

static jnode *parse_if(jparser *P, const jtok *at) {
    static const char *const ends[] = {"elif", "else", "endif"}, *const ends2[] = {"endif"};
    jnode *prev = NULL;
    /* an elif chain is built flat, then linked from the last one back (done() needs children first) */
    nlist ifs = {0};
    for (;;) {
        jnode *n = mk(P, N_IF, ifs.n ? cur(P) : at);
        n->op = ifs.n > 0; /* an elif */
        n->a = parse_tuple(P, 0, 0, NULL, 0);
        nlist body = {0};
        parse_block(P, &body, ends, 3, at, 0);
        set_kids(n, &body);
        nl_push(P, &ifs, n);
        jtok *t = take(P);
        if (tok_is(t, "elif")) continue;
        if (tok_is(t, "else")) {
            nlist els = {0};
            parse_block(P, &els, ends2, 1, at, 1);
            n->els = els.v, n->n_els = els.n;
        }
        break;
    }
    for (int k = ifs.n - 1; k >= 0; k--) {
        jnode *n = ifs.v[k];
        if (prev) {
            n->els = palloc(P, sizeof *n->els);
            n->els[0] = prev;
            n->n_els = 1;
        }
        prev = done(P, n);
    }
    return prev;
}

static jnode *parse_set(jparser *P, const jtok *at) {
    static const char *const ends[] = {"endset"};
    jnode *target = parse_target(P, NULL, 0, 1);
    if (is_op(P, O_ASSIGN)) {
        take(P);
        jnode *n = mk(P, N_SET, at);
        n->b = target;
        n->a = parse_tuple(P, 0, 1, NULL, 0);
        return done(P, n);
    }
    jnode *n = mk(P, N_SETBLOCK, at);
    n->b = target;
    n->a = parse_filter(P, NULL, 0);
    nlist body = {0};
    parse_block(P, &body, ends, 1, at, 1);
    set_kids(n, &body);
    return done(P, n);
}

static jnode *parse_macro(jparser *P, const jtok *at) {
    static const char *const ends[] = {"endmacro"};
    jnode *n = mk(P, N_MACRO, at);
    n->name = parse_target(P, NULL, 1, 0)->name;
    expect_op(P, O_LPAREN);
    nlist defaults = {0};
    const char **params = NULL;
    int cap = 0, any_default = 0;
    while (!is_op(P, O_RPAREN)) {
        if (defaults.n) expect_op(P, O_COMMA);
        jtok *pt = cur(P);
        const char *param = parse_target(P, NULL, 1, 0)->name;
        jnode *def = NULL;
        if (is_op(P, O_ASSIGN)) {
            take(P);
            def = parse_expression(P, 1);
            any_default = 1;
        } else if (any_default) {
            pfail_at(P, pt->line, pt->col, "non-default argument follows default argument");
        }
        if (defaults.n == cap) {
            cap = cap ? 2 * cap : 4;
            const char **np = palloc(P, (size_t)cap * sizeof *np);
            if (defaults.n) memcpy(np, params, (size_t)defaults.n * sizeof *np);
            params = np;
        }
        params[defaults.n] = param;
        nl_push(P, &defaults, def);
    }
    take(P);
    n->kwname = params;
    n->kwval = defaults.v;
    n->n_kw = defaults.n;
    int loops = P->loops;
    P->loops = 0;
    nlist body = {0};
    parse_block(P, &body, ends, 1, at, 1);
    P->loops = loops;
    set_kids(n, &body);
    return done(P, n);
}

static jnode *parse_with(jparser *P, const jtok *at) {
    static const char *const ends[] = {"endwith"};
    jnode *n = mk(P, N_WITH, at);
    nlist vals = {0};
    const char **names = NULL;
    int cap = 0;
    while (cur(P)->type != T_BLOCK_END) {
        if (vals.n) expect_op(P, O_COMMA);
        const char *name = parse_target(P, NULL, 1, 0)->name;
        expect_op(P, O_ASSIGN);
        if (vals.n == cap) {
            cap = cap ? 2 * cap : 4;
            const char **nn = palloc(P, (size_t)cap * sizeof *nn);
            if (vals.n) memcpy(nn, names, (size_t)vals.n * sizeof *nn);
            names = nn;
        }
        names[vals.n] = name;
        nl_push(P, &vals, parse_expression(P, 1));
    }
    n->kwname = names;
    n->kwval = vals.v;
    n->n_kw = vals.n;
    nlist body = {0};
    parse_block(P, &body, ends, 1, at, 1);
    set_kids(n, &body);
    return done(P, n);
}

/* The block of a tag that only wraps a body: {% filter f %}, {% generation %}. */
static jnode *parse_wrapper(jparser *P, const jtok *at, int kind, const char *end) {
    const char *ends[] = {end};
    jnode *n = mk(P, kind, at);
    if (kind == N_FILTERBLOCK) n->a = parse_filter(P, NULL, 1);
    int loops = P->loops;
    if (kind == N_SCOPE) P->loops = 0; /* a caller() body: break cannot leave it */
    nlist body = {0};
    parse_block(P, &body, ends, 1, at, 1);
    P->loops = loops;
    set_kids(n, &body);
    return done(P, n);
}

/* {% NAME ... %} from its name (the {% just before); the statements go to
 * body; a statement's node is where its {% is. */
static void parse_statement(jparser *P, nlist *body, const char *const *ends, int n_ends, const jtok *opener) {
    jtok *name = cur(P), *at = name - 1;
    char b[80];
    if (name->type != T_NAME) pfail_at(P, name->line, name->col, "tag name expected, found %s", describe(name, b));
    const char *s = name->name;
    take(P);
    if (!strcmp(s, "for")) nl_push(P, body, parse_for(P, at));
    else if (!strcmp(s, "if")) nl_push(P, body, parse_if(P, at));
    else if (!strcmp(s, "set")) nl_push(P, body, parse_set(P, at));
    else if (!strcmp(s, "macro")) nl_push(P, body, parse_macro(P, at));
    else if (!strcmp(s, "with")) nl_push(P, body, parse_with(P, at));
    else if (!strcmp(s, "filter")) nl_push(P, body, parse_wrapper(P, at, N_FILTERBLOCK, "endfilter"));
    else if (!strcmp(s, "generation")) nl_push(P, body, parse_wrapper(P, at, N_SCOPE, "endgeneration"));
    else if (!strcmp(s, "print")) {
        int k = 0;
        while (cur(P)->type != T_BLOCK_END) {
            if (k++) expect_op(P, O_COMMA);
            jnode *n = mk(P, N_PRINT, at);
            n->a = parse_expression(P, 1);
            nl_push(P, body, done(P, n));
        }
    } else if (!strcmp(s, "break") || !strcmp(s, "continue")) {
        if (!P->loops) pfail_at(P, name->line, name->col, "'%s' outside a loop", s);
        nl_push(P, body, mk(P, s[0] == 'b' ? N_BREAK : N_CONTINUE, at));
    } else {
        static const char *const unsupported[] = {"block", "extends", "include", "import", "from", "call", "autoescape"};
        for (size_t k = 0; k < sizeof unsupported / sizeof *unsupported; k++)
            if (!strcmp(s, unsupported[k]))
                pfail_at(P, name->line, name->col, "the '%s' tag is not supported by this interpreter", s);
        if (!n_ends) pfail_at(P, name->line, name->col, "unknown tag '%.60s'", s);
        char want[160];
        int w = 0;
        for (int k = 0; k < n_ends; k++)
            w += snprintf(want + w, sizeof want - (size_t)w, "%s'%s'", k ? " or " : "", ends[k]);
        pfail_at(P, name->line, name->col, "unknown tag '%.60s' (expected %s to close the '%s' at line %d)", s, want,
                 (opener + 1)->name, opener->line);
    }
}

/* Statements until EOF (n_ends 0) or a {% END %} (P->i left on END's name). */
static void parse_body(jparser *P, nlist *body, const char *const *ends, int n_ends, const jtok *opener) {
    for (;;) {
        jtok *t = cur(P);
        if (t->type == T_DATA) {
            jnode *n = mk(P, N_TEXT, t);
            n->val = t->val;
            nl_push(P, body, n);
            take(P);
        } else if (t->type == T_VAR_BEGIN) {
            take(P);
            jnode *n = mk(P, N_PRINT, t);
            n->a = parse_tuple(P, 0, 1, NULL, 0);
            expect_type(P, T_VAR_END, "end of print statement");
            nl_push(P, body, done(P, n));
        } else if (t->type == T_BLOCK_BEGIN) {
            take(P);
            for (int k = 0; k < n_ends; k++)
                if (is_name(P, ends[k])) return;
            parse_statement(P, body, ends, n_ends, opener);
            expect_type(P, T_BLOCK_END, "end of statement block");
        } else if (t->type == T_EOF) {
            if (!n_ends) return;
            char want[160];
            int w = 0;
            for (int k = 0; k < n_ends; k++)
                w += snprintf(want + w, sizeof want - (size_t)w, "%s'%s'", k ? " or " : "", ends[k]);
            pfail_at(P, t->line, t->col, "unexpected end of template: expected %s to close the '%s' at line %d:%d", want,
                     (opener + 1)->name, opener->line, opener->col);
        } else {
            char b[80];
            pfail_at(P, t->line, t->col, "unexpected %s", describe(t, b));
        }
    }
}

/* Jinja refuses an unknown filter or test when it compiles the template,
 * except inside an {% if %} or a conditional expression (a "soft" frame),
 * where it fails only when reached; a loop, macro, with or block body is a
 * frame of its own again. The filters Jinja has and this interpreter does
 * not run are treated the same way. */
static void check_names(jparser *P, const jnode *n, int soft);

static void check_list(jparser *P, jnode *const *v, int k, int soft) {
    for (int i = 0; i < k; i++) check_names(P, v[i], soft);
}

static void check_names(jparser *P, const jnode *n, int soft) {
    if (n) {
        if ((n->kind == N_FILTER || n->kind == N_TEST) && n->fid < 0 && !soft) {
            const char *what = n->kind == N_FILTER ? "filter" : "test";
            if (n->fid == -1) pfail_at(P, n->line, n->col, "no %s named '%.60s'", what, n->name);
            pfail_at(P, n->line, n->col, "the %s '%s' is not supported by this interpreter", what, n->name);
        }
        int inner = 0, s = soft;
        switch (n->kind) {
        case N_IF:
            while (n->kind == N_IF) { /* an elif chain, without recursion */
                check_names(P, n->a, 1);
                check_list(P, n->kids, n->n_kids, 1);
                if (n->n_els == 1 && n->els[0]->kind == N_IF && n->els[0]->op == 1) n = n->els[0];
                else break;
            }
            check_list(P, n->els, n->n_els, 1);
            return;
        case N_CONDEXPR: s = 1; break;
        case N_FOR:
            check_names(P, n->a, soft);
            check_names(P, n->b, 0);
            check_names(P, n->c, 0);
            check_list(P, n->kids, n->n_kids, 0);
            check_list(P, n->els, n->n_els, 0);
            return;
        case N_WITH: check_list(P, n->kwval, n->n_kw, soft); inner = 1; break;
        case N_MACRO: case N_SETBLOCK: case N_FILTERBLOCK: case N_SCOPE: inner = 1; s = 0; break;
        default: break;
        }
        if (inner) {
            if (n->kind != N_WITH) check_list(P, n->kwval, n->n_kw, 0);
            check_names(P, n->a, 0);
            check_names(P, n->b, 0);
            check_list(P, n->kids, n->n_kids, 0);
            return;
        }
        check_names(P, n->a, s);
        check_names(P, n->b, s);
        check_names(P, n->c, s);
        check_list(P, n->kids, n->n_kids, s);
        check_list(P, n->els, n->n_els, s);
        check_list(P, n->kwval, n->n_kw, s);
    }
}

/* ---- scoping: what Jinja decides when it compiles (jinja2/idtracking.py) ----
 * Each frame (the template, a loop body, a loop's else, a macro, a with, a
 * block capture) gives every name it reads or assigns one reference, made
 * where the name first appears in the frame's text: a name read first is
 * looked up outside (a frame around that knows it, else the variables); a
 * name assigned first aliases the frame around's when that one knows it, and
 * is otherwise missing (undefined, even when a variable of that name exists)
 * until assigned; assigned in some branches of an if only, it is looked up.
 * The runtime keeps values dynamically, which agrees, once each frame's
 * missing names are declared missing on entry: that is what this computes. */
enum { K_RESOLVE, K_ALIAS, K_MISSING, K_PARAM };
enum { SCOPE_WORK_MAX = 20000000 }; /* the analysis copies a frame's names at each if */

typedef struct symtab symtab;
struct symtab {
    const symtab *parent;
    const char **names; /* the frame's references (interned names) */
    uint8_t *kind;
    int n, cap;
    const char **stores; /* the names assigned so far */
    int n_st, cap_st;
};

static int st_index(jparser *P, const char *const *v, int n, const char *name) {
    P->work += n;
    if (P->work > SCOPE_WORK_MAX) pfail_at(P, 1, 1, "the template is too complex to analyse (a bound of this interpreter)");
    for (int i = 0; i < n; i++)
        if (v[i] == name) return i;
    return -1;
}

static int st_known(jparser *P, const symtab *s, const char *name) { /* find_ref */
    for (; s; s = s->parent)
        if (st_index(P, s->names, s->n, name) >= 0) return 1;
    return 0;
}

static void st_define(jparser *P, symtab *s, const char *name, int kind) {
    int i = st_index(P, s->names, s->n, name);
    if (i < 0) {
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 8;
            const char **nn = palloc(P, (size_t)cap * sizeof *nn);
            uint8_t *nk = palloc(P, (size_t)cap);
            if (s->n) memcpy(nn, s->names, (size_t)s->n * sizeof *nn), memcpy(nk, s->kind, (size_t)s->n);
            s->names = nn, s->kind = nk, s->cap = cap;
        }
        i = s->n++;
        s->names[i] = name;
    }
    s->kind[i] = (uint8_t)kind;
}

static void st_add_store(jparser *P, symtab *s, const char *name) {
    if (st_index(P, s->stores, s->n_st, name) >= 0) return;
    if (s->n_st == s->cap_st) {
        int cap = s->cap_st ? 2 * s->cap_st : 8;
        const char **ns = palloc(P, (size_t)cap * sizeof *ns);
        if (s->n_st) memcpy(ns, s->stores, (size_t)s->n_st * sizeof *ns);
        s->stores = ns, s->cap_st = cap;
    }
    s->stores[s->n_st++] = name;
}

static void st_load(jparser *P, symtab *s, const char *name) {
    if (!st_known(P, s, name)) st_define(P, s, name, K_RESOLVE);
}

static void st_store(jparser *P, symtab *s, const char *name) {
    st_add_store(P, s, name);
    if (st_index(P, s->names, s->n, name) < 0) st_define(P, s, name, st_known(P, s->parent, name) ? K_ALIAS : K_MISSING);
}

static void st_param(jparser *P, symtab *s, const char *name) {
    st_add_store(P, s, name);
    st_define(P, s, name, K_PARAM);
}

static symtab *st_new(jparser *P, const symtab *parent) {
    symtab *s = palloc(P, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

static symtab *st_copy(jparser *P, const symtab *s) {
    symtab *c = st_new(P, s->parent);
    P->work += s->n + s->n_st;
    for (int i = 0; i < s->n; i++) st_define(P, c, s->names[i], s->kind[i]);
    for (int i = 0; i < s->n_st; i++) st_add_store(P, c, s->stores[i]);
    return c;
}

/* After an if: its three branches (body, the elifs, else) into s; a name
 * assigned in some branches only is looked up again (alias or resolve). */
static void branch_update(jparser *P, symtab *s, symtab *const br[3]) {
    symtab *fresh = st_new(P, NULL); /* names first assigned in a branch: in names, their count in kind */
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < br[b]->n_st; i++) {
            const char *t = br[b]->stores[i];
            if (st_index(P, s->stores, s->n_st, t) >= 0) continue;
            int k = st_index(P, fresh->names, fresh->n, t);
            st_define(P, fresh, t, k < 0 ? 1 : fresh->kind[k] + 1);
        }
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < br[b]->n; i++) st_define(P, s, br[b]->names[i], br[b]->kind[i]);
        for (int i = 0; i < br[b]->n_st; i++) st_add_store(P, s, br[b]->stores[i]);
    }
    for (int i = 0; i < fresh->n; i++)
        if (fresh->kind[i] != 3) st_define(P, s, fresh->names[i], st_known(P, s->parent, fresh->names[i]) ? K_ALIAS : K_RESOLVE);
}

static void sym_visit(jparser *P, symtab *s, const jnode *n);

static void sym_list(jparser *P, symtab *s, jnode *const *v, int k) {
    for (int i = 0; i < k; i++) sym_visit(P, s, v[i]);
}

/* An if (head: with its elifs and else, as Jinja's If node holds them; else
 * an elif alone, as Jinja visits one in the elif branch). */
static void sym_if(jparser *P, symtab *s, const jnode *n, int head) {
    sym_visit(P, s, n->a);
    symtab *br[3] = {st_copy(P, s), st_copy(P, s), st_copy(P, s)};
    sym_list(P, br[0], n->kids, n->n_kids);
    if (head) {
        const jnode *e = n;
        while (e->n_els == 1 && e->els[0]->kind == N_IF && e->els[0]->op == 1) sym_if(P, br[1], e = e->els[0], 0);
        sym_list(P, br[2], e->els, e->n_els);
    }
    branch_update(P, s, br);
}

/* What one node reads and assigns in the frame it is in (FrameSymbolVisitor). */
static void sym_visit(jparser *P, symtab *s, const jnode *n) {
    if (!n) return;
    switch (n->kind) {
    case N_NAME: st_load(P, s, n->name); return;
    case N_IF: sym_if(P, s, n, 1); return;
    case N_SET:
        sym_visit(P, s, n->a);
        if (n->b->kind == N_NAME) st_store(P, s, n->b->name);
        else if (n->b->kind == N_GETATTR) st_load(P, s, n->b->a->name); /* ns.x = ...: reads ns */
        else
            for (int i = 0; i < n->b->n_kids; i++) st_store(P, s, n->b->kids[i]->name);
        return;
    case N_SETBLOCK:
        if (n->b->kind == N_NAME) st_store(P, s, n->b->name);
        else if (n->b->kind == N_GETATTR) st_load(P, s, n->b->a->name);
        else
            for (int i = 0; i < n->b->n_kids; i++) st_store(P, s, n->b->kids[i]->name);
        return;
    case N_MACRO: st_store(P, s, n->name); return;
    case N_FOR: sym_visit(P, s, n->a); return;                  /* the rest is the loop's frame */
    case N_WITH: sym_list(P, s, n->kwval, n->n_kw); return;      /* the values; the body is its frame */
    case N_FILTERBLOCK: sym_visit(P, s, n->a); return;
    case N_SCOPE: return;
    default:
        sym_visit(P, s, n->a);
        sym_visit(P, s, n->b);
        sym_visit(P, s, n->c);
        sym_list(P, s, n->kids, n->n_kids);
        sym_list(P, s, n->els, n->n_els);
        sym_list(P, s, n->kwval, n->n_kw);
    }
}

static void sym_nested(jparser *P, const symtab *s, jnode *const *v, int k);

/* A frame: its parameters, expressions read on entry (a macro's defaults),
 * its statements; its missing names out; then the frames inside it. */
static void sym_frame(jparser *P, const symtab *parent, const char *const *params, int n_params, jnode *const *pre,
                      int n_pre, jnode *const *body, int n_body, const char ***miss, int *n_miss) {
    symtab *s = st_new(P, parent);
    for (int i = 0; i < n_params; i++) st_param(P, s, params[i]);
    sym_list(P, s, pre, n_pre);
    sym_list(P, s, body, n_body);
    int k = 0;
    for (int i = 0; i < s->n; i++) k += s->kind[i] == K_MISSING;
    *n_miss = k;
    *miss = k ? palloc(P, (size_t)k * sizeof **miss) : NULL;
    for (int i = 0, j = 0; i < s->n; i++)
        if (s->kind[i] == K_MISSING) (*miss)[j++] = s->names[i];
    sym_nested(P, s, body, n_body);
}

static void sym_nested(jparser *P, const symtab *s, jnode *const *v, int k) {
    for (int i = 0; i < k; i++) {
        jnode *n = v[i];
        switch (n->kind) {
        case N_IF:
            for (;;) {
                sym_nested(P, s, n->kids, n->n_kids);
                if (n->n_els == 1 && n->els[0]->kind == N_IF && n->els[0]->op == 1) n = n->els[0];
                else break;
            }
            sym_nested(P, s, n->els, n->n_els);
            break;
        case N_FOR: {
            const char **params = palloc(P, (size_t)(n->b->n_kids + 2) * sizeof *params);
            int np = 0;
            if (n->b->kind == N_NAME) params[np++] = n->b->name;
            else
                for (int j = 0; j < n->b->n_kids; j++) params[np++] = n->b->kids[j]->name;
            params[np++] = P->t->loop_name;
            sym_frame(P, s, params, np, NULL, 0, n->kids, n->n_kids, &n->miss, &n->n_miss);
            sym_frame(P, s, NULL, 0, NULL, 0, n->els, n->n_els, &n->miss_els, &n->n_miss_els);
            break;
        }
        case N_MACRO:
            sym_frame(P, s, n->kwname, n->n_kw, n->kwval, n->n_kw, n->kids, n->n_kids, &n->miss, &n->n_miss);
            break;
        case N_WITH: sym_frame(P, s, n->kwname, n->n_kw, NULL, 0, n->kids, n->n_kids, &n->miss, &n->n_miss); break;
        case N_SETBLOCK:
        case N_FILTERBLOCK:
        case N_SCOPE: sym_frame(P, s, NULL, 0, NULL, 0, n->kids, n->n_kids, &n->miss, &n->n_miss); break;
        default: break;
        }
    }
}

/* "\r\n" and "\r" as "\n", one final newline dropped (keep_trailing_newline=False). */
static void normalize(jparser *P, const char *src, size_t len) {
    char *o = palloc(P, len + 1);
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[w++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            o[w++] = src[i];
        }
    }
    if (w && o[w - 1] == '\n') w--;
    o[w] = '\0';
    P->src = o;
    P->n = w;
}

/* Lexes and parses into P->t; errors longjmp back here. */
static gpt2_status parse_all(jparser *P, const char *src, size_t len) {
    if (setjmp(P->jmp)) return P->status;
    normalize(P, src, len);
    P->t->loop_name = intern(P, "loop", 4);
    lex(P);
    nlist body = {0};
    parse_body(P, &body, NULL, 0, NULL);
    check_list(P, body.v, body.n, 0);
    P->t->body = body.v;
    P->t->n_body = body.n;
    sym_frame(P, NULL, NULL, 0, NULL, 0, body.v, body.n, &P->t->miss, &P->t->n_miss);
    return GPT2_OK;
}

gpt2_status jinja_parse(const char *name, const char *src, size_t len, jinja_template **out, gpt2_error *err) {
    *out = NULL;
    const char *nm = name ? name : "template";
    if (!src && len) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: no template text", nm);
    if (len > JINJA_MAX_SOURCE)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes of template, more than this interpreter reads (%zu)", nm,
                         len, JINJA_MAX_SOURCE);
    jinja_template *t = calloc(1, sizeof *t);
    jparser *P = calloc(1, sizeof *P);
    char *tn = t ? jarena_alloc(&t->arena, strlen(nm) + 1) : NULL;
    if (!t || !P || !tn) {
        jinja_free(t);
        free(P);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", nm);
    }
    strcpy(tn, nm);
    t->name = tn;
    P->t = t;
    P->err = err;
    P->line = 1;
    jlocale loc;
    jlocale_enter(&loc); /* number literals read as Python reads them */
    gpt2_status st = parse_all(P, src ? src : "", len);
    jlocale_leave(&loc);
    free(P);
    if (st != GPT2_OK) {
        jinja_free(t);
        return st;
    }
    *out = t;
    return GPT2_OK;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t);
}
