/* jinja_eval.c — running a parsed template: scopes as Jinja2 makes them (a
 * loop turn, a macro call, a with or a block capture has its own; an if
 * does not), Python's operators, loops with their loop variable, macros,
 * and the bounds of a render. */
#include "jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

enum { JC_NONE, JC_BREAK, JC_CONTINUE };
enum { MAX_RUN_DEPTH = 3000 }; /* nested evaluations, all macro calls together: the C stack's bound */

/* ---- scopes ---- */
static jscope *scope_new(jrun *r, jscope *parent) {
    jscope *s = jalloc(r, sizeof *s);
    *s = (jscope){.parent = parent};
    return s;
}

static void scope_set(jrun *r, jscope *s, const char *name, jv v) {
    for (int i = 0; i < s->n; i++)
        if (s->names[i] == name) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        const char **nn = jalloc(r, (size_t)cap * sizeof *nn);
        jv *nv = jalloc(r, (size_t)cap * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, (size_t)s->n * sizeof *nn);
            memcpy(nv, s->vals, (size_t)s->n * sizeof *nv);
        }
        s->names = nn, s->vals = nv, s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

/* The value of a name its frame has not assigned yet (jinja.c's scoping). */
static jundef missing_mark;
static const jv MISSING = {.t = JV_UNDEF, .u = &missing_mark};

static void declare_missing(jrun *r, jscope *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++) scope_set(r, s, names[i], MISSING);
}

/* A name: the scopes inward out, then the caller's variables, then the globals. */
static jv resolve(jrun *r, jscope *s, const char *name) {
    for (; s; s = s->parent)
        for (int i = 0; i < s->n; i++)
            if (s->names[i] == name) return s->vals[i].u == &missing_mark ? jv_undef_attr(r, NULL, jv_cstr(name)) : s->vals[i];
    const jv *v = jv_dict_getn(r->vars, name, strlen(name));
    if (v) return *v;
    jv g;
    if (jb_global(r, name, &g)) return g;
    return jv_undef_attr(r, NULL, jv_cstr(name));
}

/* ---- expressions ---- */
static jv eval(jrun *r, const jnode *n, jscope *s);

static int64_t as_int(jv v) { return v.t == JV_BOOL ? v.b : v.i; }
static double as_float(jv v) { return v.t == JV_FLOAT ? v.f : (double)as_int(v); }
static int is_int(jv v) { return v.t == JV_INT || v.t == JV_BOOL; }
static int is_number(jv v) { return is_int(v) || v.t == JV_FLOAT; }

static _Noreturn void overflow(jrun *r, const jnode *at) {
    jfail(r, at, GPT2_ERR_TEMPLATE, "integer overflow (this interpreter holds 64-bit integers)");
}

static int64_t int_pow(jrun *r, const jnode *at, int64_t b, int64_t e) {
    int64_t acc = 1;
    while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(acc, b, &acc)) overflow(r, at);
        e >>= 1;
        if (e && __builtin_mul_overflow(b, b, &b)) overflow(r, at);
    }
    return acc;
}

static jv int_arith(jrun *r, const jnode *at, int op, int64_t x, int64_t y) {
    int64_t z = 0;
    switch (op) {
    case OP_ADD: if (__builtin_add_overflow(x, y, &z)) overflow(r, at); return jv_int(z);
    case OP_SUB: if (__builtin_sub_overflow(x, y, &z)) overflow(r, at); return jv_int(z);
    case OP_MUL: if (__builtin_mul_overflow(x, y, &z)) overflow(r, at); return jv_int(z);
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0) jfail(r, at, GPT2_ERR_TEMPLATE, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
            if (op == OP_MOD) return jv_int(0);
            overflow(r, at);
        }
        z = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) z--, m += y; /* floor, as Python */
        return jv_int(op == OP_MOD ? m : z);
    default: /* OP_POW */
        if (y < 0) {
            if (x == 0) jfail(r, at, GPT2_ERR_TEMPLATE, "0.0 cannot be raised to a negative power");
            return jv_float(pow((double)x, (double)y));
        }
        return jv_int(int_pow(r, at, x, y));
    }
}

static jv float_arith(jrun *r, const jnode *at, int op, double x, double y) {
    switch (op) {
    case OP_ADD: return jv_float(x + y);
    case OP_SUB: return jv_float(x - y);
    case OP_MUL: return jv_float(x * y);
    case OP_DIV:
        if (y == 0) jfail(r, at, GPT2_ERR_TEMPLATE, "float division by zero");
        return jv_float(x / y);
    case OP_FLOORDIV:
    case OP_MOD: { /* Python's float_divmod */
        if (y == 0) jfail(r, at, GPT2_ERR_TEMPLATE, op == OP_MOD ? "float modulo" : "float floor division by zero");
        double mod = fmod(x, y), div = (x - mod) / y, floordiv;
        if (mod) {
            if ((y < 0) != (mod < 0)) mod += y, div -= 1.0;
        } else {
            mod = copysign(0.0, y);
        }
        if (div) {
            floordiv = floor(div);
            if (div - floordiv > 0.5) floordiv += 1.0;
        } else {
            floordiv = copysign(0.0, x / y);
        }
        return jv_float(op == OP_MOD ? mod : floordiv);
    }
    default: { /* OP_POW */
        if (x == 0 && y < 0) jfail(r, at, GPT2_ERR_TEMPLATE, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y) && isfinite(y))
            jfail(r, at, GPT2_ERR_TEMPLATE, "a negative number to a fractional power is complex, which this "
                  "interpreter does not hold");
        double z = pow(x, y);
        if (isinf(z) && isfinite(x) && isfinite(y)) jfail(r, at, GPT2_ERR_TEMPLATE, "(34, 'Numerical result out of range')");
        return jv_float(z);
    }
    }
}

/* s repeated k times (str * int, list * int). */
static jv repeat(jrun *r, const jnode *at, jv s, int64_t k) {
    if (k <= 0) return s.t == JV_STR ? jv_str("", 0) : jv_list(r, 0, s.flags & JV_TUPLE);
    size_t unit = s.t == JV_STR ? s.s.n : s.l->n;
    if (unit && (uint64_t)k > r->opts.max_memory / unit)
        jfail_fatal(r, at, GPT2_ERR_TEMPLATE, "a repetition of more than %zu bytes (a bound of this interpreter)",
              r->opts.max_memory);
    size_t total = unit * (size_t)k;
    jcharge(r, at, total / 16);
    if (s.t == JV_STR) {
        char *p = jalloc(r, total ? total : 1);
        for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * unit, s.s.p, unit);
        return jv_str(p, total);
    }
    jv l = jv_list(r, total, s.flags & JV_TUPLE);
    for (int64_t i = 0; unit && i < k; i++) memcpy(l.l->v + (size_t)i * unit, s.l->v, unit * sizeof(jv));
    return l;
}

/* a + b for two strings: in place when a is the latest allocation. */
static jv str_concat(jrun *r, jv a, jv b) {
    if (!b.s.n) return a;
    if (!a.s.n) return b;
    size_t n = a.s.n + b.s.n;
    if (jarena_grow(&r->arena, (void *)a.s.p, a.s.n, n)) {
        memmove((char *)a.s.p + a.s.n, b.s.p, b.s.n);
        jcharge(r, NULL, b.s.n / 64);
        return jv_str(a.s.p, n);
    }
    char *p = jalloc(r, n);
    memcpy(p, a.s.p, a.s.n);
    memcpy(p + a.s.n, b.s.p, b.s.n);
    jcharge(r, NULL, n / 64);
    return jv_str(p, n);
}

jv je_arith(jrun *r, const jnode *at, int op, jv a, jv b) {
    static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (op == OP_MOD && a.t == JV_STR) return jb_printf(r, at, a, b); /* str.__mod__ takes any right side */
    if (a.t == JV_UNDEF) jundef_fail(r, at, a);
    if (b.t == JV_UNDEF) jundef_fail(r, at, b);
    if (is_number(a) && is_number(b)) {
        if (is_int(a) && is_int(b) && op != OP_DIV) return int_arith(r, at, op, as_int(a), as_int(b));
        if (op == OP_DIV && as_float(b) == 0) jfail(r, at, GPT2_ERR_TEMPLATE, is_int(a) && is_int(b) ? "division by zero"
                                                                                        : "float division by zero");
        return float_arith(r, at, op, as_float(a), as_float(b));
    }
    int seq_a = a.t == JV_STR || (a.t == JV_LIST && !(a.flags & JV_NOT_LIST));
    int seq_b = b.t == JV_STR || (b.t == JV_LIST && !(b.flags & JV_NOT_LIST));
    if (op == OP_ADD && seq_a) {
        if (a.t == JV_STR && b.t == JV_STR) return str_concat(r, a, b);
        if (a.t == JV_LIST && b.t == JV_LIST && !(b.flags & JV_NOT_LIST) && (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE)) {
            jv l = jv_list(r, a.l->n + b.l->n, a.flags & JV_TUPLE);
            if (a.l->n) memcpy(l.l->v, a.l->v, a.l->n * sizeof(jv));
            if (b.l->n) memcpy(l.l->v + a.l->n, b.l->v, b.l->n * sizeof(jv));
            return l;
        }
        jfail(r, at, GPT2_ERR_TEMPLATE, "can only concatenate %s (not \"%s\") to %s", jv_typename(a), jv_typename(b),
              jv_typename(a));
    }
    if (op == OP_MUL && seq_a && is_int(b)) return repeat(r, at, a, as_int(b));
    if (op == OP_MUL && seq_b && is_int(a)) return repeat(r, at, b, as_int(a));
    jfail(r, at, GPT2_ERR_TEMPLATE, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], jv_typename(a),
          jv_typename(b));
}

/* item in container, as Python's in. */
int je_contains(jrun *r, const jnode *at, jv container, jv item) {
    switch (container.t) {
    case JV_UNDEF: return 0; /* iterated: nothing */
    case JV_STR:
        if (item.t != JV_STR)
            jfail(r, at, GPT2_ERR_TEMPLATE, "'in <string>' requires string as left operand, not %s", jv_typename(item));
        if (!item.s.n) return 1;
        jcharge(r, at, container.s.n / 64);
        for (size_t i = 0; i + item.s.n <= container.s.n; i++)
            if (container.s.p[i] == item.s.p[0] && !memcmp(container.s.p + i, item.s.p, item.s.n)) return 1;
        return 0;
    case JV_LIST:
        if (container.l->lazy) jfail_again(r, container.l->lazy);
        jcharge(r, at, container.l->n);
        for (size_t i = 0; i < container.l->n; i++)
            if (jv_eq(r, at, container.l->v[i], item, 0)) return 1;
        return 0;
    case JV_DICT: jcharge(r, at, container.d->n); return jv_dict_get(r, at, container.d, item) != NULL;
    default: jfail(r, at, GPT2_ERR_TEMPLATE, "argument of type '%s' is not iterable", jv_typename(container));
    }
}

static int compare(jrun *r, const jnode *at, int cmp, jv a, jv b) {
    switch (cmp) {
    case CMP_EQ: return jv_eq(r, at, a, b, 0);
    case CMP_NE: return !jv_eq(r, at, a, b, 0);
    case CMP_IN: return je_contains(r, at, b, a);
    case CMP_NOTIN: return !je_contains(r, at, b, a);
    default: return jv_compare(r, at, a, b, cmp);
    }
}

/* Item i of a slice from start by step (in range, though i * step alone may not be). */
static int64_t slice_at(int64_t start, int64_t step, size_t i) {
    return (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step);
}

/* Python's slice indices (PySlice_AdjustIndices) over len items: the count. */
static size_t slice_indices(int64_t len, jv *bounds, int64_t *start, int64_t *step) {
    int64_t st = bounds[2].t == JV_NONE ? 1 : as_int(bounds[2]);
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? len - 1 : len, b[2];
    for (int k = 0; k < 2; k++) {
        if (bounds[k].t == JV_NONE) {
            b[k] = (k == 0) == (st < 0) ? hi : lo;
            continue;
        }
        int64_t x = as_int(bounds[k]);
        if (x < 0) {
            x = x < -len ? lo : x + len;
            if (x < 0) x = lo;
        } else if (x >= len) {
            x = hi;
        }
        b[k] = x;
    }
    *start = b[0];
    *step = st;
    uint64_t mag = st > 0 ? (uint64_t)st : (uint64_t)0 - (uint64_t)st; /* -INT64_MIN does not fit */
    if (st > 0) return b[0] < b[1] ? (size_t)(((uint64_t)b[1] - (uint64_t)b[0] - 1) / mag + 1) : 0;
    return b[1] < b[0] ? (size_t)(((uint64_t)b[0] - (uint64_t)b[1] - 1) / mag + 1) : 0;
}

/* x[a:b:c]: Python's own subscript (Jinja's slices bypass its forgiving getitem). */
static jv eval_slice(jrun *r, const jnode *n, jv x, jscope *s) {
    const jnode *sl = n->b;
    jv bounds[3];
    const jnode *parts[3] = {sl->a, sl->b, sl->c};
    for (int k = 0; k < 3; k++) bounds[k] = parts[k] ? eval(r, parts[k], s) : jv_none();
    if (x.t == JV_UNDEF) jundef_fail(r, n, x);
    if (x.t == JV_DICT) jfail(r, n, GPT2_ERR_TEMPLATE, "unhashable type: 'slice'");
    if (x.t != JV_STR && !(x.t == JV_LIST && !(x.flags & JV_NOT_LIST)))
        jfail(r, n, GPT2_ERR_TEMPLATE, "'%s' object is not subscriptable", jv_typename(x));
    for (int k = 0; k < 3; k++) {
        if (bounds[k].t == JV_UNDEF && bounds[k].u) jundef_fail(r, n, bounds[k]);
        if (bounds[k].t != JV_NONE && !is_int(bounds[k]))
            jfail(r, n, GPT2_ERR_TEMPLATE, "slice indices must be integers or None or have an __index__ method");
    }
    if (bounds[2].t != JV_NONE && as_int(bounds[2]) == 0) jfail(r, n, GPT2_ERR_TEMPLATE, "slice step cannot be zero");
    int64_t start, step;
    if (x.t == JV_STR) {
        size_t nc = 0;
        jv *chars = jv_items(r, n, x, &nc);
        size_t k = slice_indices((int64_t)nc, bounds, &start, &step);
        if (step == 1) { /* a view of the bytes */
            if (!k) return jv_str("", 0);
            const char *b = chars[start].s.p, *e = chars[start + (int64_t)k - 1].s.p + chars[start + (int64_t)k - 1].s.n;
            return jv_str(b, (size_t)(e - b));
        }
        jsb b = {0};
        for (size_t i = 0; i < k; i++) {
            jv c = chars[slice_at(start, step, i)];
            jsb_put(r, &b, c.s.p, c.s.n);
        }
        return jsb_value(r, &b);
    }
    size_t k = slice_indices((int64_t)x.l->n, bounds, &start, &step);
    jv l = jv_list(r, k, x.flags & JV_TUPLE);
    for (size_t i = 0; i < k; i++) l.l->v[i] = x.l->v[slice_at(start, step, i)];
    return l;
}

typedef struct {
    jv *args, *kwv;
    const char **kwn;
    int n, nkw;
} jargs;

static jargs eval_args(jrun *r, const jnode *n, jscope *s) {
    jargs a = {.n = n->n_kids, .nkw = n->n_kw, .kwn = n->kwname};
    a.args = jalloc(r, (size_t)(a.n + 1) * sizeof(jv));
    a.kwv = jalloc(r, (size_t)(a.nkw + 1) * sizeof(jv));
    for (int i = 0; i < a.n; i++) a.args[i] = eval(r, n->kids[i], s);
    for (int i = 0; i < a.nkw; i++) a.kwv[i] = eval(r, n->kwval[i], s);
    return a;
}

static jv eval_filter(jrun *r, const jnode *n, jscope *s) {
    jv x;
    if (n->a) x = eval(r, n->a, s);
    else x = *r->block_text;
    if (n->fid == -1) jfail(r, n, GPT2_ERR_TEMPLATE, "No filter named '%s' found.", n->name);
    if (n->fid < 0) jfail(r, n, GPT2_ERR_TEMPLATE, "the filter '%s' is not supported by this interpreter", n->name);
    jargs a = eval_args(r, n, s);
    return jb_filter(r, n, n->fid, x, a.args, a.n, a.kwn, a.kwv, a.nkw);
}

static jv eval_test(jrun *r, const jnode *n, jscope *s) {
    jv x = eval(r, n->a, s);
    if (n->fid == -1) jfail(r, n, GPT2_ERR_TEMPLATE, "No test named '%s' found.", n->name);
    if (n->fid < 0) jfail(r, n, GPT2_ERR_TEMPLATE, "the test '%s' is not supported by this interpreter", n->name);
    jargs a = eval_args(r, n, s);
    return jv_bool(jb_test(r, n, n->fid, x, a.args, a.n, a.kwn, a.kwv, a.nkw));
}

static jv eval_unary(jrun *r, const jnode *n, jv x) {
    if (x.t == JV_UNDEF) jundef_fail(r, n, x);
    if (x.t == JV_FLOAT) return jv_float(n->kind == N_NEG ? -x.f : x.f);
    if (is_int(x)) {
        if (n->kind == N_POS) return jv_int(as_int(x));
        if (as_int(x) == INT64_MIN) overflow(r, n);
        return jv_int(-as_int(x));
    }
    jfail(r, n, GPT2_ERR_TEMPLATE, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', jv_typename(x));
}

static jv eval_inner(jrun *r, const jnode *n, jscope *s) {
    switch (n->kind) {
    case N_CONST: return n->val;
    case N_NAME: return resolve(r, s, n->name);
    case N_LIST:
    case N_TUPLE: {
        jv l = jv_list(r, (size_t)n->n_kids, n->kind == N_TUPLE ? JV_TUPLE : 0);
        for (int i = 0; i < n->n_kids; i++) l.l->v[i] = eval(r, n->kids[i], s);
        return l;
    }
    case N_DICT: {
        jv d = jv_dict(r, (size_t)n->n_kids / 2);
        for (int i = 0; i + 1 < n->n_kids; i += 2) {
            jv k = eval(r, n->kids[i], s);
            jv_dict_set(r, n, d.d, k, eval(r, n->kids[i + 1], s));
        }
        return d;
    }
    case N_GETATTR: return jb_getattr(r, n, eval(r, n->a, s), jv_cstr(n->name));
    case N_GETITEM: {
        jv x = eval(r, n->a, s);
        if (n->b->kind == N_SLICE) return eval_slice(r, n, x, s);
        return jb_getitem(r, n, x, eval(r, n->b, s));
    }
    case N_CALL: {
        jv callee = eval(r, n->a, s);
        jargs a = eval_args(r, n, s);
        return je_call(r, n, callee, a.args, a.n, a.kwn, a.kwv, a.nkw);
    }
    case N_FILTER: return eval_filter(r, n, s);
    case N_TEST: return eval_test(r, n, s);
    case N_NOT: return jv_bool(!jv_truthy(eval(r, n->a, s)));
    case N_NEG:
    case N_POS: return eval_unary(r, n, eval(r, n->a, s));
    case N_BINOP: {
        jv a = eval(r, n->a, s);
        return je_arith(r, n, n->op, a, eval(r, n->b, s));
    }
    case N_CONCAT: { /* every part first, so that nothing allocates while the result grows */
        jv *parts = jalloc(r, (size_t)n->n_kids * sizeof *parts);
        for (int i = 0; i < n->n_kids; i++) parts[i] = jv_to_str(r, n, eval(r, n->kids[i], s));
        jsb b = {0};
        for (int i = 0; i < n->n_kids; i++) jsb_put(r, &b, parts[i].s.p, parts[i].s.n);
        return jsb_value(r, &b);
    }
    case N_AND: {
        jv a = eval(r, n->a, s);
        return jv_truthy(a) ? eval(r, n->b, s) : a;
    }
    case N_OR: {
        jv a = eval(r, n->a, s);
        return jv_truthy(a) ? a : eval(r, n->b, s);
    }
    case N_COMPARE: {
        jv left = eval(r, n->a, s);
        for (int i = 0; i < n->n_kids; i++) {
            jv right = eval(r, n->kids[i], s);
            if (!compare(r, n, n->cmp[i], left, right)) return jv_bool(0);
            left = right;
        }
        return jv_bool(1);
    }
    case N_CONDEXPR:
        if (jv_truthy(eval(r, n->a, s))) return eval(r, n->b, s);
        if (n->c) return eval(r, n->c, s);
        {
            char hint[160];
            snprintf(hint, sizeof hint, "the inline if-expression on line %d evaluated to false and no else section "
                     "was defined.", n->line);
            char *h = jalloc(r, strlen(hint) + 1);
            strcpy(h, hint);
            return jv_undef_msg(r, h);
        }
    default: jfail(r, n, GPT2_ERR_TEMPLATE, "internal error: node %d is not an expression", n->kind);
    }
}

static void enter(jrun *r, const jnode *n) {
    jcharge(r, n, 1);
    if (++r->depth > MAX_RUN_DEPTH)
        jfail_fatal(r, n, GPT2_ERR_TEMPLATE, "the render nests deeper than %d evaluations (a bound of this interpreter)",
              MAX_RUN_DEPTH);
}

static jv eval(jrun *r, const jnode *n, jscope *s) {
    enter(r, n);
    jv v = eval_inner(r, n, s);
    r->depth--;
    return v;
}

/* ---- statements ---- */
static int exec_body(jrun *r, jnode *const *body, int n, jscope *s);

/* Binds a name, or unpacks v into names (a, b), in s. */
static void bind(jrun *r, const jnode *target, jv v, jscope *s) {
    if (target->kind == N_NAME) {
        scope_set(r, s, target->name, v);
        return;
    }
    if (v.t != JV_STR && v.t != JV_LIST && v.t != JV_DICT && v.t != JV_UNDEF)
        jfail(r, target, GPT2_ERR_TEMPLATE, "cannot unpack non-iterable %s object", jv_typename(v));
    size_t k;
    jv *items = jv_items(r, target, v, &k);
    if (k < (size_t)target->n_kids)
        jfail(r, target, GPT2_ERR_TEMPLATE, "not enough values to unpack (expected %d, got %zu)", target->n_kids, k);
    if (k > (size_t)target->n_kids)
        jfail(r, target, GPT2_ERR_TEMPLATE, "too many values to unpack (expected %d)", target->n_kids);
    for (int i = 0; i < target->n_kids; i++) scope_set(r, s, target->kids[i]->name, items[i]);
}

static void assign(jrun *r, const jnode *target, jv v, jscope *s) {
    if (target->kind != N_GETATTR) {
        bind(r, target, v, s);
        return;
    }
    jv ns = resolve(r, s, target->a->name);
    if (ns.t != JV_NS) jfail(r, target, GPT2_ERR_TEMPLATE, "cannot assign attribute on non-namespace object");
    jv_dict_set(r, target, ns.d, jv_cstr(target->name), v);
}

/* The text n's body renders to, in a frame of its own under s. */
static jv capture(jrun *r, const jnode *n, jscope *s) {
    size_t mark = r->out.n;
    jscope *bs = scope_new(r, s);
    declare_missing(r, bs, n->miss, n->n_miss);
    exec_body(r, n->kids, n->n_kids, bs);
    size_t len = r->out.n - mark;
    char *p = jalloc(r, len ? len : 1);
    if (len) memcpy(p, r->out.p + mark, len);
    r->out.n = mark;
    return jv_str(p, len);
}

static int exec_for(jrun *r, const jnode *n, jscope *s) {
    size_t k;
    jv *items = jv_items(r, n->a, eval(r, n->a, s), &k);
    jscope *ls = scope_new(r, s);
    if (n->c) { /* the loop's if: the items it keeps, before the loop counts them */
        jv *kept = jalloc(r, (k ? k : 1) * sizeof(jv));
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            jcharge(r, n, 1);
            ls->n = 0;
            bind(r, n->b, items[i], ls);
            if (jv_truthy(eval(r, n->c, ls))) kept[m++] = items[i];
        }
        items = kept;
        k = m;
    }
    jloop *lp = jalloc(r, sizeof *lp);
    *lp = (jloop){.n = k, .items = items};
    for (size_t i = 0; i < k; i++) {
        jcharge(r, n, 1);
        ls->n = 0; /* each turn starts afresh: a set inside lasts one turn */
        declare_missing(r, ls, n->miss, n->n_miss);
        bind(r, n->b, items[i], ls);
        lp->i = i;
        scope_set(r, ls, r->t->loop_name, (jv){.t = JV_LOOP, .loop = lp});
        if (exec_body(r, n->kids, n->n_kids, ls) == JC_BREAK) break;
    }
    if (k == 0 && n->n_els) {
        jscope *es = scope_new(r, s);
        declare_missing(r, es, n->miss_els, n->n_miss_els);
        exec_body(r, n->els, n->n_els, es);
    }
    return JC_NONE;
}

static void emit_value(jrun *r, const jnode *at, jv v) {
    if (v.t == JV_STR) jsb_put(r, &r->out, v.s.p, v.s.n);
    else jv_str_to(r, at, &r->out, v);
}

/* The text through a filter chain (N_FILTER nodes ending in a NULL input). */
static jv through_filters(jrun *r, const jnode *chain, jv text, jscope *s) {
    if (!chain) return text;
    const jv *saved = r->block_text;
    r->block_text = &text;
    jv v = eval(r, chain, s);
    r->block_text = saved;
    return v;
}

static int exec_stmt(jrun *r, const jnode *n, jscope *s) {
    switch (n->kind) {
    case N_TEXT: jsb_put(r, &r->out, n->val.s.p, n->val.s.n); return JC_NONE;
    case N_PRINT: emit_value(r, n, eval(r, n->a, s)); return JC_NONE;
    case N_IF:
        for (;;) {
            if (jv_truthy(eval(r, n->a, s))) return exec_body(r, n->kids, n->n_kids, s);
            if (n->n_els == 1 && n->els[0]->kind == N_IF && n->els[0]->op == 1) n = n->els[0]; /* elif */
            else return exec_body(r, n->els, n->n_els, s);
        }
    case N_FOR: return exec_for(r, n, s);
    case N_SET: assign(r, n->b, eval(r, n->a, s), s); return JC_NONE;
    case N_SETBLOCK: {
        jv text = capture(r, n, s);
        assign(r, n->b, through_filters(r, n->a, text, s), s);
        return JC_NONE;
    }
    case N_MACRO: {
        jmacro *m = jalloc(r, sizeof *m);
        *m = (jmacro){.def = n, .closure = s};
        scope_set(r, s, n->name, (jv){.t = JV_MACRO, .m = m});
        return JC_NONE;
    }
    case N_WITH: {
        jscope *ws = scope_new(r, s);
        declare_missing(r, ws, n->miss, n->n_miss);
        for (int i = 0; i < n->n_kw; i++) scope_set(r, ws, n->kwname[i], eval(r, n->kwval[i], s));
        return exec_body(r, n->kids, n->n_kids, ws);
    }
    case N_FILTERBLOCK: {
        jv text = capture(r, n, s);
        emit_value(r, n, through_filters(r, n->a, text, s));
        return JC_NONE;
    }
    case N_SCOPE: {
        jscope *cs = scope_new(r, s);
        declare_missing(r, cs, n->miss, n->n_miss);
        return exec_body(r, n->kids, n->n_kids, cs);
    }
    case N_BREAK: return JC_BREAK;
    case N_CONTINUE: return JC_CONTINUE;
    default: jfail(r, n, GPT2_ERR_TEMPLATE, "internal error: node %d is not a statement", n->kind);
    }
}

static int exec_body(jrun *r, jnode *const *body, int n, jscope *s) {
    for (int i = 0; i < n; i++) {
        enter(r, body[i]);
        int c = exec_stmt(r, body[i], s);
        r->depth--;
        if (c != JC_NONE) return c;
    }
    return JC_NONE;
}

/* ---- calls ---- */
static jv call_macro(jrun *r, const jnode *at, const jmacro *m, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    const jnode *d = m->def;
    if (n > d->n_kw) jfail(r, at, GPT2_ERR_TEMPLATE, "macro '%s' takes not more than %d argument(s)", d->name, d->n_kw);
    if (++r->calls > r->opts.max_calls)
        jfail_fatal(r, at, GPT2_ERR_TEMPLATE, "macro calls nest deeper than %d (a bound of this interpreter)", r->opts.max_calls);
    jscope *ms = scope_new(r, m->closure);
    declare_missing(r, ms, d->miss, d->n_miss);
    const jv **given = jalloc(r, (size_t)(d->n_kw + 1) * sizeof *given);
    for (int i = 0; i < d->n_kw; i++) given[i] = i < n ? &args[i] : NULL;
    for (int k = 0; k < nkw; k++) {
        int j = n;
        while (j < d->n_kw && strcmp(d->kwname[j], kwn[k]) != 0) j++;
        if (j == d->n_kw || given[j]) jfail(r, at, GPT2_ERR_TEMPLATE, "macro '%s' takes no keyword argument '%s'", d->name, kwn[k]);
        given[j] = &kwv[k];
    }
    for (int i = 0; i < d->n_kw; i++) { /* defaults in order, in the macro's scope: one may read an earlier one */
        jv v;
        if (given[i]) v = *given[i];
        else if (d->kwval[i]) v = eval(r, d->kwval[i], ms);
        else {
            char hint[128];
            snprintf(hint, sizeof hint, "parameter '%s' was not provided", d->kwname[i]);
            char *h = jalloc(r, strlen(hint) + 1);
            strcpy(h, hint);
            v = jv_undef_msg(r, h);
        }
        scope_set(r, ms, d->kwname[i], v);
    }
    size_t mark = r->out.n;
    exec_body(r, d->kids, d->n_kids, ms);
    size_t len = r->out.n - mark;
    char *p = jalloc(r, len ? len : 1);
    if (len) memcpy(p, r->out.p + mark, len);
    r->out.n = mark;
    r->calls--;
    return jv_str(p, len);
}

jv je_call(jrun *r, const jnode *at, jv callee, jv *args, int n, const char **kwn, jv *kwv, int nkw) {
    switch (callee.t) {
    case JV_MACRO: return call_macro(r, at, callee.m, args, n, kwn, kwv, nkw);
    case JV_FUNC: return jb_call_func(r, at, callee.fn, args, n, kwn, kwv, nkw);
    case JV_UNDEF: jundef_fail(r, at, callee);
    default: jfail(r, at, GPT2_ERR_TEMPLATE, "'%s' object is not callable", jv_typename(callee));
    }
}

/* ---- entry points ---- */
jinja_opts jinja_default_opts(void) {
    return (jinja_opts){.now = NULL,
                        .max_output = JINJA_MAX_OUTPUT,
                        .max_memory = JINJA_MAX_MEMORY,
                        .max_steps = JINJA_MAX_STEPS,
                        .max_calls = JINJA_MAX_CALLS};
}

gpt2_status jinja_render(const jinja_template *t, const cJSON *vars, const jinja_opts *opts, char **out, size_t *len,
                         gpt2_error *err) {
    *out = NULL;
    if (len) *len = 0;
    if (!t) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "jinja_render: no template");
    if (vars && !cJSON_IsObject(vars))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: the variables must be a JSON object", t->name);
    jrun *r = calloc(1, sizeof *r);
    if (!r) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", t->name);
    r->t = t;
    r->err = err;
    r->opts = opts ? *opts : jinja_default_opts();
    r->arena.limit = r->opts.max_memory;
    r->out.heap = 1;
    jlocale_enter(&r->loc);
    if (setjmp(r->jmp)) {
        gpt2_status st = r->status;
        jlocale_leave(&r->loc);
        free(r->out.p);
        jarena_free(&r->arena);
        free(r);
        return st;
    }
    r->vars = vars ? jv_from_json(r, vars, 0).d : jv_dict(r, 0).d;
    jscope *root = scope_new(r, NULL);
    declare_missing(r, root, t->miss, t->n_miss);
    exec_body(r, t->body, t->n_body, root);
    jsb_put(r, &r->out, "", 1); /* the NUL after the text */
    *out = r->out.p;
    if (len) *len = r->out.n - 1;
    jlocale_leave(&r->loc);
    jarena_free(&r->arena);
    free(r);
    return GPT2_OK;
}

gpt2_status jinja_render_chat(const jinja_template *t, const char *const *roles, const char *const *contents, int n,
                              int add_generation_prompt, const char *bos, const char *eos, const jinja_opts *opts,
                              char **out, size_t *len, gpt2_error *err) {
    *out = NULL;
    if (len) *len = 0;
    if (n < 0 || (n > 0 && (!roles || !contents)))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "jinja_render_chat: %d messages without their roles or contents", n);
    cJSON *vars = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(vars, "messages");
    int ok = vars && msgs;
    for (int i = 0; ok && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        ok = m && cJSON_AddStringToObject(m, "role", roles[i] ? roles[i] : "") &&
             cJSON_AddStringToObject(m, "content", contents[i] ? contents[i] : "");
        if (m) cJSON_AddItemToArray(msgs, m);
    }
    ok = ok && cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt != 0) &&
         cJSON_AddNullToObject(vars, "tools") && cJSON_AddNullToObject(vars, "documents") &&
         (!bos || cJSON_AddStringToObject(vars, "bos_token", bos)) &&
         (!eos || cJSON_AddStringToObject(vars, "eos_token", eos));
    gpt2_status st = ok ? jinja_render(t, vars, opts, out, len, err)
                        : gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory for the conversation", t ? t->name : "template");
    cJSON_Delete(vars);
    return st;
}
