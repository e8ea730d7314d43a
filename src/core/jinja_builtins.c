/* jinja_builtins.c — what a template calls: Jinja2's filters and tests,
 * the sandbox's attribute and item access (a method of str, dict or list
 * before an item), Python's string methods, and the globals (range, dict,
 * namespace, and Hugging Face's raise_exception and strftime_now). Each
 * follows the Python it stands for (jinja2/filters.py, jinja2/tests.py,
 * jinja2/sandbox.py, CPython's str), messages included where they can be. */
#include "jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "error.h"

/* ---- arguments ---- */
/* Binds args and keyword args to params[0..np); out[i] undefined where not
 * given (has[i] 0); fails as Python does on too many, unknown or twice. */
static void bind_params(jrun *r, const jnode *at, const char *fname, const char *const *params, int np, jv *args, int n,
                        const char **kwn, jv *kwv, int nkw, jv *out, int *has) {
    if (n > np) jfail(r, at, GPT2_ERR_TEMPLATE, "%s() takes at most %d argument(s) (%d given)", fname, np, n);
    for (int i = 0; i < np; i++) out[i] = jv_undef(), has[i] = i < n;
    for (int i = 0; i < n; i++) out[i] = args[i];
    for (int k = 0; k < nkw; k++) {
        int j = 0;
        while (j < np && strcmp(params[j], kwn[k]) != 0) j++;
        if (j == np) jfail(r, at, GPT2_ERR_TEMPLATE, "%s() got an unexpected keyword argument '%s'", fname, kwn[k]);
        if (has[j]) jfail(r, at, GPT2_ERR_TEMPLATE, "%s() got multiple values for argument '%s'", fname, kwn[k]);
        out[j] = kwv[k], has[j] = 1;
    }
}

static jv need_str(jrun *r, const jnode *at, jv v, const char *what) {
    if (v.t == JV_UNDEF) jundef_fail(r, at, v);
    if (v.t != JV_STR) jfail(r, at, GPT2_ERR_TEMPLATE, "%s must be str, not %s", what, jv_typename(v));
    return v;
}

static int64_t need_int(jrun *r, const jnode *at, jv v) {
    if (v.t == JV_UNDEF) jundef_fail(r, at, v);
    if (v.t == JV_BOOL) return v.b;
    if (v.t != JV_INT) jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' object cannot be interpreted as an integer", jv_typename(v));
    return v.i;
}

static jv list_of(jrun *r, jv *items, size_t n, uint8_t flags) {
    jv l = jv_list(r, n, flags);
    if (n) memcpy(l.l->v, items, n * sizeof(jv));
    return l;
}

/* ---- Python's str, character by character ---- */
static int cased(uint32_t c) {
    if (c >= 0x110000) return 0;
    int k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static int case_ignorable(uint32_t c) {
    if (c == '\'' || c == '.' || c == ':' || c == 0x2019 || c == 0xB7) return 1;
    if (c >= 0x110000) return 0;
    int k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

/* The full mappings Python applies beyond one character for one (SpecialCasing.txt's common ones). */
static const char *special_case(uint32_t c, int mode) { /* mode 0 upper, 1 title */
    switch (c) {
    case 0xDF: return mode ? "Ss" : "SS";
    case 0x149: return mode ? "\xCA\xBCN" : "\xCA\xBCN";
    case 0xFB00: return mode ? "Ff" : "FF";
    case 0xFB01: return mode ? "Fi" : "FI";
    case 0xFB02: return mode ? "Fl" : "FL";
    case 0xFB03: return mode ? "Ffi" : "FFI";
    case 0xFB04: return mode ? "Ffl" : "FFL";
    case 0xFB05:
    case 0xFB06: return mode ? "St" : "ST";
    }
    return NULL;
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE };

/* One character of s (at i, c) mapped: Python's lower keeps the final sigma rule. */
static void put_cased(jrun *r, jsb *b, const char *s, size_t n, size_t i, uint32_t c, int mode) {
    if (c >= 0x110000) {
        u8_put(r, b, c);
        return;
    }
    const char *sp = mode != CASE_LOWER ? special_case(c, mode == CASE_TITLE) : NULL;
    if (sp) {
        jsb_puts(r, b, sp);
        return;
    }
    if (mode == CASE_LOWER && c == 0x130) {
        jsb_puts(r, b, "i\xCC\x87");
        return;
    }
    if (mode == CASE_LOWER && c == 0x3A3) { /* final sigma: cased before, no cased after (past case-ignorables) */
        int before = 0, after = 0;
        uint32_t x;
        for (size_t j = i; j > 0;) {
            j = u8_prev(s, j);
            u8_next(s, n, j, &x);
            if (!case_ignorable(x)) {
                before = cased(x);
                break;
            }
        }
        for (size_t j = i + u8_next(s, n, i, &x); j < n;) {
            j += u8_next(s, n, j, &x);
            if (!case_ignorable(x)) {
                after = cased(x);
                break;
            }
        }
        u8_put(r, b, before && !after ? 0x3C2 : 0x3C3);
        return;
    }
    utf8proc_int32_t m = mode == CASE_UPPER ? utf8proc_toupper((utf8proc_int32_t)c)
                         : mode == CASE_LOWER ? utf8proc_tolower((utf8proc_int32_t)c)
                                              : utf8proc_totitle((utf8proc_int32_t)c);
    u8_put(r, b, (uint32_t)m);
}

/* upper(), lower(), title(), capitalize() (how: 'u', 'l', 't', 'c'). */
static jv py_case(jrun *r, jv s, char how) {
    jsb b = {0};
    int prev_cased = 0, first = 1;
    uint32_t c;
    for (size_t i = 0, k; i < s.s.n; i += k) {
        k = u8_next(s.s.p, s.s.n, i, &c);
        int mode = how == 'u' ? CASE_UPPER : how == 'l' ? CASE_LOWER
                   : how == 'c' ? (first ? CASE_TITLE : CASE_LOWER) : (prev_cased ? CASE_LOWER : CASE_TITLE);
        if (c < 0x80 && (mode == CASE_LOWER ? !(c >= 'A' && c <= 'Z') : !(c >= 'a' && c <= 'z'))) jsb_put(r, &b, s.s.p + i, 1);
        else put_cased(r, &b, s.s.p, s.s.n, i, c, mode);
        prev_cased = cased(c);
        first = 0;
    }
    return jsb_value(r, &b);
}

/* Is c among the characters of chars (a set), or whitespace when chars is none? */
static int strip_char(uint32_t c, jv chars) {
    if (chars.t != JV_STR) return py_isspace(c);
    uint32_t x;
    for (size_t i = 0, k; i < chars.s.n; i += k) {
        k = u8_next(chars.s.p, chars.s.n, i, &x);
        if (x == c) return 1;
    }
    return 0;
}

static jv py_strip(jrun *r, const jnode *at, jv s, jv chars, int left, int right) {
    if (chars.t != JV_NONE && chars.t != JV_UNDEF) need_str(r, at, chars, "strip arg");
    size_t b = 0, e = s.s.n;
    uint32_t c;
    jcharge(r, at, s.s.n / 64);
    while (left && b < e) {
        size_t k = u8_next(s.s.p, e, b, &c);
        if (!strip_char(c, chars)) break;
        b += k;
    }
    while (right && e > b) {
        size_t p = u8_prev(s.s.p, e);
        if (p < b) p = b;
        u8_next(s.s.p, e, p, &c);
        if (!strip_char(c, chars)) break;
        e = p;
    }
    return jv_str(s.s.p + b, e - b);
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

static const char *rfind_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

/* str.split(sep, maxsplit) and rsplit (from the right). */
static jv py_split(jrun *r, const jnode *at, jv s, jv sep, int64_t maxsplit, int from_right) {
    jcharge(r, at, s.s.n / 16);
    size_t cap = 8, n = 0;
    jv *parts = jalloc(r, cap * sizeof *parts);
#define PUSH(p_, len_)                                                          \
    do {                                                                        \
        if (n == cap) {                                                         \
            jv *np_ = jalloc(r, 2 * cap * sizeof *np_);                         \
            memcpy(np_, parts, n * sizeof *np_);                                \
            parts = np_, cap *= 2;                                              \
        }                                                                       \
        parts[n++] = jv_str((p_), (len_));                                      \
    } while (0)
    const char *p = s.s.p;
    size_t len = s.s.n;
    uint32_t c;
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) { /* runs of whitespace; none at the ends */
        if (!from_right) {
            size_t i = 0;
            for (;;) {
                while (i < len && py_isspace((u8_next(p, len, i, &c), c))) i += u8_next(p, len, i, &c);
                if (i >= len) break;
                size_t b = i;
                if (maxsplit >= 0 && (int64_t)n == maxsplit) { /* the rest, its trailing spaces kept */
                    PUSH(p + b, len - b);
                    break;
                }
                while (i < len && !py_isspace((u8_next(p, len, i, &c), c))) i += u8_next(p, len, i, &c);
                PUSH(p + b, i - b);
            }
        } else {
            size_t e = len;
            for (;;) {
                while (e > 0) { size_t q = u8_prev(p, e); u8_next(p, len, q, &c); if (!py_isspace(c)) break; e = q; }
                if (e == 0) break;
                if (maxsplit >= 0 && (int64_t)n == maxsplit) { /* the rest, its leading spaces kept */
                    PUSH(p, e);
                    break;
                }
                size_t b = e;
                while (b > 0) { size_t q = u8_prev(p, b); u8_next(p, len, q, &c); if (py_isspace(c)) break; b = q; }
                PUSH(p + b, e - b);
                e = b;
            }
        }
    } else {
        need_str(r, at, sep, "sep");
        if (sep.s.n == 0) jfail(r, at, GPT2_ERR_TEMPLATE, "empty separator");
        if (!from_right) {
            size_t i = 0;
            const char *hit;
            while ((maxsplit < 0 || (int64_t)n < maxsplit) && (hit = find_bytes(p + i, len - i, sep.s.p, sep.s.n))) {
                PUSH(p + i, (size_t)(hit - (p + i)));
                i = (size_t)(hit - p) + sep.s.n;
            }
            PUSH(p + i, len - i);
        } else {
            size_t e = len;
            const char *hit;
            while ((maxsplit < 0 || (int64_t)n < maxsplit) && (hit = rfind_bytes(p, e, sep.s.p, sep.s.n))) {
                size_t after = (size_t)(hit - p) + sep.s.n;
                PUSH(p + after, e - after);
                e = (size_t)(hit - p);
            }
            PUSH(p, e);
        }
    }
#undef PUSH
    if (from_right)
        for (size_t i = 0; i < n / 2; i++) {
            jv t = parts[i];
            parts[i] = parts[n - 1 - i], parts[n - 1 - i] = t;
        }
    return list_of(r, parts, n, 0);
}

/* str.replace(old, new, count): an empty old goes between the characters. */
static jv py_replace(jrun *r, const jnode *at, jv s, jv old, jv rep, int64_t count) {
    jsb b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.s.n == 0) {
        uint32_t c;
        while (count < 0 || done < count) {
            jsb_put(r, &b, rep.s.p, rep.s.n), done++;
            if (i >= s.s.n) break;
            size_t k = u8_next(s.s.p, s.s.n, i, &c);
            jsb_put(r, &b, s.s.p + i, k);
            i += k;
        }
        jsb_put(r, &b, s.s.p + i, s.s.n - i);
        return jsb_value(r, &b);
    }
    const char *hit;
    while ((count < 0 || done < count) && (hit = find_bytes(s.s.p + i, s.s.n - i, old.s.p, old.s.n))) {
        jsb_put(r, &b, s.s.p + i, (size_t)(hit - (s.s.p + i)));
        jsb_put(r, &b, rep.s.p, rep.s.n);
        i = (size_t)(hit - s.s.p) + old.s.n;
        done++;
    }
    if (!done) return s;
    jsb_put(r, &b, s.s.p + i, s.s.n - i);
    (void)at;
    return jsb_value(r, &b);
}

/* The length of the line break at i (str.splitlines' set), or 0. */
static size_t line_break(const char *s, size_t n, size_t i) {
    uint32_t c;
    size_t k = u8_next(s, n, i, &c);
    if (c == '\r') return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
    if (c == '\n' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 || c == 0x2029)
        return k;
    return 0;
}

static jv py_splitlines(jrun *r, jv s, int keepends) {
    size_t cap = 8, n = 0, b = 0;
    jv *lines = jalloc(r, cap * sizeof *lines);
    uint32_t c;
    for (size_t i = 0; i < s.s.n;) {
        size_t k = line_break(s.s.p, s.s.n, i);
        if (!k) {
            i += u8_next(s.s.p, s.s.n, i, &c);
            continue;
        }
        if (n == cap) {
            jv *nl = jalloc(r, 2 * cap * sizeof *nl);
            memcpy(nl, lines, n * sizeof *nl);
            lines = nl, cap *= 2;
        }
        lines[n++] = jv_str(s.s.p + b, i - b + (keepends ? k : 0));
        i += k;
        b = i;
    }
    if (b < s.s.n) {
        if (n == cap) {
            jv *nl = jalloc(r, (cap + 1) * sizeof *nl);
            memcpy(nl, lines, n * sizeof *nl);
            lines = nl;
        }
        lines[n++] = jv_str(s.s.p + b, s.s.n - b);
    }
    return list_of(r, lines, n, 0);
}

/* s[start:end] by characters, for startswith/endswith/find/count's optional bounds. */
static jv str_window(jrun *r, const jnode *at, jv s, jv start, jv end, size_t *offset_chars) {
    *offset_chars = 0;
    if ((start.t == JV_UNDEF || start.t == JV_NONE) && (end.t == JV_UNDEF || end.t == JV_NONE)) return s;
    size_t nc;
    jv *chars = jv_items(r, at, s, &nc);
    int64_t len = (int64_t)nc, b = 0, e = len;
    if (start.t != JV_UNDEF && start.t != JV_NONE) b = need_int(r, at, start);
    if (end.t != JV_UNDEF && end.t != JV_NONE) e = need_int(r, at, end);
    if (b < 0) b = b + len < 0 ? 0 : b + len;
    if (e < 0) e = e + len < 0 ? 0 : e + len;
    if (b > len) b = len;
    if (e > len) e = len;
    *offset_chars = (size_t)b;
    if (e <= b) return b > len ? jv_str(NULL, 0) : jv_str(b < len ? chars[b].s.p : s.s.p + s.s.n, 0);
    const char *p = chars[b].s.p;
    return jv_str(p, (size_t)(chars[e - 1].s.p + chars[e - 1].s.n - p));
}

static int affix_one(jrun *r, const jnode *at, jv s, jv a, int suffix) {
    need_str(r, at, a, "the prefix");
    if (a.s.n > s.s.n) return 0;
    return memcmp(suffix ? s.s.p + s.s.n - a.s.n : s.s.p, a.s.p, a.s.n) == 0;
}

static int py_affix(jrun *r, const jnode *at, jv s, jv a, int suffix) {
    if (a.t == JV_LIST && (a.flags & JV_TUPLE)) {
        for (size_t i = 0; i < a.l->n; i++)
            if (affix_one(r, at, s, a.l->v[i], suffix)) return 1;
        return 0;
    }
    if (a.t != JV_STR)
        jfail(r, at, GPT2_ERR_TEMPLATE, "%s first arg must be str or a tuple of str, not %s",
              suffix ? "endswith" : "startswith", jv_typename(a));
    return affix_one(r, at, s, a, suffix);
}

/* ---- functions and methods ---- */
enum {
    /* globals */
    JF_RANGE, JF_DICT, JF_NAMESPACE, JF_RAISE, JF_STRFTIME, JF_LIPSUM, JF_CYCLER, JF_JOINER,
    /* str */
    JF_STRIP, JF_LSTRIP, JF_RSTRIP, JF_SPLIT, JF_RSPLIT, JF_SPLITLINES, JF_STARTSWITH, JF_ENDSWITH, JF_REPLACE,
    JF_UPPER, JF_LOWER, JF_TITLE, JF_CAPITALIZE, JF_FIND, JF_RFIND, JF_INDEX, JF_RINDEX, JF_COUNT, JF_JOIN,
    JF_ISDIGIT, JF_ISALPHA, JF_ISALNUM, JF_ISSPACE, JF_ISLOWER, JF_ISUPPER, JF_REMOVEPREFIX, JF_REMOVESUFFIX, JF_FORMAT,
    JF_STR_OTHER, /* a str method this interpreter does not run */
    /* dict */
    JF_GET, JF_KEYS, JF_VALUES, JF_ITEMS, JF_COPY,
    /* list */
    JF_LCOUNT, JF_LINDEX, JF_LCOPY,
    /* loop */
    JF_CYCLE
};

static const struct {
    const char *name;
    int id;
} str_methods[] = {
    {"strip", JF_STRIP}, {"lstrip", JF_LSTRIP}, {"rstrip", JF_RSTRIP}, {"split", JF_SPLIT}, {"rsplit", JF_RSPLIT},
    {"splitlines", JF_SPLITLINES}, {"startswith", JF_STARTSWITH}, {"endswith", JF_ENDSWITH},
    {"replace", JF_REPLACE}, {"upper", JF_UPPER}, {"lower", JF_LOWER}, {"title", JF_TITLE},
    {"capitalize", JF_CAPITALIZE}, {"find", JF_FIND}, {"rfind", JF_RFIND}, {"index", JF_INDEX},
    {"rindex", JF_RINDEX}, {"count", JF_COUNT}, {"join", JF_JOIN}, {"isdigit", JF_ISDIGIT},
    {"isalpha", JF_ISALPHA}, {"isalnum", JF_ISALNUM}, {"isspace", JF_ISSPACE}, {"islower", JF_ISLOWER},
    {"isupper", JF_ISUPPER}, {"removeprefix", JF_REMOVEPREFIX}, {"removesuffix", JF_REMOVESUFFIX},
    /* the rest of str's methods: attributes that exist, not run here */
    {"casefold", JF_STR_OTHER}, {"center", JF_STR_OTHER}, {"encode", JF_STR_OTHER}, {"expandtabs", JF_STR_OTHER},
 {"format", JF_FORMAT}, {"format_map", JF_STR_OTHER}, {"isascii", JF_STR_OTHER}, {"isdecimal", JF_STR_OTHER},
    {"isidentifier", JF_STR_OTHER}, {"isnumeric", JF_STR_OTHER}, {"isprintable", JF_STR_OTHER},
    {"istitle", JF_STR_OTHER}, {"ljust", JF_STR_OTHER}, {"maketrans", JF_STR_OTHER}, {"partition", JF_STR_OTHER},
    {"rjust", JF_STR_OTHER}, {"rpartition", JF_STR_OTHER}, {"swapcase", JF_STR_OTHER}, {"translate", JF_STR_OTHER},
    {"zfill", JF_STR_OTHER},
};
static const char *const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", "fromkeys"};
static const char *const list_unsafe[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

/* name: a string that lives as long as the render (a table's, or the template's) */
static jv bound(jrun *r, int id, jv self, const char *name) {
    jfunc *f = jalloc(r, sizeof *f);
    *f = (jfunc){.id = id, .name = name, .self = self};
    return (jv){.t = JV_FUNC, .fn = f};
}

static jv unsafe(jrun *r, const char *attr, jv obj) {
    char hint[160];
    snprintf(hint, sizeof hint, "access to attribute '%s' of '%s' object is unsafe.", attr, jv_typename(obj));
    char *h = jalloc(r, strlen(hint) + 1);
    strcpy(h, hint);
    return jv_undef_msg(r, h);
}

/* obj's Python attribute name: a bound method, or 0 when it has none. */
static int python_attr(jrun *r, jv obj, jv name, jv *out) {
    const char *s = name.s.p;
    size_t n = name.s.n;
    char nm[24];
    if (n >= sizeof nm || memchr(s, 0, n)) return 0;
    memcpy(nm, s, n);
    nm[n] = '\0';
    if (obj.t == JV_STR) {
        for (size_t i = 0; i < sizeof str_methods / sizeof *str_methods; i++)
            if (!strcmp(nm, str_methods[i].name)) return *out = bound(r, str_methods[i].id, obj, str_methods[i].name), 1;
    } else if (obj.t == JV_DICT) {
        static const struct { const char *name; int id; } m[] = {
            {"get", JF_GET}, {"keys", JF_KEYS}, {"values", JF_VALUES}, {"items", JF_ITEMS}, {"copy", JF_COPY}};
        for (size_t i = 0; i < sizeof m / sizeof *m; i++)
            if (!strcmp(nm, m[i].name)) return *out = bound(r, m[i].id, obj, m[i].name), 1;
        for (size_t i = 0; i < sizeof dict_unsafe / sizeof *dict_unsafe; i++)
            if (!strcmp(nm, dict_unsafe[i])) return *out = unsafe(r, dict_unsafe[i], obj), 1;
    } else if (obj.t == JV_LIST && !(obj.flags & JV_NOT_LIST)) {
        if (!strcmp(nm, "count")) return *out = bound(r, JF_LCOUNT, obj, "count"), 1;
        if (!strcmp(nm, "index")) return *out = bound(r, JF_LINDEX, obj, "index"), 1;
        if (!strcmp(nm, "copy") && !(obj.flags & JV_TUPLE)) return *out = bound(r, JF_LCOPY, obj, "copy"), 1;
        for (size_t i = 0; i < sizeof list_unsafe / sizeof *list_unsafe && !(obj.flags & JV_TUPLE); i++)
            if (!strcmp(nm, list_unsafe[i])) return *out = unsafe(r, list_unsafe[i], obj), 1;
    } else if (obj.t == JV_NS) {
        const jv *v = jv_dict_getn(obj.d, s, n);
        if (v) return *out = *v, 1;
    } else if (obj.t == JV_LOOP) {
        const jloop *lp = obj.loop;
        int64_t i = (int64_t)lp->i, len = (int64_t)lp->n;
        if (!strcmp(nm, "index")) return *out = jv_int(i + 1), 1;
        if (!strcmp(nm, "index0")) return *out = jv_int(i), 1;
        if (!strcmp(nm, "revindex")) return *out = jv_int(len - i), 1;
        if (!strcmp(nm, "revindex0")) return *out = jv_int(len - i - 1), 1;
        if (!strcmp(nm, "first")) return *out = jv_bool(i == 0), 1;
        if (!strcmp(nm, "last")) return *out = jv_bool(i == len - 1), 1;
        if (!strcmp(nm, "length")) return *out = jv_int(len), 1;
        if (!strcmp(nm, "depth")) return *out = jv_int(1), 1;
        if (!strcmp(nm, "depth0")) return *out = jv_int(0), 1;
        if (!strcmp(nm, "previtem"))
            return *out = i > 0 ? lp->items[i - 1] : jv_undef_msg(r, "there is no previous item"), 1;
        if (!strcmp(nm, "nextitem"))
            return *out = i + 1 < len ? lp->items[i + 1] : jv_undef_msg(r, "there is no next item"), 1;
        if (!strcmp(nm, "cycle")) return *out = bound(r, JF_CYCLE, obj, "cycle"), 1;
    }
    return 0;
}

/* object_type_repr: how Jinja names an object in "has no attribute" messages. */
static const char *type_repr(jv v) {
    switch (v.t) {
    case JV_NONE: return "None";
    case JV_NS: return "jinja2.utils.Namespace object";
    case JV_LOOP: return "jinja2.runtime.LoopContext object";
    case JV_MACRO: return "jinja2.runtime.Macro object";
    case JV_STR: return "str object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_DICT: return "dict object";
    case JV_LIST:
        if (v.flags & JV_VIEW) return v.flags & JV_KEYS ? "dict_keys object" : v.flags & JV_VALUES ? "dict_values object"
                                                                                      : "dict_items object";
        if (v.flags & JV_REVERSED) return "list_reverseiterator object";
        return v.flags & JV_ITER ? "generator object" : v.flags & JV_TUPLE ? "tuple object" : "list object";
    default: return "builtin_function_or_method object";
    }
}

/* The item for a key, or 0 (Python's obj[key] raising LookupError or TypeError). */
static int python_item(jrun *r, const jnode *at, jv obj, jv key, jv *out) {
    if (obj.t == JV_DICT) {
        if (jv_unhashable(key)) return 0; /* TypeError, which getitem turns undefined */
        const jv *v = jv_dict_get(r, at, obj.d, key);
        if (v) *out = *v;
        return v != NULL;
    }
    if ((obj.t == JV_LIST && !(obj.flags & JV_NOT_LIST)) || obj.t == JV_STR) {
        if (key.t != JV_INT && key.t != JV_BOOL) return 0;
        int64_t i = key.t == JV_BOOL ? key.b : key.i;
        if (obj.t == JV_LIST) {
            int64_t n = (int64_t)obj.l->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return 0;
            *out = obj.l->v[i];
            return 1;
        }
        size_t nc;
        jv *chars = jv_items(r, at, obj, &nc);
        if (i < 0) i += (int64_t)nc;
        if (i < 0 || i >= (int64_t)nc) return 0;
        *out = chars[i];
        return 1;
    }
    return 0;
}

jv jb_getattr(jrun *r, const jnode *at, jv v, jv name) {
    if (v.t == JV_UNDEF) jundef_fail(r, at, v);
    jv out;
    if (python_attr(r, v, name, &out)) return out;
    if (python_item(r, at, v, name, &out)) return out;
    return jv_undef_attr(r, type_repr(v), name);
}

jv jb_getitem(jrun *r, const jnode *at, jv v, jv key) {
    if (v.t == JV_UNDEF) jundef_fail(r, at, v);
    jv out;
    if (python_item(r, at, v, key, &out)) return out;
    if (key.t == JV_STR && python_attr(r, v, key, &out)) return out;
    return jv_undef_attr(r, type_repr(v), key);
}

/* ---- globals ---- */
int jb_global(jrun *r, const char *name, jv *out) {
    static const struct { const char *name; int id; } g[] = {
        {"range", JF_RANGE}, {"dict", JF_DICT}, {"namespace", JF_NAMESPACE}, {"raise_exception", JF_RAISE},
        {"strftime_now", JF_STRFTIME}, {"lipsum", JF_LIPSUM}, {"cycler", JF_CYCLER}, {"joiner", JF_JOINER}};
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        if (!strcmp(name, g[i].name)) return *out = bound(r, g[i].id, jv_none(), g[i].name), 1;
    return 0;
}

static jv call_range(jrun *r, const jnode *at, jv *args, int n, int nkw) {
    if (nkw) jfail(r, at, GPT2_ERR_TEMPLATE, "range() takes no keyword arguments");
    if (n < 1 || n > 3) jfail(r, at, GPT2_ERR_TEMPLATE, "range expected at most 3 arguments, got %d", n);
    int64_t start = 0, stop, step = 1;
    if (n == 1) stop = need_int(r, at, args[0]);
    else start = need_int(r, at, args[0]), stop = need_int(r, at, args[1]);
    if (n == 3) step = need_int(r, at, args[2]);
    if (step == 0) jfail(r, at, GPT2_ERR_TEMPLATE, "range() arg 3 must not be zero");
    /* the length, exact in unsigned 64 bits; every item lies between start and stop */
    uint64_t mag = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step, len = 0;
    if (step > 0 && start < stop) len = ((uint64_t)stop - (uint64_t)start - 1) / mag + 1;
    if (step < 0 && stop < start) len = ((uint64_t)start - (uint64_t)stop - 1) / mag + 1;
    if (len > 100000)
        jfail(r, at, GPT2_ERR_TEMPLATE, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jv l = jv_list(r, (size_t)len, 0);
    for (size_t i = 0; i < (size_t)len; i++) /* i * step alone may pass 64 bits, the sum never does */
        l.l->v[i] = jv_int((int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step));
    return l;
}

/* dict(...) and namespace(...): a mapping (or pairs) and keyword arguments. */
static jv make_dict(jrun *r, const jnode *at, jv *args, int n, const char **kwn, jv *kwv, int nkw, int ns) {
    if (n > 1) jfail(r, at, GPT2_ERR_TEMPLATE, "dict expected at most 1 argument, got %d", n);
    jv d = jv_dict(r, (size_t)nkw + 4);
    if (n == 1) {
        jv src = args[0];
        if (src.t == JV_DICT || src.t == JV_NS) {
            for (size_t i = 0; i < src.d->n; i++) jv_dict_set(r, at, d.d, src.d->k[i], src.d->v[i]);
        } else {
            size_t k;
            jv *items = jv_items(r, at, src, &k);
            for (size_t i = 0; i < k; i++) {
                size_t two;
                if (items[i].t != JV_LIST && items[i].t != JV_STR)
                    jfail(r, at, GPT2_ERR_TEMPLATE, "cannot convert dictionary update sequence element #%zu to a sequence", i);
                jv *kv = jv_items(r, at, items[i], &two);
                if (two != 2)
                    jfail(r, at, GPT2_ERR_TEMPLATE, "dictionary update sequence element #%zu has length %zu; 2 is required",
                          i, two);
                jv_dict_set(r, at, d.d, kv[0], kv[1]);
            }
        }
    }
    for (int k = 0; k < nkw; k++) jv_dict_set(r, at, d.d, jv_cstr(kwn[k]), kwv[k]);
    if (ns) d.t = JV_NS;
    return d;
}

static jv call_strftime(jrun *r, const jnode *at, jv fmt) {
    need_str(r, at, fmt, "strftime() argument 1");
    struct tm now;
    if (r->opts.now) {
        now = *r->opts.now;
    } else {
        time_t t = time(NULL);
        localtime_r(&t, &now);
    }
    if (fmt.s.n > 256 || memchr(fmt.s.p, 0, fmt.s.n))
        jfail(r, at, GPT2_ERR_TEMPLATE, "strftime_now: a format of more than 256 bytes or with a NUL");
    char f[257], buf[4096];
    memcpy(f, fmt.s.p, fmt.s.n);
    f[fmt.s.n] = '\0';
    size_t n = strftime(buf, sizeof buf, f, &now); /* in the C locale, as Python's (jlocale_enter) */
    if (n == 0 && fmt.s.n) buf[0] = '\0';
    char *p = jalloc(r, n + 1);
    memcpy(p, buf, n);
    return jv_str(p, n);
}

/* str.format through the sandbox's formatter: fields {}, {0}, {name} with an
 * optional !s or !r; a format spec, attributes and items are not run here. */
static jv py_format(jrun *r, const jnode *at, jv fmt, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    jsb b = {0};
    const char *p = fmt.s.p, *end = p + fmt.s.n;
    int auto_idx = 0, manual = 0, automatic = 0;
    while (p < end) {
        char c = *p++;
        if (c == '}') {
            if (p < end && *p == '}') p++;
            else jfail(r, at, GPT2_ERR_TEMPLATE, "Single '}' encountered in format string");
            jsb_put(r, &b, "}", 1);
            continue;
        }
        if (c != '{') {
            jsb_put(r, &b, &c, 1);
            continue;
        }
        if (p < end && *p == '{') {
            jsb_put(r, &b, "{", 1), p++;
            continue;
        }
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close) jfail(r, at, GPT2_ERR_TEMPLATE, "expected '}' before end of string");
        const char *f_end = p;
        while (f_end < close && *f_end != '!' && *f_end != ':' && *f_end != '.' && *f_end != '[') f_end++;
        char conv = 's';
        if (f_end < close && *f_end == '!' && f_end + 2 == close && (f_end[1] == 'r' || f_end[1] == 's')) conv = f_end[1];
        else if (f_end < close)
            jfail(r, at, GPT2_ERR_TEMPLATE, "format specs, conversions other than !s and !r, and field attributes are "
                  "not supported by this interpreter");
        jv v;
        size_t fl = (size_t)(f_end - p);
        int digits = fl > 0;
        for (size_t k = 0; k < fl; k++) digits &= p[k] >= '0' && p[k] <= '9';
        if (fl == 0 || digits) {
            int idx = 0;
            for (size_t k = 0; k < fl && idx < 1000000; k++) idx = idx * 10 + (p[k] - '0'); /* p is not NUL-terminated */
            if (fl == 0) idx = auto_idx++;
            if (fl == 0) automatic = 1;
            else manual = 1;
            if (automatic && manual)
                jfail(r, at, GPT2_ERR_TEMPLATE, "cannot switch from automatic field numbering to manual field specification");
            if (idx >= n) jfail(r, at, GPT2_ERR_TEMPLATE, "Replacement index %d out of range for positional args tuple", idx);
            v = args[idx];
        } else {
            int k = 0;
            while (k < nkw && (strlen(kwn[k]) != fl || memcmp(kwn[k], p, fl) != 0)) k++;
            if (k == nkw) jfail(r, at, GPT2_ERR_TEMPLATE, "'%.*s'", (int)(fl > 60 ? 60 : fl), p);
            v = kwv[k];
        }
        if (conv == 'r') jv_repr_to(r, at, &b, v, 0);
        else jv_str_to(r, at, &b, v);
        p = close + 1;
    }
    return jsb_value(r, &b);
}

static _Noreturn void int_overflow(jrun *r, const jnode *at);

/* int(f): Python's, within 64 bits. */
static int64_t float_to_int(jrun *r, const jnode *at, double f) {
    if (isnan(f)) jfail(r, at, GPT2_ERR_TEMPLATE, "cannot convert float NaN to integer");
    if (isinf(f)) jfail(r, at, GPT2_ERR_TEMPLATE, "cannot convert float infinity to integer");
    if (!(fabs(f) < 9.2233720368547758e18)) int_overflow(r, at);
    return (int64_t)f;
}

/* fmt % args, printf-style: %s %r %d %i %% (and %(key)s from a dict), with
 * Python's rules for what args are (a tuple; a dict or list, which may go
 * unused; anything else, one value). Widths, precisions and other
 * conversions are not run here. */
jv jb_printf(jrun *r, const jnode *at, jv fmt, jv args) {
    int tuple = args.t == JV_LIST && (args.flags & JV_TUPLE);
    /* PyMapping_Check: what has __getitem__ (an Undefined too) may go unused */
    int mapping = !tuple && (args.t == JV_DICT || args.t == JV_UNDEF || (args.t == JV_LIST && !(args.flags & JV_ITER)));
    size_t n = tuple ? args.l->n : 1, used = 0;
    jsb b = {0};
    for (size_t i = 0; i < fmt.s.n; i++) {
        char c = fmt.s.p[i];
        if (c != '%') {
            jsb_put(r, &b, &c, 1);
            continue;
        }
        if (++i >= fmt.s.n) jfail(r, at, GPT2_ERR_TEMPLATE, "incomplete format");
        jv v;
        if (fmt.s.p[i] == '(') {
            const char *close = memchr(fmt.s.p + i, ')', fmt.s.n - i);
            if (!close) jfail(r, at, GPT2_ERR_TEMPLATE, "incomplete format key");
            if (args.t != JV_DICT) jfail(r, at, GPT2_ERR_TEMPLATE, "format requires a mapping");
            const jv *hit = jv_dict_getn(args.d, fmt.s.p + i + 1, (size_t)(close - fmt.s.p - i - 1));
            if (!hit) jfail(r, at, GPT2_ERR_TEMPLATE, "'%.*s'", (int)(close - fmt.s.p - i - 1), fmt.s.p + i + 1);
            v = *hit;
            i = (size_t)(close - fmt.s.p) + 1;
            if (i >= fmt.s.n) jfail(r, at, GPT2_ERR_TEMPLATE, "incomplete format");
        } else if (fmt.s.p[i] != '%') {
            if (used >= n) jfail(r, at, GPT2_ERR_TEMPLATE, "not enough arguments for format string");
            v = tuple ? args.l->v[used] : args;
            used++;
        }
        char conv = fmt.s.p[i];
        if (conv == '%') jsb_put(r, &b, "%", 1);
        else if (conv == 's') jv_str_to(r, at, &b, v);
        else if (conv == 'r') jv_repr_to(r, at, &b, v, 0);
        else if (conv == 'd' || conv == 'i') {
            if (v.t == JV_FLOAT) v = jv_int(float_to_int(r, at, v.f));
            if (v.t != JV_INT && v.t != JV_BOOL)
                jfail(r, at, GPT2_ERR_TEMPLATE, "%%%c format: a real number is required, not %s", conv, jv_typename(v));
            jv_str_to(r, at, &b, jv_int(v.t == JV_BOOL ? v.b : v.i));
        } else {
            jfail(r, at, GPT2_ERR_TEMPLATE, "the printf-style conversion '%%%c' is not supported by this interpreter", conv);
        }
    }
    if (used < n && !mapping) jfail(r, at, GPT2_ERR_TEMPLATE, "not all arguments converted during string formatting");
    return jsb_value(r, &b);
}

static jv call_str_method(jrun *r, const jnode *at, const jfunc *f, jv *a, int *has) {
    jv s = f->self;
    size_t off;
    switch (f->id) {
    case JF_STRIP: return py_strip(r, at, s, a[0], 1, 1);
    case JF_LSTRIP: return py_strip(r, at, s, a[0], 1, 0);
    case JF_RSTRIP: return py_strip(r, at, s, a[0], 0, 1);
    case JF_SPLIT:
    case JF_RSPLIT: return py_split(r, at, s, a[0], has[1] ? need_int(r, at, a[1]) : -1, f->id == JF_RSPLIT);
    case JF_SPLITLINES: return py_splitlines(r, s, has[0] && jv_truthy(a[0]));
    case JF_STARTSWITH:
    case JF_ENDSWITH:
        return jv_bool(py_affix(r, at, str_window(r, at, s, a[1], a[2], &off), a[0], f->id == JF_ENDSWITH));
    case JF_REPLACE:
        return py_replace(r, at, s, need_str(r, at, a[0], "replace() argument 1"),
                          need_str(r, at, a[1], "replace() argument 2"), has[2] ? need_int(r, at, a[2]) : -1);
    case JF_UPPER: return py_case(r, s, 'u');
    case JF_LOWER: return py_case(r, s, 'l');
    case JF_TITLE: return py_case(r, s, 't');
    case JF_CAPITALIZE: return py_case(r, s, 'c');
    case JF_FIND: case JF_RFIND: case JF_INDEX: case JF_RINDEX: case JF_COUNT: {
        jv sub = need_str(r, at, a[0], "the substring"), w = str_window(r, at, s, a[1], a[2], &off);
        if (f->id == JF_COUNT) {
            if (!sub.s.n) return jv_int((int64_t)u8_count(w.s.p, w.s.n) + 1);
            int64_t k = 0;
            for (const char *p = w.s.p, *h; (h = find_bytes(p, (size_t)(w.s.p + w.s.n - p), sub.s.p, sub.s.n));)
                k++, p = h + sub.s.n;
            return jv_int(k);
        }
        int right = f->id == JF_RFIND || f->id == JF_RINDEX;
        const char *h = right ? rfind_bytes(w.s.p, w.s.n, sub.s.p, sub.s.n) : find_bytes(w.s.p, w.s.n, sub.s.p, sub.s.n);
        if (!h && (f->id == JF_INDEX || f->id == JF_RINDEX)) jfail(r, at, GPT2_ERR_TEMPLATE, "substring not found");
        return jv_int(h ? (int64_t)(off + u8_count(w.s.p, (size_t)(h - w.s.p))) : -1);
    }
    case JF_JOIN: {
        size_t k;
        jv *items = jv_items(r, at, a[0], &k);
        jsb b = {0};
        for (size_t i = 0; i < k; i++) {
            if (items[i].t != JV_STR)
                jfail(r, at, GPT2_ERR_TEMPLATE, "sequence item %zu: expected str instance, %s found", i,
                      jv_typename(items[i]));
            if (i) jsb_put(r, &b, s.s.p, s.s.n);
            jsb_put(r, &b, items[i].s.p, items[i].s.n);
        }
        return jsb_value(r, &b);
    }
    case JF_ISDIGIT: case JF_ISALPHA: case JF_ISALNUM: case JF_ISSPACE: case JF_ISLOWER: case JF_ISUPPER: {
        int any = 0, ok = s.s.n > 0, has_cased = 0;
        uint32_t c;
        for (size_t i = 0, k; i < s.s.n && ok; i += k) {
            k = u8_next(s.s.p, s.s.n, i, &c);
            int cat = c < 0x110000 ? utf8proc_category((utf8proc_int32_t)c) : UTF8PROC_CATEGORY_CN;
            int letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
            int digit = cat == UTF8PROC_CATEGORY_ND;
            switch (f->id) {
            case JF_ISDIGIT: ok = digit; break;
            case JF_ISALPHA: ok = letter; break;
            case JF_ISALNUM: ok = letter || digit || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO; break;
            case JF_ISSPACE: ok = py_isspace(c); break;
            case JF_ISLOWER: ok = !(cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT); has_cased |= cased(c); break;
            default: ok = !(cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT); has_cased |= cased(c); break;
            }
            any = 1;
        }
        if (f->id == JF_ISLOWER || f->id == JF_ISUPPER) ok = ok && has_cased;
        return jv_bool(ok && any);
    }
    case JF_REMOVEPREFIX:
    case JF_REMOVESUFFIX: {
        jv x = need_str(r, at, a[0], "the affix");
        int suffix = f->id == JF_REMOVESUFFIX;
        if (!affix_one(r, at, s, x, suffix)) return s;
        return jv_str(s.s.p + (suffix ? 0 : x.s.n), s.s.n - x.s.n);
    }
    default: jfail(r, at, GPT2_ERR_TEMPLATE, "str.%s() is not supported by this interpreter", f->name);
    }
}

jv jb_call_func(jrun *r, const jnode *at, const jfunc *f, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    static const char *const p_strip[] = {"chars"}, *const p_split[] = {"sep", "maxsplit"},
                             *const p_lines[] = {"keepends"}, *const p_affix[] = {"prefix", "start", "end"},
                             *const p_replace[] = {"old", "new", "count"}, *const p_find[] = {"sub", "start", "end"},
                             *const p_one[] = {"x"}, *const p_get[] = {"key", "default"};
    jv a[4];
    int has[4];
    if (f->id == JF_RANGE) return call_range(r, at, args, n, nkw);
    if (f->id == JF_DICT || f->id == JF_NAMESPACE) return make_dict(r, at, args, n, kwn, kwv, nkw, f->id == JF_NAMESPACE);
    if (f->id == JF_RAISE) {
        if (n < 1) jfail(r, at, GPT2_ERR_TEMPLATE, "raise_exception() missing 1 required positional argument: 'message'");
        jv m = jv_to_str(r, at, args[0]);
        jraise(r, m.s.p, m.s.n);
    }
    if (f->id == JF_STRFTIME) {
        bind_params(r, at, "strftime_now", (const char *const[]){"format"}, 1, args, n, kwn, kwv, nkw, a, has);
        return call_strftime(r, at, a[0]);
    }
    if (f->id <= JF_JOINER) jfail(r, at, GPT2_ERR_TEMPLATE, "the global '%s' is not supported by this interpreter", f->name);
    if (f->id == JF_CYCLE) {
        if (n == 0) jfail(r, at, GPT2_ERR_TEMPLATE, "no items for cycling given");
        return args[f->self.loop->i % (size_t)n];
    }
    if (f->id >= JF_GET && f->id <= JF_COPY) { /* dict */
        const jdict *d = f->self.d;
        if (f->id == JF_GET) {
            bind_params(r, at, "get", p_get, 2, args, n, kwn, kwv, nkw, a, has);
            if (!has[0]) jfail(r, at, GPT2_ERR_TEMPLATE, "get expected at least 1 argument, got 0");
            const jv *v = jv_dict_get(r, at, d, a[0]); /* fails on an unhashable key */
            return v ? *v : has[1] ? a[1] : jv_none();
        }
        if (n || nkw) jfail(r, at, GPT2_ERR_TEMPLATE, "dict method takes no arguments (%d given)", n + nkw);
        if (f->id == JF_COPY) return f->self;
        jv l = jv_list(r, d->n, f->id == JF_KEYS ? JV_KEYS : f->id == JF_VALUES ? JV_VALUES : JV_ITEMS);
        for (size_t i = 0; i < d->n; i++) {
            if (f->id == JF_KEYS) l.l->v[i] = d->k[i];
            else if (f->id == JF_VALUES) l.l->v[i] = d->v[i];
            else {
                jv pair = jv_list(r, 2, JV_TUPLE);
                pair.l->v[0] = d->k[i], pair.l->v[1] = d->v[i];
                l.l->v[i] = pair;
            }
        }
        return l;
    }
    if (f->id >= JF_LCOUNT) { /* list */
        const jlist *l = f->self.l;
        if (f->id == JF_LCOPY) return list_of(r, l->v, l->n, 0);
        bind_params(r, at, f->id == JF_LCOUNT ? "count" : "index", p_one, 1, args, n, kwn, kwv, nkw, a, has);
        int64_t k = 0;
        for (size_t i = 0; i < l->n; i++)
            if (jv_eq(r, at, l->v[i], a[0], 0)) {
                if (f->id == JF_LINDEX) return jv_int((int64_t)i);
                k++;
            }
        if (f->id == JF_LINDEX) jfail(r, at, GPT2_ERR_TEMPLATE, "%s is not in list", jv_repr_c(r, at, a[0]));
        return jv_int(k);
    }
    /* str methods */
    const char *name = f->name;
    if (f->id == JF_FORMAT) return py_format(r, at, f->self, args, n, kwn, kwv, nkw);
    switch (f->id) {
    case JF_STRIP: case JF_LSTRIP: case JF_RSTRIP: bind_params(r, at, name, p_strip, 1, args, n, kwn, kwv, nkw, a, has); break;
    case JF_SPLIT: case JF_RSPLIT: bind_params(r, at, name, p_split, 2, args, n, kwn, kwv, nkw, a, has); break;
    case JF_SPLITLINES: bind_params(r, at, name, p_lines, 1, args, n, kwn, kwv, nkw, a, has); break;
    case JF_STARTSWITH: case JF_ENDSWITH:
        bind_params(r, at, name, p_affix, 3, args, n, kwn, kwv, nkw, a, has);
        if (!has[0]) jfail(r, at, GPT2_ERR_TEMPLATE, "%s() takes at least 1 argument (0 given)", name);
        break;
    case JF_REPLACE:
        bind_params(r, at, name, p_replace, 3, args, n, kwn, kwv, nkw, a, has);
        if (!has[1]) jfail(r, at, GPT2_ERR_TEMPLATE, "replace expected at least 2 arguments, got %d", n);
        break;
    case JF_FIND: case JF_RFIND: case JF_INDEX: case JF_RINDEX: case JF_COUNT:
        bind_params(r, at, name, p_find, 3, args, n, kwn, kwv, nkw, a, has);
        if (!has[0]) jfail(r, at, GPT2_ERR_TEMPLATE, "%s() takes at least 1 argument (0 given)", name);
        break;
    case JF_JOIN: case JF_REMOVEPREFIX: case JF_REMOVESUFFIX:
        bind_params(r, at, name, p_one, 1, args, n, kwn, kwv, nkw, a, has);
        if (!has[0]) jfail(r, at, GPT2_ERR_TEMPLATE, "%s() takes exactly one argument (0 given)", name);
        break;
    default:
        if (f->id != JF_STR_OTHER && (n || nkw))
            jfail(r, at, GPT2_ERR_TEMPLATE, "str.%s() takes no arguments (%d given)", name, n + nkw);
        has[0] = 0;
    }
    return call_str_method(r, at, f, a, has);
}

/* ---- filters ---- */
/* make_attrgetter: item's attribute path "a.b.0" (digits as indices) through the sandbox's getitem. */
static jv attr_path(jrun *r, const jnode *at, jv item, jv attribute, jv dflt) {
    if (attribute.t != JV_STR) {
        item = jb_getitem(r, at, item, attribute);
        return item.t == JV_UNDEF && dflt.t != JV_UNDEF && dflt.t != JV_NONE ? dflt : item;
    }
    const char *p = attribute.s.p, *end = p + attribute.s.n;
    for (;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        const char *e = dot ? dot : end;
        jv part = jv_str(p, (size_t)(e - p));
        int digits = e > p;
        for (const char *q = p; q < e && digits; q++) digits = *q >= '0' && *q <= '9';
        if (digits && e - p < 18) { /* x.isdigit() parts are indices; p is not NUL-terminated */
            int64_t v = 0;
            for (const char *q = p; q < e; q++) v = v * 10 + (*q - '0');
            part = jv_int(v);
        }
        item = jb_getitem(r, at, item, part);
        if (dflt.t != JV_UNDEF && dflt.t != JV_NONE && item.t == JV_UNDEF) item = dflt;
        if (!dot) return item;
        p = dot + 1;
    }
}

static jv ignore_case(jrun *r, jv v) { return v.t == JV_STR ? py_case(r, v, 'l') : v; }

/* Filters that take a variable argument list (a test's or a filter's name and its arguments). */
enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_COUNT, F_DEFAULT, F_ESCAPE, F_FIRST, F_FLOAT, F_INDENT, F_INT, F_ITEMS, F_JOIN,
    F_DICTSORT, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_SAFE,
    F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER, N_FILTERS
};

static const struct {
    const char *name;
    int id;
    const char *params[5]; /* after the value; NULL-terminated */
} filters[] = {
    {"abs", F_ABS, {NULL}},
    {"attr", F_ATTR, {"name", NULL}},
    {"capitalize", F_CAPITALIZE, {NULL}},
    {"count", F_COUNT, {NULL}},
    {"d", F_DEFAULT, {"default_value", "boolean", NULL}},
    {"default", F_DEFAULT, {"default_value", "boolean", NULL}},
    {"dictsort", F_DICTSORT, {"case_sensitive", "by", "reverse", NULL}},
    {"e", F_ESCAPE, {NULL}},
    {"escape", F_ESCAPE, {NULL}},
    {"first", F_FIRST, {NULL}},
    {"float", F_FLOAT, {"default", NULL}},
    {"indent", F_INDENT, {"width", "first", "blank", NULL}},
    {"int", F_INT, {"default", "base", NULL}},
    {"items", F_ITEMS, {NULL}},
    {"join", F_JOIN, {"d", "attribute", NULL}},
    {"last", F_LAST, {NULL}},
    {"length", F_LENGTH, {NULL}},
    {"list", F_LIST, {NULL}},
    {"lower", F_LOWER, {NULL}},
    {"map", F_MAP, {NULL}},
    {"max", F_MAX, {"case_sensitive", "attribute", NULL}},
    {"min", F_MIN, {"case_sensitive", "attribute", NULL}},
    {"reject", F_REJECT, {NULL}},
    {"rejectattr", F_REJECTATTR, {NULL}},
    {"replace", F_REPLACE, {"old", "new", "count", NULL}},
    {"reverse", F_REVERSE, {NULL}},
    {"safe", F_SAFE, {NULL}},
    {"select", F_SELECT, {NULL}},
    {"selectattr", F_SELECTATTR, {NULL}},
    {"sort", F_SORT, {"reverse", "case_sensitive", "attribute", NULL}},
    {"string", F_STRING, {NULL}},
    {"sum", F_SUM, {"attribute", "start", NULL}},
    {"title", F_TITLE, {NULL}},
    {"tojson", F_TOJSON, {"ensure_ascii", "indent", "separators", "sort_keys", NULL}},
    {"trim", F_TRIM, {"chars", NULL}},
    {"unique", F_UNIQUE, {"case_sensitive", "attribute", NULL}},
    {"upper", F_UPPER, {NULL}},
};
/* Jinja's other filters: known by name, not run here. */
static const char *const filters_not_run[] = {
    "batch", "center", "filesizeformat", "forceescape", "format", "groupby", "pprint", "random", "round",
    "slice", "striptags", "truncate", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"};

enum { N_FILTER_ROWS = sizeof filters / sizeof *filters };

int jb_filter_id(const char *name, int *supported) {
    *supported = 1;
    for (int i = 0; i < N_FILTER_ROWS; i++)
        if (!strcmp(filters[i].name, name)) return filters[i].id;
    *supported = 0;
    for (size_t i = 0; i < sizeof filters_not_run / sizeof *filters_not_run; i++)
        if (!strcmp(filters_not_run[i], name)) return N_FILTERS + (int)i;
    return -1;
}

/* ---- tests ---- */
enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_ESCAPED, T_EVEN, T_FALSE, T_FILTER, T_FLOAT, T_GE, T_GT,
    T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE,
    T_STRING, T_TEST, T_TRUE, T_UNDEFINED, T_UPPER
};
static const struct {
    const char *name;
    int id;
} tests[] = {
    {"boolean", T_BOOLEAN}, {"callable", T_CALLABLE}, {"defined", T_DEFINED}, {"divisibleby", T_DIVISIBLEBY},
    {"eq", T_EQ}, {"equalto", T_EQ}, {"==", T_EQ}, {"escaped", T_ESCAPED}, {"even", T_EVEN}, {"false", T_FALSE},
    {"filter", T_FILTER}, {"float", T_FLOAT}, {"ge", T_GE}, {">=", T_GE}, {"gt", T_GT}, {"greaterthan", T_GT},
    {">", T_GT}, {"in", T_IN}, {"integer", T_INTEGER}, {"iterable", T_ITERABLE}, {"le", T_LE}, {"<=", T_LE},
    {"lower", T_LOWER}, {"lt", T_LT}, {"lessthan", T_LT}, {"<", T_LT}, {"mapping", T_MAPPING}, {"ne", T_NE},
    {"!=", T_NE}, {"none", T_NONE}, {"number", T_NUMBER}, {"odd", T_ODD}, {"sameas", T_SAMEAS},
    {"sequence", T_SEQUENCE}, {"string", T_STRING}, {"test", T_TEST}, {"true", T_TRUE}, {"undefined", T_UNDEFINED},
    {"upper", T_UPPER},
};

int jb_test_id(const char *name, int *supported) {
    *supported = 1;
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (!strcmp(tests[i].name, name)) return tests[i].id;
    *supported = 0;
    return -1;
}

const char *jb_test_name(int id) {
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (tests[i].id == id) return tests[i].name;
    return "?";
}

static int str_cased_test(jrun *r, const jnode *at, jv x, int upper) {
    jv s = jv_to_str(r, at, x);
    jfunc f = {.id = upper ? JF_ISUPPER : JF_ISLOWER, .self = s};
    int has[4] = {0};
    jv a[4];
    return call_str_method(r, at, &f, a, has).b;
}

int jb_test(jrun *r, const jnode *at, int id, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    int one_arg = id == T_DIVISIBLEBY || id == T_EQ || id == T_GE || id == T_GT || id == T_IN || id == T_LE ||
                  id == T_LT || id == T_NE || id == T_SAMEAS;
    jv a[1];
    int has[1];
    const char *name = jb_test_name(id);
    bind_params(r, at, name, (const char *const[]){"other"}, one_arg, args, n, kwn, kwv, nkw, a, has);
    if (one_arg && !has[0]) jfail(r, at, GPT2_ERR_TEMPLATE, "test_%s() missing 1 required positional argument", name);
    switch (id) {
    case T_BOOLEAN: return x.t == JV_BOOL;
    case T_CALLABLE: return x.t == JV_MACRO || x.t == JV_FUNC || x.t == JV_UNDEF;
    case T_DEFINED: return x.t != JV_UNDEF;
    case T_UNDEFINED: return x.t == JV_UNDEF;
    case T_DIVISIBLEBY: return jv_eq(r, at, je_arith(r, at, OP_MOD, x, a[0]), jv_int(0), 0);
    case T_EVEN: return jv_eq(r, at, je_arith(r, at, OP_MOD, x, jv_int(2)), jv_int(0), 0);
    case T_ODD: return jv_eq(r, at, je_arith(r, at, OP_MOD, x, jv_int(2)), jv_int(1), 0);
    case T_EQ: return jv_eq(r, at, x, a[0], 0);
    case T_NE: return !jv_eq(r, at, x, a[0], 0);
    case T_GE: return jv_compare(r, at, x, a[0], CMP_GE);
    case T_GT: return jv_compare(r, at, x, a[0], CMP_GT);
    case T_LE: return jv_compare(r, at, x, a[0], CMP_LE);
    case T_LT: return jv_compare(r, at, x, a[0], CMP_LT);
    case T_IN: return je_contains(r, at, a[0], x);
    case T_ESCAPED: return 0; /* no value here carries __html__ */
    case T_FALSE: return x.t == JV_BOOL && !x.b;
    case T_TRUE: return x.t == JV_BOOL && x.b;
    case T_FILTER:
    case T_TEST: {
        if (x.t != JV_STR || memchr(x.s.p, 0, x.s.n) || x.s.n > 64) return 0;
        char nm[65];
        memcpy(nm, x.s.p, x.s.n);
        nm[x.s.n] = '\0';
        int sup;
        return (id == T_FILTER ? jb_filter_id(nm, &sup) : jb_test_id(nm, &sup)) >= 0;
    }
    case T_FLOAT: return x.t == JV_FLOAT;
    case T_INTEGER: return x.t == JV_INT;
    case T_NUMBER: return x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL;
    case T_ITERABLE: return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF || x.t == JV_LOOP;
    case T_SEQUENCE: return x.t == JV_STR || (x.t == JV_LIST && !(x.flags & JV_NOT_LIST)) || x.t == JV_DICT || x.t == JV_UNDEF;
    case T_MAPPING: return x.t == JV_DICT;
    case T_NONE: return x.t == JV_NONE;
    case T_STRING: return x.t == JV_STR;
    case T_LOWER: return str_cased_test(r, at, x, 0);
    case T_UPPER: return str_cased_test(r, at, x, 1);
    case T_SAMEAS: /* Python's is: the same object; scalars of one value are */
        if (x.t != a[0].t) return 0;
        switch (x.t) {
        case JV_UNDEF: return x.u == a[0].u;
        case JV_STR: return x.s.p == a[0].s.p && x.s.n == a[0].s.n;
        case JV_LIST: return x.l == a[0].l;
        case JV_DICT: case JV_NS: return x.d == a[0].d;
        default: return jv_eq(r, at, x, a[0], 0);
        }
    }
    return 0;
}

/* ---- filters, continued ---- */
/* A Jinja filter's value as a str (soft_str). */
static jv soft_str(jrun *r, const jnode *at, jv v) { return jv_to_str(r, at, v); }

/* Stable merge sort of items by keys, as sorted(..., key, reverse). */
static void sort_by(jrun *r, const jnode *at, jv *items, jv *keys, size_t n, int reverse) {
    if (n < 2) return;
    jv *ti = jalloc(r, n * sizeof *ti), *tk = jalloc(r, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int right_first = reverse ? jv_lt(r, at, keys[i], keys[j], "<", 0) : jv_lt(r, at, keys[j], keys[i], "<", 0);
                if (right_first) ti[k] = items[j], tk[k++] = keys[j++];
                else ti[k] = items[i], tk[k++] = keys[i++];
            }
            while (i < mid) ti[k] = items[i], tk[k++] = keys[i++];
            while (j < hi) ti[k] = items[j], tk[k++] = keys[j++];
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
        jcharge(r, at, n);
    }
}

/* select/reject/selectattr/rejectattr: the items whose (attribute's) test passes, or fails. */
static jv select_items(jrun *r, const jnode *at, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw, int attr,
                       int keep) {
    int off = attr;
    if (attr && n < 1) jfail(r, at, GPT2_ERR_TEMPLATE, "Missing parameter for attribute name");
    int tid = -1;
    if (n > off) {
        jv tn = args[off];
        char nm[65];
        if (tn.t != JV_STR || tn.s.n > 64 || memchr(tn.s.p, 0, tn.s.n))
            jfail(r, at, GPT2_ERR_TEMPLATE, "No test named %s.", jv_repr_c(r, at, tn));
        memcpy(nm, tn.s.p, tn.s.n);
        nm[tn.s.n] = '\0';
        int sup;
        tid = jb_test_id(nm, &sup);
        if (tid < 0) jfail(r, at, GPT2_ERR_TEMPLATE, "No test named '%s'.", nm);
    }
    size_t k = 0, m = 0;
    jv *items = jv_truthy(x) ? jv_items(r, at, x, &k) : NULL;
    jv *out = jalloc(r, (k ? k : 1) * sizeof *out);
    for (size_t i = 0; i < k; i++) {
        jcharge(r, at, 1);
        jv v = attr ? attr_path(r, at, items[i], args[0], jv_undef()) : items[i];
        int pass = tid < 0 ? jv_truthy(v) : jb_test(r, at, tid, v, args + off + 1, n - off - 1, kwn, kwv, nkw);
        if (pass == keep) out[m++] = items[i];
    }
    return list_of(r, out, m, JV_ITER);
}

/* map(attribute=..., default=...) or map('filter', args...). */
static jv map_items(jrun *r, const jnode *at, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    size_t k = 0;
    jv *items = jv_truthy(x) ? jv_items(r, at, x, &k) : NULL;
    jv *out = jalloc(r, (k ? k : 1) * sizeof *out);
    if (n == 0) {
        jv attribute = jv_undef(), dflt = jv_undef();
        int has_attr = 0;
        for (int i = 0; i < nkw; i++) {
            if (!strcmp(kwn[i], "attribute")) attribute = kwv[i], has_attr = 1;
            else if (!strcmp(kwn[i], "default")) dflt = kwv[i];
            else jfail(r, at, GPT2_ERR_TEMPLATE, "Unexpected keyword argument '%s'", kwn[i]);
        }
        if (!has_attr) jfail(r, at, GPT2_ERR_TEMPLATE, "map requires a filter argument");
        for (size_t i = 0; i < k; i++) out[i] = attr_path(r, at, items[i], attribute, dflt);
        return list_of(r, out, k, JV_ITER);
    }
    jv fname = args[0];
    char nm[65];
    if (fname.t != JV_STR || fname.s.n > 64 || memchr(fname.s.p, 0, fname.s.n))
        jfail(r, at, GPT2_ERR_TEMPLATE, "No filter named %s.", jv_repr_c(r, at, fname));
    memcpy(nm, fname.s.p, fname.s.n);
    nm[fname.s.n] = '\0';
    int sup, fid = jb_filter_id(nm, &sup);
    if (fid < 0) jfail(r, at, GPT2_ERR_TEMPLATE, "No filter named '%s'.", nm);
    if (!sup) jfail(r, at, GPT2_ERR_TEMPLATE, "the filter '%s' is not supported by this interpreter", nm);
    for (size_t i = 0; i < k; i++) {
        jcharge(r, at, 1);
        out[i] = jb_filter(r, at, fid, items[i], args + 1, n - 1, kwn, kwv, nkw);
    }
    return list_of(r, out, k, JV_ITER);
}

static jv filter_indent(jrun *r, const jnode *at, jv s, jv *a, int *has) {
    jsb ind = {0};
    if (has[0] && a[0].t == JV_STR) jsb_put(r, &ind, a[0].s.p, a[0].s.n);
    else {
        int64_t w = has[0] ? need_int(r, at, a[0]) : 4;
        for (int64_t i = 0; i < w && i < 4096; i++) jsb_put(r, &ind, " ", 1);
    }
    if (s.t != JV_STR) jfail(r, at, GPT2_ERR_TEMPLATE, "unsupported operand type(s) for +=: '%s' and 'str'", jv_typename(s));
    jv text = jv_to_str(r, at, s);
    jsb t = {0};
    jsb_put(r, &t, text.s.p, text.s.n);
    jsb_put(r, &t, "\n", 1); /* Jinja's quirk for splitlines */
    jv lines = py_splitlines(r, jsb_value(r, &t), 0);
    int blank = has[2] && jv_truthy(a[2]);
    jsb b = {0};
    if (has[1] && jv_truthy(a[1])) jsb_put(r, &b, ind.p, ind.n);
    for (size_t i = 0; i < lines.l->n; i++) {
        jv line = lines.l->v[i];
        if (i) {
            jsb_put(r, &b, "\n", 1);
            if (blank || line.s.n) jsb_put(r, &b, ind.p, ind.n);
        }
        jsb_put(r, &b, line.s.p, line.s.n);
    }
    return jsb_value(r, &b);
}

static _Noreturn void int_overflow(jrun *r, const jnode *at) {
    jfail(r, at, GPT2_ERR_TEMPLATE, "integer overflow (this interpreter holds 64-bit integers)");
}

/* int(s, base) of a string: sign, digits with single underscores, whitespace around; 0 if it is not one. */
static int parse_int(jrun *r, const jnode *at, jv x, int64_t base, int64_t *out) {
    size_t i = 0, e = x.s.n;
    uint32_t c;
    while (i < e && py_isspace((u8_next(x.s.p, e, i, &c), c))) i += u8_next(x.s.p, e, i, &c);
    while (e > i) {
        size_t q = u8_prev(x.s.p, e);
        u8_next(x.s.p, x.s.n, q, &c);
        if (!py_isspace(c)) break;
        e = q;
    }
    int neg = 0;
    if (e <= i || base == 1 || base < 0 || base > 36) return 0;
    if (x.s.p[i] == '+' || x.s.p[i] == '-') neg = x.s.p[i++] == '-';
    int prev_us = 1;
    if (e - i >= 2 && x.s.p[i] == '0') { /* 0x, 0o, 0b: with their base, or base 0 */
        char k = (char)(x.s.p[i + 1] | 0x20);
        int pb = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
        if (pb && (base == 0 || base == pb)) base = pb, i += 2, prev_us = 0;
    }
    if (base == 0) { /* no prefix: decimal, without leading zeros (unless all zeros) */
        base = 10;
        if (e - i > 1 && x.s.p[i] == '0')
            for (size_t k = i; k < e; k++)
                if (x.s.p[k] != '0' && x.s.p[k] != '_') return 0;
    }
    unsigned long long v = 0;
    int digits = 0;
    for (; i < e; i++) {
        char ch = x.s.p[i];
        if (ch == '_' && !prev_us) {
            prev_us = 1;
            continue;
        }
        int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10 : 99;
        if (d >= base) return 0;
        if (v > (9223372036854775807ULL - (unsigned)d) / (unsigned long long)base) int_overflow(r, at);
        v = v * (unsigned long long)base + (unsigned)d;
        digits++, prev_us = 0;
    }
    if (!digits || prev_us) return 0;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

static jv filter_float(jrun *r, const jnode *at, jv x, jv dflt);

static jv filter_int(jrun *r, const jnode *at, jv x, jv *a, int *has) {
    jv dflt = has[0] ? a[0] : jv_int(0);
    int64_t base = has[1] ? need_int(r, at, a[1]) : 10, v;
    if (x.t == JV_UNDEF) jundef_fail(r, at, x);
    if (x.t == JV_BOOL || x.t == JV_INT) return jv_int(x.t == JV_BOOL ? x.b : x.i);
    if (x.t == JV_STR && parse_int(r, at, x, base, &v)) return jv_int(v);
    if (x.t == JV_STR) x = filter_float(r, at, x, jv_none()); /* "42.23"|int is 42: int(float(s)) */
    if (x.t != JV_FLOAT || isnan(x.f)) return dflt;
    return jv_int(float_to_int(r, at, x.f));
}

static jv filter_float(jrun *r, const jnode *at, jv x, jv dflt) {
    if (x.t == JV_UNDEF) jundef_fail(r, at, x);
    if (x.t == JV_FLOAT) return x;
    if (x.t == JV_INT || x.t == JV_BOOL) return jv_float((double)(x.t == JV_BOOL ? x.b : x.i));
    if (x.t != JV_STR || x.s.n == 0 || x.s.n > 100 || memchr(x.s.p, 0, x.s.n)) return dflt;
    char buf[128];
    size_t k = 0;
    for (size_t i = 0; i < x.s.n; i++)
        if (x.s.p[i] != '_' || (i > 0 && i + 1 < x.s.n && x.s.p[i - 1] >= '0' && x.s.p[i - 1] <= '9' &&
                                 x.s.p[i + 1] >= '0' && x.s.p[i + 1] <= '9'))
            buf[k++] = x.s.p[i] == '_' ? '\x01' : x.s.p[i];
    buf[k] = '\0';
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (buf[i] != '\x01') buf[w++] = buf[i];
    buf[w] = '\0';
    char *p = buf, *end;
    while (*p && py_isspace((unsigned char)*p)) p++;
    if (memchr(p, 'x', strlen(p)) || memchr(p, 'X', strlen(p))) return dflt; /* strtod reads hex, Python does not */
    double f = strtod(p, &end);
    while (*end && py_isspace((unsigned char)*end)) end++;
    if (end == p || *end) return dflt;
    return jv_float(f);
}

static jv filter_tojson(jrun *r, const jnode *at, jv x, jv *a, int *has) {
    int ascii = has[0] && jv_truthy(a[0]), sort_keys = has[3] && jv_truthy(a[3]);
    const char *indent = NULL, *item_sep = NULL, *key_sep = NULL;
    size_t indent_n = 0;
    if (has[1] && a[1].t != JV_NONE) {
        if (a[1].t == JV_STR) indent = a[1].s.p, indent_n = a[1].s.n;
        else {
            int64_t w = need_int(r, at, a[1]);
            if (w > 4096) jfail(r, at, GPT2_ERR_TEMPLATE, "an indent of more than 4096 (a bound of this interpreter)");
            char *sp = jalloc(r, (size_t)(w > 0 ? w : 0) + 1);
            memset(sp, ' ', (size_t)(w > 0 ? w : 0));
            indent = sp, indent_n = (size_t)(w > 0 ? w : 0);
        }
    }
    if (has[2] && a[2].t != JV_NONE) {
        size_t two;
        jv *seps = jv_items(r, at, a[2], &two);
        if (two != 2) jfail(r, at, GPT2_ERR_TEMPLATE, "separators: expected 2 values, got %zu", two);
        const char **dst[2] = {&item_sep, &key_sep};
        for (int i = 0; i < 2; i++) {
            jv sv = need_str(r, at, seps[i], "a separator");
            char *c = jalloc(r, sv.s.n + 1);
            memcpy(c, sv.s.p, sv.s.n);
            c[sv.s.n] = '\0';
            *dst[i] = c;
        }
    }
    jsb b = {0};
    jv_json_to(r, at, &b, x, ascii, indent, indent_n, item_sep, key_sep, sort_keys, 0);
    return jsb_value(r, &b);
}

/* min/max/sort/unique's key: the attribute's value, lowercased unless case-sensitive. */
static jv sort_key(jrun *r, const jnode *at, jv item, jv attribute, int has_attr, int case_sensitive) {
    jv k = item;
    if (has_attr && attribute.t != JV_NONE) {
        if (attribute.t == JV_STR && memchr(attribute.s.p, ',', attribute.s.n)) { /* make_multi_attrgetter: a list */
            jv parts = py_split(r, at, attribute, jv_str(",", 1), -1, 0);
            jv l = jv_list(r, parts.l->n, 0);
            for (size_t i = 0; i < parts.l->n; i++) {
                jv v = attr_path(r, at, item, parts.l->v[i], jv_undef());
                l.l->v[i] = case_sensitive ? v : ignore_case(r, v);
            }
            return l;
        }
        k = attr_path(r, at, item, attribute, jv_undef());
    }
    return case_sensitive ? k : ignore_case(r, k);
}

static jv filter_escape(jrun *r, jv s) {
    jsb b = {0};
    for (size_t i = 0; i < s.s.n; i++) {
        const char *e = NULL;
        switch (s.s.p[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        }
        if (e) jsb_puts(r, &b, e);
        else jsb_put(r, &b, s.s.p + i, 1);
    }
    return jsb_value(r, &b);
}

static jv filter_minmax(jrun *r, const jnode *at, jv x, jv *a, int *has, int is_max) {
    size_t k;
    jv *items = jv_items(r, at, x, &k);
    if (!k) return jv_undef_msg(r, "No aggregated item, sequence was empty.");
    int cs = has[0] && jv_truthy(a[0]);
    size_t best = 0;
    jv bk = sort_key(r, at, items[0], a[1], has[1], cs);
    for (size_t i = 1; i < k; i++) {
        jv ki = sort_key(r, at, items[i], a[1], has[1], cs);
        if (is_max ? jv_lt(r, at, bk, ki, "<", 0) : jv_lt(r, at, ki, bk, "<", 0)) best = i, bk = ki;
    }
    return items[best];
}

static jv filter_sort_unique(jrun *r, const jnode *at, int id, jv x, jv *a, int *has) {
    size_t k;
    jv *src = jv_items(r, at, x, &k);
    jv *items = jalloc(r, (k ? k : 1) * sizeof *items), *keys = jalloc(r, (k ? k : 1) * sizeof *keys);
    int cs_i = id == F_SORT ? 1 : 0, attr_i = cs_i + 1;
    int cs = has[cs_i] && jv_truthy(a[cs_i]);
    for (size_t i = 0; i < k; i++) items[i] = src[i], keys[i] = sort_key(r, at, src[i], a[attr_i], has[attr_i], cs);
    if (id == F_SORT) { /* make_multi_attrgetter's keys are lists: equal items (undefined ones too) never compare with < */
        int multi = has[attr_i] && a[attr_i].t == JV_STR && memchr(a[attr_i].s.p, ',', a[attr_i].s.n);
        for (size_t i = 0; i < k && !multi; i++) {
            jv one = jv_list(r, 1, 0);
            one.l->v[0] = keys[i];
            keys[i] = one;
        }
        sort_by(r, at, items, keys, k, has[0] && jv_truthy(a[0]));
        return list_of(r, items, k, 0);
    }
    size_t m = 0; /* unique: the first of each key (a set: keys must hash) */
    for (size_t i = 0; i < k; i++) {
        jv key = keys[i];
        if (jv_unhashable(key)) jv_dict_get(r, at, &(jdict){0}, key); /* fails as hash() */
        int seen = 0;
        jcharge(r, at, m);
        for (size_t j = 0; j < m && !seen; j++) seen = jv_eq(r, at, keys[j], key, 0);
        if (!seen) items[m] = items[i], keys[m++] = key;
    }
    return list_of(r, items, m, JV_ITER);
}

static jv run_filter(jrun *r, const jnode *at, int id, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw);

/* The filters that are Python generators run nothing until iterated, so
 * their errors come then (a generator that is printed or tested never
 * fails). They run at once here, every item; an error (not a bound) is kept
 * in a generator that raises it when iterated. */
jv jb_filter(jrun *r, const jnode *at, int id, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    if (id != F_MAP && id != F_SELECT && id != F_REJECT && id != F_SELECTATTR && id != F_REJECTATTR && id != F_UNIQUE &&
        id != F_ITEMS)
        return run_filter(r, at, id, x, args, n, kwn, kwv, nkw);
    jmp_buf outer;
    memcpy(outer, r->jmp, sizeof outer);
    int depth = r->depth, calls = r->calls;
    if (setjmp(r->jmp) == 0) {
        jv v = run_filter(r, at, id, x, args, n, kwn, kwv, nkw);
        memcpy(r->jmp, outer, sizeof outer);
        return v;
    }
    memcpy(r->jmp, outer, sizeof outer);
    if (r->fatal) longjmp(r->jmp, 1);
    r->depth = depth, r->calls = calls;
    jv g = jv_list(r, 0, JV_ITER);
    char *m = jalloc(r, strlen(r->msg) + 1);
    strcpy(m, r->msg);
    g.l->lazy = m;
    return g;
}

static jv run_filter(jrun *r, const jnode *at, int id, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    switch (id) { /* the ones with a variable argument list */
    case F_MAP: return map_items(r, at, x, args, n, kwn, kwv, nkw);
    case F_SELECT: return select_items(r, at, x, args, n, kwn, kwv, nkw, 0, 1);
    case F_REJECT: return select_items(r, at, x, args, n, kwn, kwv, nkw, 0, 0);
    case F_SELECTATTR: return select_items(r, at, x, args, n, kwn, kwv, nkw, 1, 1);
    case F_REJECTATTR: return select_items(r, at, x, args, n, kwn, kwv, nkw, 1, 0);
    }
    int row = 0;
    while (row < N_FILTER_ROWS && filters[row].id != id) row++;
    if (row == N_FILTER_ROWS) jfail(r, at, GPT2_ERR_TEMPLATE, "the filter is not supported by this interpreter");
    int np = 0;
    while (np < 5 && filters[row].params[np]) np++;
    jv a[5];
    int has[5];
    bind_params(r, at, filters[row].name, filters[row].params, np, args, n, kwn, kwv, nkw, a, has);
    size_t k;
    switch (id) {
    case F_ABS:
        if (x.t == JV_FLOAT) return jv_float(fabs(x.f));
        if (x.t == JV_BOOL) return jv_int(x.b);
        if (x.t == JV_INT) {
            if (x.i == INT64_MIN) int_overflow(r, at);
            return jv_int(x.i < 0 ? -x.i : x.i);
        }
        if (x.t == JV_UNDEF) jundef_fail(r, at, x);
        jfail(r, at, GPT2_ERR_TEMPLATE, "bad operand type for abs(): '%s'", jv_typename(x));
    case F_ATTR: {
        if (!has[0]) jfail(r, at, GPT2_ERR_TEMPLATE, "do_attr() missing 1 required positional argument: 'name'");
        jv name = jv_to_str(r, at, a[0]), out;
        if (x.t == JV_UNDEF) jundef_fail(r, at, x);
        if (python_attr(r, x, name, &out)) return out;
        return jv_undef_attr(r, type_repr(x), name);
    }
    case F_CAPITALIZE: return py_case(r, soft_str(r, at, x), 'c');
    case F_LOWER: return py_case(r, soft_str(r, at, x), 'l');
    case F_UPPER: return py_case(r, soft_str(r, at, x), 'u');
    case F_TITLE: { /* Jinja's own: words split at runs of [-\s({\[<], each upper first then lower */
        jv s = soft_str(r, at, x);
        jsb b = {0};
        int at_start = 1;
        uint32_t c;
        for (size_t i = 0, w; i < s.s.n; i += w) {
            w = u8_next(s.s.p, s.s.n, i, &c);
            int sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
            if (sep) jsb_put(r, &b, s.s.p + i, w);
            else put_cased(r, &b, s.s.p, s.s.n, i, c, at_start ? CASE_UPPER : CASE_LOWER);
            at_start = sep;
        }
        return jsb_value(r, &b);
    }
    case F_COUNT:
    case F_LENGTH: return jv_int(jv_len(r, at, x));
    case F_DEFAULT:
        if (x.t == JV_UNDEF || (has[1] && jv_truthy(a[1]) && !jv_truthy(x))) return has[0] ? a[0] : jv_str("", 0);
        return x;
    case F_ESCAPE: return filter_escape(r, soft_str(r, at, x));
    case F_SAFE:
    case F_STRING: return soft_str(r, at, x);
    case F_FIRST: {
        jv *items = jv_items(r, at, x, &k);
        return k ? items[0] : jv_undef_msg(r, "No first item, sequence was empty.");
    }
    case F_LAST: {
        if (x.t == JV_LIST && (x.flags & JV_ITER))
            jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' object is not reversible", jv_typename(x));
        jv *items = jv_items(r, at, x, &k);
        return k ? items[k - 1] : jv_undef_msg(r, "No last item, sequence was empty.");
    }
    case F_FLOAT: return filter_float(r, at, x, has[0] ? a[0] : jv_float(0));
    case F_INT: return filter_int(r, at, x, a, has);
    case F_INDENT: return filter_indent(r, at, x, a, has);
    case F_ITEMS: {
        if (x.t == JV_UNDEF) return jv_list(r, 0, JV_ITER);
        if (x.t != JV_DICT) jfail(r, at, GPT2_ERR_TEMPLATE, "Can only get item pairs from a mapping.");
        jv l = jv_list(r, x.d->n, JV_ITER);
        for (size_t i = 0; i < x.d->n; i++) {
            jv pair = jv_list(r, 2, JV_TUPLE);
            pair.l->v[0] = x.d->k[i], pair.l->v[1] = x.d->v[i];
            l.l->v[i] = pair;
        }
        return l;
    }
    case F_JOIN: {
        jv *items = jv_items(r, at, x, &k);
        jv sep = has[0] ? soft_str(r, at, a[0]) : jv_str("", 0);
        jv *parts = jalloc(r, (k ? k : 1) * sizeof *parts);
        for (size_t i = 0; i < k; i++)
            parts[i] = soft_str(r, at, has[1] && a[1].t != JV_NONE ? attr_path(r, at, items[i], a[1], jv_undef()) : items[i]);
        jsb b = {0};
        for (size_t i = 0; i < k; i++) {
            if (i) jsb_put(r, &b, sep.s.p, sep.s.n);
            jsb_put(r, &b, parts[i].s.p, parts[i].s.n);
        }
        return jsb_value(r, &b);
    }
    case F_LIST: {
        jv *items = jv_items(r, at, x, &k);
        return list_of(r, items, k, 0);
    }
    case F_MAX:
    case F_MIN: return filter_minmax(r, at, x, a, has, id == F_MAX);
    case F_REPLACE: {
        if (!has[1]) jfail(r, at, GPT2_ERR_TEMPLATE, "do_replace() missing required arguments 'old' and 'new'");
        int64_t count = has[2] && a[2].t != JV_NONE ? need_int(r, at, a[2]) : -1;
        return py_replace(r, at, soft_str(r, at, x), soft_str(r, at, a[0]), soft_str(r, at, a[1]), count);
    }
    case F_REVERSE: {
        if (x.t == JV_STR) {
            size_t nc;
            jv *chars = jv_items(r, at, x, &nc);
            jsb b = {0};
            for (size_t i = nc; i-- > 0;) jsb_put(r, &b, chars[i].s.p, chars[i].s.n);
            return jsb_value(r, &b);
        }
        jv *items = jv_items(r, at, x, &k);
        /* reversed(): an iterator; a generator, not reversible, becomes a reversed list */
        jv l = jv_list(r, k, (x.t == JV_LIST && (x.flags & JV_ITER)) ? 0 : JV_ITER | JV_REVERSED);
        for (size_t i = 0; i < k; i++) l.l->v[i] = items[k - 1 - i];
        return l;
    }
    case F_SORT:
    case F_UNIQUE: return filter_sort_unique(r, at, id, x, a, has);
    case F_SUM: {
        jv *items = jv_items(r, at, x, &k);
        jv acc = has[1] ? a[1] : jv_int(0);
        if (acc.t == JV_STR) jfail(r, at, GPT2_ERR_TEMPLATE, "sum() can't sum strings [use ''.join(seq) instead]");
        for (size_t i = 0; i < k; i++)
            acc = je_arith(r, at, OP_ADD, acc, has[0] && a[0].t != JV_NONE ? attr_path(r, at, items[i], a[0], jv_undef()) : items[i]);
        return acc;
    }
    case F_TOJSON: return filter_tojson(r, at, x, a, has);
    case F_DICTSORT: {
        if (x.t != JV_DICT) jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' object has no attribute 'items'", jv_typename(x));
        int by_value = 0;
        if (has[1]) {
            jv by = jv_to_str(r, at, a[1]);
            by_value = by.s.n == 5 && !memcmp(by.s.p, "value", 5);
            if (!by_value && !(by.s.n == 3 && !memcmp(by.s.p, "key", 3)))
                jfail(r, at, GPT2_ERR_TEMPLATE, "You can only sort by either \"key\" or \"value\"");
        }
        k = x.d->n;
        jv *items = jalloc(r, (k ? k : 1) * sizeof *items), *keys = jalloc(r, (k ? k : 1) * sizeof *keys);
        int cs = has[0] && jv_truthy(a[0]);
        for (size_t i = 0; i < k; i++) {
            jv pair = jv_list(r, 2, JV_TUPLE);
            pair.l->v[0] = x.d->k[i], pair.l->v[1] = x.d->v[i];
            items[i] = pair;
            keys[i] = cs ? pair.l->v[by_value] : ignore_case(r, pair.l->v[by_value]);
        }
        sort_by(r, at, items, keys, k, has[2] && jv_truthy(a[2]));
        return list_of(r, items, k, 0);
    }
    case F_TRIM: return py_strip(r, at, soft_str(r, at, x), has[0] ? a[0] : jv_none(), 1, 1);
    }
    jfail(r, at, GPT2_ERR_TEMPLATE, "internal error: filter %d", id);
}
