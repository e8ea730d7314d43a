/* jinja_internal.h — what the Jinja interpreter's files share (library-private):
 * jinja.c lexes and parses, jinja_eval.c runs the tree, jinja_value.c holds
 * values (arenas, Python's str/repr/==/<, json.dumps), jinja_builtins.c the
 * filters, tests, methods and global functions.
 *
 * Memory: a template's tree lives in its own arena; a render allocates every
 * value in a render arena freed at its end, so values are never freed one by
 * one and may share bytes (a string from the variables points into the cJSON
 * tree). Errors unwind with longjmp to the render's (or the parse's) entry,
 * which frees the arena: nothing on the way needs cleaning up. */
#ifndef GPT2_CORE_JINJA_INTERNAL_H
#define GPT2_CORE_JINJA_INTERNAL_H

#include <locale.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* Python reads and writes numbers the same in every locale; strtod and
 * printf follow LC_NUMERIC, which an application may have set ("1,5"). A
 * parse and a render run in the C locale, on the calling thread alone. */
typedef struct {
    locale_t c, prev;
} jlocale;
void jlocale_enter(jlocale *l);
void jlocale_leave(jlocale *l);

/* ---- arena ---- */
typedef struct jarena_chunk jarena_chunk;
typedef struct {
    jarena_chunk *head;
    size_t taken, limit; /* bytes taken from malloc; limit 0: none */
    char *last;          /* the latest allocation, last_n bytes asked for: it may grow in place */
    size_t last_n;
} jarena;

void *jarena_alloc(jarena *a, size_t n); /* 16-byte aligned; NULL: out of memory or past the limit */
/* Grows the latest allocation, p of old bytes (exactly as asked for: a
 * shorter view of it does not qualify), to n bytes where it lies, or shrinks
 * it; 0 if it cannot. A string built last can so take a suffix without a copy. */
int jarena_grow(jarena *a, void *p, size_t old, size_t n);
void jarena_free(jarena *a);

/* ---- values ---- */
enum {
    JV_UNDEF, /* Jinja's default Undefined: "" printed, false, empty when iterated */
    JV_NONE,
    JV_BOOL,
    JV_INT, /* Python's int, held in 64 bits (an overflow fails) */
    JV_FLOAT,
    JV_STR,   /* UTF-8 bytes, not NUL-terminated */
    JV_LIST,  /* list, tuple (JV_TUPLE) or a one-pass iterator (JV_ITER: a generator) */
    JV_DICT,  /* insertion-ordered; keys compared with Python's == */
    JV_NS,    /* namespace(): the one mutable value ({% set ns.x = ... %}) */
    JV_MACRO, /* a {% macro %} and the scope it was defined in */
    JV_FUNC,  /* a global function or a bound method */
    JV_LOOP   /* the loop variable of a {% for %} */
};
/* flags of a JV_LIST: a tuple; a one-pass iterator (a generator, or reversed()'s
 * list_reverseiterator); a dict's keys(), values() or items() view */
enum { JV_TUPLE = 1, JV_ITER = 2, JV_REVERSED = 4, JV_KEYS = 8, JV_VALUES = 16, JV_ITEMS = 32 };
enum { JV_VIEW = JV_KEYS | JV_VALUES | JV_ITEMS, JV_NOT_LIST = JV_ITER | JV_VIEW }; /* no indexing, +, * */

typedef struct jv jv;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jundef jundef;
typedef struct jmacro jmacro;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

struct jv {
    uint8_t t, flags;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jlist *l;
        jdict *d; /* JV_DICT and JV_NS */
        jundef *u; /* NULL: no message ("" undefined) */
        jmacro *m;
        jfunc *fn;
        jloop *loop;
    };
};

struct jlist {
    size_t n;
    jv *v;
    const char *lazy; /* a generator whose making failed: Jinja2 raises this when it is iterated */
};
struct jdict {
    size_t n, cap;
    jv *k, *v;
};
/* Why a value is undefined, for the error when it is used (Jinja's
 * _undefined_message): hint, else "'NAME' is undefined" (obj NULL), else
 * "'OBJ object' has no attribute 'NAME'" / "OBJ object has no element NAME". */
struct jundef {
    const char *hint;
    const char *obj; /* a Python type name ("dict", "str") */
    jv name;
};

typedef struct jnode jnode;
typedef struct jscope jscope;

struct jmacro {
    const jnode *def; /* N_MACRO */
    jscope *closure;
};
struct jfunc {
    int id;           /* JF_* (jinja_builtins.c) */
    const char *name; /* for messages */
    jv self;
};
struct jloop {
    size_t i, n; /* index0, length */
    const jv *items;
};

/* ---- the syntax tree ---- */
enum {
    /* expressions */
    N_CONST,    /* val */
    N_NAME,     /* name */
    N_LIST,     /* kids */
    N_TUPLE,    /* kids */
    N_DICT,     /* kids: key, value, key, value... */
    N_GETATTR,  /* a.name */
    N_GETITEM,  /* a[b] */
    N_SLICE,    /* start a : stop b : step c (each may be NULL): only as the key of an N_GETITEM */
    N_CALL,     /* a(kids, kw) */
    N_FILTER,   /* a|name(kids, kw); a NULL: the block's text ({% filter %}, {% set x | f %}) */
    N_TEST,     /* a is name(kids, kw) */
    N_NOT,      /* not a */
    N_NEG,      /* -a */
    N_POS,      /* +a */
    N_BINOP,    /* a op b: op one of + - * / // % ** */
    N_CONCAT,   /* kids joined by ~ */
    N_AND,      /* a and b */
    N_OR,       /* a or b */
    N_COMPARE,  /* a op[0] kids[0] op[1] kids[1] ... (ops in cmp) */
    N_CONDEXPR, /* b if a else c (c NULL: undefined) */
    /* statements */
    N_TEXT,     /* val: template text */
    N_PRINT,    /* {{ a }} */
    N_IF,       /* a: test, kids: body, els: else (an elif is an N_IF alone in els) */
    N_FOR,      /* for b in a [if c]: kids, else els */
    N_SET,      /* b = a (b: N_NAME, N_GETATTR of a name (ns.x), N_TUPLE of names) */
    N_SETBLOCK, /* b = text of kids, through filter chain a (NULL: none) */
    N_MACRO,    /* name(params: kw names, defaults: kw values (NULL: required)) kids */
    N_WITH,     /* kw names = kw values; kids */
    N_FILTERBLOCK, /* a (a chain of N_FILTER on NULL) over kids */
    N_SCOPE,    /* kids in a scope of their own ({% generation %}) */
    N_BREAK,
    N_CONTINUE
};
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW };
enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

struct jnode {
    uint8_t kind, op;
    int16_t depth; /* of the subtree, bounded by JINJA_MAX_NESTING */
    int line, col;
    int fid; /* N_FILTER / N_TEST: the builtin, or -1 (unknown: fails when reached) */
    const char *name; /* interned, NUL-terminated */
    jv val;
    jnode *a, *b, *c;
    jnode **kids, **els;
    int n_kids, n_els;
    const char **kwname; /* N_CALL/FILTER/TEST: keyword arguments; N_MACRO: parameters; N_WITH: targets */
    jnode **kwval;
    int n_kw;
    uint8_t *cmp; /* N_COMPARE: n_kids operators */
    /* A frame's names that start out missing (undefined, not looked up
     * outside): for N_FOR its body's (miss) and its else's (miss_els); for
     * N_MACRO, N_WITH, N_SETBLOCK, N_FILTERBLOCK, N_SCOPE their body's. */
    const char **miss, **miss_els;
    int n_miss, n_miss_els;
};

struct jinja_template {
    jarena arena;
    char *name;
    const char *loop_name; /* "loop", interned */
    jnode **body;
    int n_body;
    const char **miss; /* the root frame's missing names (see jnode) */
    int n_miss;
};

/* ---- a render ---- */
struct jscope {
    jscope *parent;
    int n, cap;
    const char **names; /* interned: compared by address */
    jv *vals;
};

typedef struct {
    char *p;
    size_t n, cap;
    int heap; /* the output: malloc'd, bounded by max_output; else in the arena */
} jsb;

typedef struct {
    jmp_buf jmp;
    gpt2_status status;
    gpt2_error *err;
    const jinja_template *t;
    jinja_opts opts;
    jarena arena;
    jsb out;
    long steps;
    int calls, depth;
    jdict *vars;             /* the caller's variables */
    jlocale loc;
    const jv *block_text;    /* the input of a filter chain on NULL */
    int fatal;               /* the failure is a bound or out of memory: nothing may catch it */
    char msg[GPT2_ERROR_MSG_MAX]; /* the latest failure's message (also in *err) */
} jrun;

/* Fails the render: longjmps to jinja_render with code and "NAME:LINE:COL: message". */
_Noreturn void jfail(jrun *r, const jnode *at, gpt2_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* As jfail, for the bounds of a render and out of memory, which a generator
 * filter's deferred error (jb_filter) must not catch. */
_Noreturn void jfail_fatal(jrun *r, const jnode *at, gpt2_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Fails with a message made earlier (a generator's deferred error). */
_Noreturn void jfail_again(jrun *r, const char *msg);
/* raise_exception(msg): msg alone. */
_Noreturn void jraise(jrun *r, const char *msg, size_t n);

void *jalloc(jrun *r, size_t n);                   /* fails the render when memory runs out */
void jcharge(jrun *r, const jnode *at, size_t n); /* n units of work against max_steps */

/* constructors */
jv jv_undef(void);
jv jv_undef_msg(jrun *r, const char *hint);
jv jv_undef_attr(jrun *r, const char *obj, jv name);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(const char *p, size_t n);
jv jv_cstr(const char *s);
jv jv_list(jrun *r, size_t n, uint8_t flags); /* n items, all undefined */
jv jv_dict(jrun *r, size_t cap);
void jv_dict_set(jrun *r, const jnode *at, jdict *d, jv k, jv v);
const jv *jv_dict_get(jrun *r, const jnode *at, const jdict *d, jv k); /* NULL: absent */
const jv *jv_dict_getn(const jdict *d, const char *key, size_t n);      /* string keys alone */
jv jv_from_json(jrun *r, const cJSON *j, int depth);
/* NULL when k may be a dict key (hash() takes it); else the type that may not. */
const char *jv_unhashable(jv k);

/* Python's semantics */
int jv_truthy(jv v);
const char *jv_typename(jv v); /* type(v).__name__ */
void jv_str_to(jrun *r, const jnode *at, jsb *b, jv v); /* str(v) */
void jv_repr_to(jrun *r, const jnode *at, jsb *b, jv v, int depth);
jv jv_to_str(jrun *r, const jnode *at, jv v); /* str(v) as a value (a string is itself) */
int jv_eq(jrun *r, const jnode *at, jv a, jv b, int depth);
int jv_lt(jrun *r, const jnode *at, jv a, jv b, const char *op, int depth); /* fails as Python's < */
int jv_compare(jrun *r, const jnode *at, jv a, jv b, int cmp);             /* CMP_LT, _LE, _GT, _GE */
int64_t jv_len(jrun *r, const jnode *at, jv v);                             /* fails as len() */
/* iter(v) as an array: the items of a list, a string's characters, a dict's
 * keys, nothing for undefined; fails as Python on what is not iterable. */
jv *jv_items(jrun *r, const jnode *at, jv v, size_t *n);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) onto b. indent:
 * NULL for none; item_sep/key_sep NULL for json's defaults. */
void jv_json_to(jrun *r, const jnode *at, jsb *b, jv v, int ensure_ascii, const char *indent, size_t indent_n,
                const char *item_sep, const char *key_sep, int sort_keys, int depth);
_Noreturn void jundef_fail(jrun *r, const jnode *at, jv u); /* UndefinedError */
const char *jv_repr_c(jrun *r, const jnode *at, jv v); /* repr(v) as a NUL-terminated arena string */

/* string building */
void jsb_put(jrun *r, jsb *b, const char *s, size_t n);
void jsb_puts(jrun *r, jsb *b, const char *s);
jv jsb_value(jrun *r, jsb *b); /* the string built (arena builders only) */
void py_float_repr(double f, char buf[32]);

/* UTF-8 as Python sees characters (an invalid byte counts as one) */
size_t u8_next(const char *s, size_t n, size_t i, uint32_t *cp); /* bytes of the character at i */
size_t u8_prev(const char *s, size_t i);                          /* start of the character before i */
int py_isspace(uint32_t cp);
size_t u8_count(const char *s, size_t n);
void u8_put(jrun *r, jsb *b, uint32_t cp);

/* builtins (jinja_builtins.c) */
int jb_filter_id(const char *name, int *supported); /* -1: not a Jinja filter; *supported 0: Jinja's, not run here */
int jb_test_id(const char *name, int *supported);
const char *jb_test_name(int id);
jv jb_filter(jrun *r, const jnode *at, int id, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw);
int jb_test(jrun *r, const jnode *at, int id, jv x, jv *args, int n, const char **kwn, jv *kwv, int nkw);
int jb_global(jrun *r, const char *name, jv *out); /* range, dict, namespace, raise_exception, ... */
/* v.name as Jinja's sandbox sees it: a method (bound), else an item, else undefined. */
jv jb_getattr(jrun *r, const jnode *at, jv v, jv name);
jv jb_getitem(jrun *r, const jnode *at, jv v, jv key);
jv jb_call_func(jrun *r, const jnode *at, const jfunc *f, jv *args, int n, const char **kwn, jv *kwv, int nkw);
jv jb_printf(jrun *r, const jnode *at, jv fmt, jv args); /* fmt % args */

/* the evaluator (jinja_eval.c), for builtins that call back (map, select) */
jv je_call(jrun *r, const jnode *at, jv callee, jv *args, int n, const char **kwn, jv *kwv, int nkw);
jv je_arith(jrun *r, const jnode *at, int op, jv a, jv b); /* Python's a op b (OP_*) */
int je_contains(jrun *r, const jnode *at, jv container, jv item); /* item in container */

#endif
