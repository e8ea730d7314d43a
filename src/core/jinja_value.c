/* jinja_value.c — the Jinja interpreter's values as Python sees them: the
 * arenas they live in, str() and repr(), ==, <, len(), iteration, and
 * json.dumps as Hugging Face's tojson calls it. */
#include "jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "error.h"

void jlocale_enter(jlocale *l) {
    l->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    l->prev = l->c ? uselocale(l->c) : (locale_t)0;
}

void jlocale_leave(jlocale *l) {
    if (!l->c) return;
    uselocale(l->prev);
    freelocale(l->c);
    l->c = (locale_t)0;
}

/* ---- arena ---- */
struct jarena_chunk {
    jarena_chunk *next;
    size_t size, used;
    max_align_t align[]; /* the chunk's bytes start here, aligned */
};
enum { CHUNK = 64 << 10 };

static char *chunk_data(jarena_chunk *c) { return (char *)c->align; }
static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

void *jarena_alloc(jarena *a, size_t n) {
    if (n > ((size_t)1 << 40)) return NULL;
    size_t n0 = n;
    n = n ? round16(n) : 16;
    jarena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > CHUNK / 4 ? n : CHUNK;
        if (a->limit && (sz > a->limit || a->taken > a->limit - sz)) return NULL;
        jarena_chunk *nc = malloc(sizeof *nc + sz);
        if (!nc) return NULL;
        nc->size = sz;
        nc->used = 0;
        a->taken += sz;
        if (sz > CHUNK && c && c->size - c->used >= CHUNK / 4) { /* a big one behind the head, which keeps its room */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    char *p = chunk_data(c) + c->used;
    a->last_n = n0;
    c->used += n;
    a->last = p;
    return p;
}

int jarena_grow(jarena *a, void *p, size_t old, size_t n) {
    jarena_chunk *c = a->head;
    if (!p || p != a->last || old != a->last_n || !c) return 0;
    char *d = chunk_data(c);
    if ((char *)p < d || (char *)p + (old ? round16(old) : 16) != d + c->used) return 0; /* not the head's last */
    size_t at = (size_t)((char *)p - d);
    if (n > c->size - at) return 0;
    c->used = at + (n ? round16(n) : 16);
    a->last_n = n;
    return 1;
}

void jarena_free(jarena *a) {
    jarena_chunk *c = a->head;
    while (c) {
        jarena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->taken = 0;
    a->last = NULL;
}

/* ---- failing ---- */
static _Noreturn void vfail(jrun *r, const jnode *at, gpt2_status code, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    gpt2_error e;
    if (at) gpt2_fail(&e, code, "%s:%d:%d: %s", r->t->name, at->line, at->col, msg);
    else gpt2_fail(&e, code, "%s: %s", r->t->name, msg);
    memcpy(r->msg, e.msg, sizeof r->msg);
    if (r->err) *r->err = e;
    r->status = code;
    longjmp(r->jmp, 1);
}

void jfail(jrun *r, const jnode *at, gpt2_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(r, at, code, fmt, ap);
}

void jfail_fatal(jrun *r, const jnode *at, gpt2_status code, const char *fmt, ...) {
    r->fatal = 1;
    va_list ap;
    va_start(ap, fmt);
    vfail(r, at, code, fmt, ap);
}

void jfail_again(jrun *r, const char *msg) {
    if (r->err) {
        r->err->status = GPT2_ERR_TEMPLATE;
        snprintf(r->err->msg, sizeof r->err->msg, "%s", msg);
    }
    r->status = GPT2_ERR_TEMPLATE;
    longjmp(r->jmp, 1);
}

void jraise(jrun *r, const char *msg, size_t n) {
    char shown[4 * GPT2_ERROR_MSG_MAX]; /* escaped here: a NUL in msg would end it for printf */
    gpt2_text_escape(msg, n < sizeof shown ? n : sizeof shown, shown, sizeof shown);
    gpt2_fail(r->err, GPT2_ERR_TEMPLATE, "%s", shown[0] ? shown : "raise_exception with an empty message");
    r->status = GPT2_ERR_TEMPLATE;
    longjmp(r->jmp, 1);
}

void *jalloc(jrun *r, size_t n) {
    void *p = jarena_alloc(&r->arena, n);
    if (p) return p;
    if (r->arena.limit && r->arena.taken + n + CHUNK > r->arena.limit)
        jfail_fatal(r, NULL, GPT2_ERR_TEMPLATE,
                    "the render needs more than %zu bytes of memory (a bound of this interpreter)", r->arena.limit);
    jfail_fatal(r, NULL, GPT2_ERR_NOMEM, "out of memory");
}

void jcharge(jrun *r, const jnode *at, size_t n) {
    r->steps += (long)(n > (size_t)1 << 40 ? (size_t)1 << 40 : n);
    if (r->steps > r->opts.max_steps)
        jfail_fatal(r, at, GPT2_ERR_TEMPLATE, "the render took more than %ld steps (a bound of this interpreter: a loop that "
              "does not end?)", r->opts.max_steps);
}

/* ---- constructors ---- */
jv jv_undef(void) { return (jv){.t = JV_UNDEF}; }
jv jv_none(void) { return (jv){.t = JV_NONE}; }
jv jv_bool(int b) { return (jv){.t = JV_BOOL, .b = b != 0}; }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .i = i}; }
jv jv_float(double f) { return (jv){.t = JV_FLOAT, .f = f}; }
jv jv_str(const char *p, size_t n) { return (jv){.t = JV_STR, .s = {p ? p : "", n}}; }
jv jv_cstr(const char *s) { return jv_str(s, strlen(s)); }

jv jv_undef_msg(jrun *r, const char *hint) {
    jundef *u = jalloc(r, sizeof *u);
    *u = (jundef){.hint = hint, .name = jv_undef()};
    return (jv){.t = JV_UNDEF, .u = u};
}

jv jv_undef_attr(jrun *r, const char *obj, jv name) {
    jundef *u = jalloc(r, sizeof *u);
    *u = (jundef){.obj = obj, .name = name};
    return (jv){.t = JV_UNDEF, .u = u};
}

jv jv_list(jrun *r, size_t n, uint8_t flags) {
    jcharge(r, NULL, n / 16);
    if (r->arena.limit && n > r->arena.limit / sizeof(jv))
        jfail_fatal(r, NULL, GPT2_ERR_TEMPLATE, "a list of %zu items is more than this interpreter holds", n);
    jlist *l = jalloc(r, sizeof *l);
    l->n = n;
    l->lazy = NULL;
    l->v = n ? jalloc(r, n * sizeof(jv)) : NULL;
    for (size_t i = 0; i < n; i++) l->v[i] = jv_undef();
    return (jv){.t = JV_LIST, .flags = flags, .l = l};
}

jv jv_dict(jrun *r, size_t cap) {
    jdict *d = jalloc(r, sizeof *d);
    *d = (jdict){.cap = cap};
    if (cap) {
        d->k = jalloc(r, cap * sizeof(jv));
        d->v = jalloc(r, cap * sizeof(jv));
    }
    return (jv){.t = JV_DICT, .d = d};
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }

static const char *unhashable(jv k, int depth) {
    if (k.t == JV_DICT || (k.t == JV_LIST && !(k.flags & (JV_TUPLE | JV_ITER)))) return jv_typename(k); /* lists, views */
    if (k.t == JV_LIST && (k.flags & JV_TUPLE)) {
        if (depth > 200) return "tuple"; /* Python: a RecursionError */
        for (size_t i = 0; i < k.l->n; i++) {
            const char *t = unhashable(k.l->v[i], depth + 1);
            if (t) return t;
        }
    }
    return NULL;
}

const char *jv_unhashable(jv k) { return unhashable(k, 0); }

/* Python's hash() refuses these as dict keys. */
static void check_hashable(jrun *r, const jnode *at, jv k) {
    const char *t = jv_unhashable(k);
    if (t) jfail(r, at, GPT2_ERR_TEMPLATE, "unhashable type: '%s'", t);
}

const jv *jv_dict_get(jrun *r, const jnode *at, const jdict *d, jv k) {
    if (k.t == JV_STR) return jv_dict_getn(d, k.s.p, k.s.n);
    check_hashable(r, at, k);
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(r, at, d->k[i], k, 0)) return &d->v[i];
    return NULL;
}

const jv *jv_dict_getn(const jdict *d, const char *key, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].s.n == n && memcmp(d->k[i].s.p, key, n) == 0) return &d->v[i];
    return NULL;
}

void jv_dict_set(jrun *r, const jnode *at, jdict *d, jv k, jv v) {
    const jv *old = jv_dict_get(r, at, d, k);
    if (old) {
        d->v[old - d->v] = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 4;
        jv *nk = jalloc(r, cap * sizeof(jv)), *nv = jalloc(r, cap * sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    jcharge(r, at, d->n / 16);
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

jv jv_from_json(jrun *r, const cJSON *j, int depth) {
    if (depth > 500) jfail(r, NULL, GPT2_ERR_TEMPLATE, "the variables nest more than 500 levels deep");
    if (cJSON_IsString(j)) return jv_cstr(j->valuestring ? j->valuestring : "");
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double x = j->valuedouble;
        if (x == floor(x) && fabs(x) < 9007199254740992.0) return jv_int((int64_t)x);
        return jv_float(x);
    }
    if (cJSON_IsArray(j)) {
        jv l = jv_list(r, (size_t)cJSON_GetArraySize(j), 0);
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next) l.l->v[i++] = jv_from_json(r, c, depth + 1);
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = jv_dict(r, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next)
            jv_dict_set(r, NULL, d.d, jv_cstr(c->string ? c->string : ""), jv_from_json(r, c, depth + 1));
        return d;
    }
    return jv_none();
}

/* ---- string building ---- */
static void jsb_reserve(jrun *r, jsb *b, size_t extra) {
    if (extra <= b->cap - b->n) return;
    size_t limit = b->heap ? r->opts.max_output : r->arena.limit;
    if (extra > limit || b->n > limit - extra) {
        if (b->heap)
            jfail_fatal(r, NULL, GPT2_ERR_TEMPLATE, "the output passed %zu bytes (a bound of this interpreter)", limit);
        jfail_fatal(r, NULL, GPT2_ERR_TEMPLATE, "a string of more than %zu bytes (a bound of this interpreter)", limit);
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n < extra) cap = cap > limit / 2 ? limit + 1 : cap * 2;
    if (b->heap) {
        char *p = realloc(b->p, cap);
        if (!p) jfail_fatal(r, NULL, GPT2_ERR_NOMEM, "out of memory for the output");
        b->p = p;
    } else if (!jarena_grow(&r->arena, b->p, b->cap, cap)) {
        char *p = jalloc(r, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
    }
    b->cap = cap;
}

void jsb_put(jrun *r, jsb *b, const char *s, size_t n) {
    if (!n) return;
    jsb_reserve(r, b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    jcharge(r, NULL, n / 64);
}

void jsb_puts(jrun *r, jsb *b, const char *s) { jsb_put(r, b, s, strlen(s)); }

jv jsb_value(jrun *r, jsb *b) {
    if (!b->heap && jarena_grow(&r->arena, b->p, b->cap, b->n)) b->cap = b->n; /* give back the room */
    return jv_str(b->p, b->n);
}

/* ---- UTF-8 ---- */
size_t u8_next(const char *s, size_t n, size_t i, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s + i;
    size_t left = n - i;
    unsigned c = u[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t v = 0;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (len == 0 || left < len || u[1] < lo || u[1] > hi) {
        *cp = 0x110000 + c; /* an invalid byte: a character of its own, never a space */
        return 1;
    }
    v = (v << 6) | (u[1] & 0x3F);
    for (size_t k = 2; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) {
            *cp = 0x110000 + c;
            return 1;
        }
        v = (v << 6) | (u[k] & 0x3F);
    }
    *cp = v;
    return len;
}

size_t u8_prev(const char *s, size_t i) {
    if (i == 0) return 0;
    size_t j = i - 1, k = j;
    while (k > 0 && i - k < 4 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    uint32_t cp;
    if (u8_next(s, i, k, &cp) == i - k) return k; /* a whole character ends at i */
    return j;
}

int py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t u8_count(const char *s, size_t n) {
    size_t k = 0;
    uint32_t cp;
    for (size_t i = 0; i < n; i += u8_next(s, n, i, &cp)) k++;
    return k;
}

void u8_put(jrun *r, jsb *b, uint32_t cp) {
    char buf[4];
    size_t n;
    if (cp >= 0x110000) buf[0] = (char)(cp - 0x110000), n = 1; /* an invalid byte, as it was */
    else if (cp < 0x80) buf[0] = (char)cp, n = 1;
    else if (cp < 0x800) buf[0] = (char)(0xC0 | cp >> 6), buf[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        buf[0] = (char)(0xE0 | cp >> 12), buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), buf[2] = (char)(0x80 | (cp & 0x3F)),
        n = 3;
    else
        buf[0] = (char)(0xF0 | cp >> 18), buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), buf[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    jsb_put(r, b, buf, n);
}

/* str.isprintable() of one character: not a control, format, surrogate,
 * private-use, unassigned or separator character (the space excepted). */
static int py_isprintable(uint32_t c) {
    if (c >= 0x110000) return 0;
    if (c < 0x80) return c >= 0x20 && c < 0x7F;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return 0;
    default: return 1;
    }
}

/* ---- Python's str and repr ---- */
void py_float_repr(double f, char buf[32]) {
    if (isnan(f)) {
        strcpy(buf, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(buf, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        strcpy(buf, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char e[40];
    for (int p = 1; p <= 17; p++) { /* the shortest digits that read back as f */
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e: [-]D[.DDD]e[+-]XX -> digits and the decimal point's place */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exp10 = atoi(p + 1), decpt = exp10 + 1;
    char *o = buf;
    if (neg) *o++ = '-';
    if (decpt <= -4 || decpt > 16) { /* repr's exponent form */
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++) *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else if (decpt >= nd) {
        memcpy(o, digits, (size_t)nd);
        o += nd;
        for (int i = nd; i < decpt; i++) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, (size_t)(nd - decpt));
        o += nd - decpt;
    }
    *o = '\0';
}

const char *jv_typename(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST:
        if (v.flags & JV_VIEW) return v.flags & JV_KEYS ? "dict_keys" : v.flags & JV_VALUES ? "dict_values" : "dict_items";
        if (v.flags & JV_REVERSED) return "list_reverseiterator";
        return v.flags & JV_ITER ? "generator" : v.flags & JV_TUPLE ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "builtin_function_or_method";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s.n != 0;
    case JV_LIST: return (v.flags & JV_ITER) || v.l->n != 0; /* a generator is always true */
    case JV_DICT: return v.d->n != 0;
    default: return 1;
    }
}

static void put_int(jrun *r, jsb *b, int64_t i) {
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)i);
    jsb_puts(r, b, buf);
}

static void put_float(jrun *r, jsb *b, double f) {
    char buf[32];
    py_float_repr(f, buf);
    jsb_puts(r, b, buf);
}

static void repr_str(jrun *r, jsb *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jsb_put(r, b, &q, 1);
    uint32_t c;
    for (size_t i = 0, k; i < n; i += k) {
        k = u8_next(s, n, i, &c);
        char esc[16];
        if (c == (uint32_t)q || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            jsb_put(r, b, esc, 2);
        } else if (c == '\t' || c == '\n' || c == '\r') {
            jsb_puts(r, b, c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r");
        } else if (py_isprintable(c)) {
            jsb_put(r, b, s + i, k);
        } else {
            uint32_t x = c >= 0x110000 ? c - 0x110000 + 0xDC00 : c; /* a lone byte: Python's surrogateescape */
            if (x < 0x100) snprintf(esc, sizeof esc, "\\x%02x", x);
            else if (x < 0x10000) snprintf(esc, sizeof esc, "\\u%04x", x);
            else snprintf(esc, sizeof esc, "\\U%08x", x);
            jsb_puts(r, b, esc);
        }
    }
    jsb_put(r, b, &q, 1);
}

enum { MAX_VALUE_DEPTH = 200 }; /* Python's own repr and == stop near here (RecursionError) */

static void check_depth(jrun *r, const jnode *at, int depth) {
    if (depth > MAX_VALUE_DEPTH)
        jfail(r, at, GPT2_ERR_TEMPLATE, "maximum recursion depth exceeded (values nested more than %d deep)",
              MAX_VALUE_DEPTH);
}

void jv_repr_to(jrun *r, const jnode *at, jsb *b, jv v, int depth) {
    check_depth(r, at, depth);
    char buf[96];
    switch (v.t) {
    case JV_UNDEF: jsb_puts(r, b, "Undefined"); return;
    case JV_STR: repr_str(r, b, v.s.p, v.s.n); return;
    case JV_LIST:
        if (v.flags & JV_ITER) {
            jsb_puts(r, b, v.flags & JV_REVERSED ? "<list_reverseiterator object>" : "<generator object>");
            return;
        }
        if (v.flags & JV_VIEW) jsb_puts(r, b, jv_typename(v)), jsb_puts(r, b, "(");
        jsb_puts(r, b, v.flags & JV_TUPLE ? "(" : "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jsb_puts(r, b, ", ");
            jv_repr_to(r, at, b, v.l->v[i], depth + 1);
        }
        jsb_puts(r, b, (v.flags & JV_TUPLE) ? (v.l->n == 1 ? ",)" : ")") : "]");
        if (v.flags & JV_VIEW) jsb_puts(r, b, ")");
        return;
    case JV_NS: jsb_puts(r, b, "<Namespace "); /* its attributes as a dict: */
        /* fall through */
    case JV_DICT:
        jsb_puts(r, b, "{");
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) jsb_puts(r, b, ", ");
            jv_repr_to(r, at, b, v.d->k[i], depth + 1);
            jsb_puts(r, b, ": ");
            jv_repr_to(r, at, b, v.d->v[i], depth + 1);
        }
        jsb_puts(r, b, v.t == JV_NS ? "}>" : "}");
        return;
    case JV_MACRO:
        jsb_puts(r, b, "<Macro ");
        repr_str(r, b, v.m->def->name, strlen(v.m->def->name));
        jsb_puts(r, b, ">");
        return;
    case JV_FUNC: jsb_puts(r, b, "<built-in function>"); return;
    case JV_LOOP:
        snprintf(buf, sizeof buf, "<LoopContext %zu/%zu>", v.loop->i + 1, v.loop->n);
        jsb_puts(r, b, buf);
        return;
    default: jv_str_to(r, at, b, v);
    }
}

void jv_str_to(jrun *r, const jnode *at, jsb *b, jv v) {
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jsb_puts(r, b, "None"); return;
    case JV_BOOL: jsb_puts(r, b, v.b ? "True" : "False"); return;
    case JV_INT: put_int(r, b, v.i); return;
    case JV_FLOAT: put_float(r, b, v.f); return;
    case JV_STR: jsb_put(r, b, v.s.p, v.s.n); return;
    default: jv_repr_to(r, at, b, v, 0);
    }
}

jv jv_to_str(jrun *r, const jnode *at, jv v) {
    if (v.t == JV_STR) return v;
    jsb b = {0};
    jv_str_to(r, at, &b, v);
    return jsb_value(r, &b);
}

const char *jv_repr_c(jrun *r, const jnode *at, jv v) {
    jsb b = {0};
    jv_repr_to(r, at, &b, v, 0);
    jsb_put(r, &b, "", 1);
    return b.p;
}

/* ---- undefined ---- */
void jundef_fail(jrun *r, const jnode *at, jv v) {
    const jundef *u = v.u;
    if (!u) jfail(r, at, GPT2_ERR_TEMPLATE, "an undefined value was used");
    if (u->hint) jfail(r, at, GPT2_ERR_TEMPLATE, "%s", u->hint);
    const char *name = jv_repr_c(r, at, u->name);
    if (!u->obj) jfail(r, at, GPT2_ERR_TEMPLATE, "%s is undefined", name);
    if (u->name.t != JV_STR) jfail(r, at, GPT2_ERR_TEMPLATE, "%s has no element %s", u->obj, name);
    jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' has no attribute %s", u->obj, name);
}

/* ---- comparisons ---- */
/* a <=> b for two numbers: -1, 0, 1, or 2 when unordered (a NaN). */
static int num_cmp(jv a, jv b) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
        int64_t x = a.t == JV_BOOL ? a.b : a.i, y = b.t == JV_BOOL ? b.b : b.i;
        return x < y ? -1 : x > y;
    }
    long double x = a.t == JV_FLOAT ? a.f : a.t == JV_BOOL ? a.b : (long double)a.i; /* exact for int64 */
    long double y = b.t == JV_FLOAT ? b.f : b.t == JV_BOOL ? b.b : (long double)b.i;
    if (isnan(x) || isnan(y)) return 2;
    return x < y ? -1 : x > y;
}

int jv_eq(jrun *r, const jnode *at, jv a, jv b, int depth) {
    check_depth(r, at, depth);
    if (is_num(a) && is_num(b)) return num_cmp(a, b) == 0;
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.s.n == b.s.n && memcmp(a.s.p, b.s.p, a.s.n) == 0;
    case JV_LIST:
        if (a.l == b.l) return 1;
        if ((a.flags | b.flags) & JV_NOT_LIST || (a.flags & JV_TUPLE) != (b.flags & JV_TUPLE) || a.l->n != b.l->n) return 0;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_eq(r, at, a.l->v[i], b.l->v[i], depth + 1)) return 0;
        return 1;
    case JV_DICT:
        if (a.d == b.d) return 1;
        if (a.d->n != b.d->n) return 0;
        for (size_t i = 0; i < a.d->n; i++) {
            const jv *o = jv_dict_get(r, at, b.d, a.d->k[i]);
            if (!o || !jv_eq(r, at, a.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case JV_NS: return a.d == b.d;
    case JV_MACRO: return a.m == b.m;
    case JV_FUNC: return a.fn == b.fn;
    case JV_LOOP: return a.loop == b.loop;
    }
    return 0;
}

/* a <=> b as Python orders them; op names the operator when they cannot be. */
static int order(jrun *r, const jnode *at, jv a, jv b, const char *op, int depth) {
    check_depth(r, at, depth);
    if (a.t == JV_UNDEF) jundef_fail(r, at, a);
    if (b.t == JV_UNDEF) jundef_fail(r, at, b);
    if (is_num(a) && is_num(b)) return num_cmp(a, b);
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int c = memcmp(a.s.p, b.s.p, n); /* UTF-8's byte order is its code points' */
        if (c) return c < 0 ? -1 : 1;
        return a.s.n < b.s.n ? -1 : a.s.n > b.s.n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && !((a.flags | b.flags) & JV_NOT_LIST) &&
        (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE)) {
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t i = 0; i < n; i++)
            if (!jv_eq(r, at, a.l->v[i], b.l->v[i], depth + 1)) return order(r, at, a.l->v[i], b.l->v[i], op, depth + 1);
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' not supported between instances of '%s' and '%s'", op, jv_typename(a),
          jv_typename(b));
}

int jv_lt(jrun *r, const jnode *at, jv a, jv b, const char *op, int depth) {
    return order(r, at, a, b, op, depth) == -1;
}

/* The comparison operators < <= > >= (cmp: CMP_LT ...), NaN false to all. */
int jv_compare(jrun *r, const jnode *at, jv a, jv b, int cmp) {
    static const char *const ops[] = {[CMP_LT] = "<", [CMP_LE] = "<=", [CMP_GT] = ">", [CMP_GE] = ">="};
    int c = order(r, at, a, b, ops[cmp], 0);
    switch (cmp) {
    case CMP_LT: return c == -1;
    case CMP_LE: return c == -1 || c == 0;
    case CMP_GT: return c == 1;
    default: return c == 1 || c == 0;
    }
}

int64_t jv_len(jrun *r, const jnode *at, jv v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)u8_count(v.s.p, v.s.n);
    case JV_LIST:
        if (!(v.flags & JV_ITER)) return (int64_t)v.l->n;
        break;
    case JV_DICT: return (int64_t)v.d->n;
    case JV_LOOP: return (int64_t)v.loop->n;
    default: break;
    }
    jfail(r, at, GPT2_ERR_TEMPLATE, "object of type '%s' has no len()", jv_typename(v));
}

jv *jv_items(jrun *r, const jnode *at, jv v, size_t *n) {
    switch (v.t) {
    case JV_UNDEF: *n = 0; return NULL;
    case JV_LIST:
        if (v.l->lazy) jfail_again(r, v.l->lazy);
        *n = v.l->n;
        return v.l->v;
    case JV_DICT: *n = v.d->n; return v.d->k;
    case JV_STR: {
        size_t k = u8_count(v.s.p, v.s.n), j = 0;
        jv *it = jalloc(r, (k ? k : 1) * sizeof(jv));
        uint32_t cp;
        for (size_t i = 0, w; i < v.s.n; i += w) {
            w = u8_next(v.s.p, v.s.n, i, &cp);
            it[j++] = jv_str(v.s.p + i, w);
        }
        jcharge(r, at, k / 16);
        *n = k;
        return it;
    }
    default: jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' object is not iterable", jv_typename(v));
    }
}

/* ---- json.dumps ---- */
static void json_str(jrun *r, jsb *b, const char *s, size_t n, int ascii) {
    jsb_put(r, b, "\"", 1);
    uint32_t c;
    for (size_t i = 0, k; i < n; i += k) {
        k = u8_next(s, n, i, &c);
        char esc[16];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        }
        if (e) jsb_puts(r, b, e);
        else if (c < 0x20 || (ascii && c == 0x7F)) snprintf(esc, sizeof esc, "\\u%04x", c), jsb_puts(r, b, esc);
        else if (!ascii || c < 0x80 || c >= 0x110000) jsb_put(r, b, s + i, k);
        else if (c < 0x10000) snprintf(esc, sizeof esc, "\\u%04x", c), jsb_puts(r, b, esc);
        else {
            uint32_t x = c - 0x10000;
            snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (x >> 10), 0xDC00 + (x & 0x3FF));
            jsb_puts(r, b, esc);
        }
    }
    jsb_put(r, b, "\"", 1);
}

static void json_float(jrun *r, jsb *b, double f) {
    if (isnan(f)) jsb_puts(r, b, "NaN");
    else if (isinf(f)) jsb_puts(r, b, f < 0 ? "-Infinity" : "Infinity");
    else put_float(r, b, f);
}

typedef struct {
    int ascii, sort_keys;
    const char *indent, *item_sep, *key_sep;
    size_t indent_n;
} json_fmt;

static void json_newline(jrun *r, jsb *b, const json_fmt *f, int level) {
    jsb_put(r, b, "\n", 1);
    for (int i = 0; i < level; i++) jsb_put(r, b, f->indent, f->indent_n);
}

static void json_value(jrun *r, const jnode *at, jsb *b, jv v, const json_fmt *f, int level);

/* A dict's key as json.dumps writes it (strings, numbers, booleans, None). */
static void json_key(jrun *r, const jnode *at, jsb *b, jv k, const json_fmt *f) {
    switch (k.t) {
    case JV_STR: json_str(r, b, k.s.p, k.s.n, f->ascii); return;
    case JV_INT: jsb_put(r, b, "\"", 1), put_int(r, b, k.i), jsb_put(r, b, "\"", 1); return;
    case JV_FLOAT: jsb_put(r, b, "\"", 1), json_float(r, b, k.f), jsb_put(r, b, "\"", 1); return;
    case JV_BOOL: jsb_puts(r, b, k.b ? "\"true\"" : "\"false\""); return;
    case JV_NONE: jsb_puts(r, b, "\"null\""); return;
    default:
        jfail(r, at, GPT2_ERR_TEMPLATE, "keys must be str, int, float, bool or None, not %s", jv_typename(k));
    }
}

static void json_dict(jrun *r, const jnode *at, jsb *b, const jdict *d, const json_fmt *f, int level) {
    if (d->n == 0) {
        jsb_puts(r, b, "{}");
        return;
    }
    size_t *ord = jalloc(r, d->n * sizeof *ord);
    for (size_t i = 0; i < d->n; i++) ord[i] = i;
    if (f->sort_keys) /* insertion sort, stable like Python's sorted(); a bad pair fails as there */
        for (size_t i = 1; i < d->n; i++) {
            jcharge(r, at, i / 8);
            for (size_t j = i; j > 0 && jv_lt(r, at, d->k[ord[j]], d->k[ord[j - 1]], "<", 0); j--) {
                size_t t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
        }
    jsb_puts(r, b, "{");
    if (f->indent) json_newline(r, b, f, level + 1);
    for (size_t i = 0; i < d->n; i++) {
        if (i) {
            jsb_puts(r, b, f->item_sep);
            if (f->indent) json_newline(r, b, f, level + 1);
        }
        json_key(r, at, b, d->k[ord[i]], f);
        jsb_puts(r, b, f->key_sep);
        json_value(r, at, b, d->v[ord[i]], f, level + 1);
    }
    if (f->indent) json_newline(r, b, f, level);
    jsb_puts(r, b, "}");
}

static void json_value(jrun *r, const jnode *at, jsb *b, jv v, const json_fmt *f, int level) {
    check_depth(r, at, level);
    switch (v.t) {
    case JV_NONE: jsb_puts(r, b, "null"); return;
    case JV_BOOL: jsb_puts(r, b, v.b ? "true" : "false"); return;
    case JV_INT: put_int(r, b, v.i); return;
    case JV_FLOAT: json_float(r, b, v.f); return;
    case JV_STR: json_str(r, b, v.s.p, v.s.n, f->ascii); return;
    case JV_DICT: json_dict(r, at, b, v.d, f, level); return;
    case JV_LIST:
        if (v.flags & JV_NOT_LIST) break;
        if (v.l->n == 0) {
            jsb_puts(r, b, "[]");
            return;
        }
        jsb_puts(r, b, "[");
        if (f->indent) json_newline(r, b, f, level + 1);
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) {
                jsb_puts(r, b, f->item_sep);
                if (f->indent) json_newline(r, b, f, level + 1);
            }
            json_value(r, at, b, v.l->v[i], f, level + 1);
        }
        if (f->indent) json_newline(r, b, f, level);
        jsb_puts(r, b, "]");
        return;
    default: break;
    }
    jfail(r, at, GPT2_ERR_TEMPLATE, "Object of type %s is not JSON serializable", jv_typename(v));
}

void jv_json_to(jrun *r, const jnode *at, jsb *b, jv v, int ensure_ascii, const char *indent, size_t indent_n,
                const char *item_sep, const char *key_sep, int sort_keys, int depth) {
    json_fmt f = {.ascii = ensure_ascii,
                  .sort_keys = sort_keys,
                  .indent = indent,
                  .indent_n = indent_n,
                  .item_sep = item_sep ? item_sep : indent ? "," : ", ",
                  .key_sep = key_sep ? key_sep : ": "};
    json_value(r, at, b, v, &f, depth);
}
