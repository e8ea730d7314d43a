/* pickle.c — the restricted pickle machine (pickle.h): data opcodes of protocols
 * 2-5, a handful of globals, nothing ever called. Opcode meanings from CPython's
 * Lib/pickletools.py documentation. */
#include "pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "textio.h"

struct pk_block {
    pk_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

enum { PK_BLOCK_BYTES = 64 << 10 };

typedef struct {
    const char *path, *what;
    const unsigned char *p;
    size_t n, pos, op_at;      /* op_at: the current opcode's byte, for messages */
    pk_doc *doc;
    pk_value **stack;
    size_t sp, stack_cap;
    size_t marks[PK_MAX_DEPTH];
    int n_marks;
    pk_value **memo;
    size_t memo_cap, memo_len; /* memo_len: indices stored (MEMOIZE's next index) */
    gpt2_error *err;
} pk_vm;

static pk_value v_none = {.kind = PK_NONE}, v_true = {.kind = PK_BOOL, .u.i = 1}, v_false = {.kind = PK_BOOL};

static gpt2_status bad(pk_vm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gpt2_status bad(pk_vm *m, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gpt2_fail(m->err, GPT2_ERR_FORMAT, "%s: %s byte %zu: %s", m->path, m->what, m->op_at, msg);
}

/* --- memory: one list of blocks per document ------------------------------- */

static void *pk_alloc(pk_vm *m, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    pk_block *b = m->doc->blocks;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = bytes > PK_BLOCK_BYTES ? bytes : PK_BLOCK_BYTES;
        if (!(b = malloc(sizeof *b + cap))) return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = m->doc->blocks;
        m->doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += bytes;
    return p;
}

static pk_value *new_value(pk_vm *m, pk_kind kind) {
    if (m->doc->n_values >= PK_MAX_VALUES) return NULL;
    pk_value *v = pk_alloc(m, sizeof *v);
    if (v) {
        memset(v, 0, sizeof *v);
        v->kind = kind;
        m->doc->n_values++;
    }
    return v;
}

static gpt2_status nomem(pk_vm *m) {
    if (m->doc->n_values >= PK_MAX_VALUES) return bad(m, "more than %d values: too big for a weights file", PK_MAX_VALUES);
    return gpt2_fail(m->err, GPT2_ERR_NOMEM, "%s: %s: out of memory", m->path, m->what);
}

/* --- the stack -------------------------------------------------------------- */

static gpt2_status push(pk_vm *m, pk_value *v) {
    if (!v) return nomem(m);
    if (m->sp == m->stack_cap) {
        size_t cap = m->stack_cap ? 2 * m->stack_cap : 64;
        pk_value **s = cap <= PK_MAX_VALUES ? realloc(m->stack, cap * sizeof *s) : NULL;
        if (!s) return nomem(m);
        m->stack = s;
        m->stack_cap = cap;
    }
    m->stack[m->sp++] = v;
    return GPT2_OK;
}

/* The bottom of the current frame: the last mark, or the stack's bottom. */
static size_t frame_base(const pk_vm *m) { return m->n_marks ? m->marks[m->n_marks - 1] : 0; }

static gpt2_status pop(pk_vm *m, pk_value **out) {
    if (m->sp <= frame_base(m)) return bad(m, "the stack is empty where a value was expected");
    *out = m->stack[--m->sp];
    return GPT2_OK;
}

static gpt2_status pop_mark(pk_vm *m, size_t *base) {
    if (!m->n_marks) return bad(m, "no MARK for this opcode to close");
    *base = m->marks[--m->n_marks];
    return GPT2_OK;
}

/* --- reading the opcode's arguments ------------------------------------------ */

static gpt2_status take(pk_vm *m, size_t k, const unsigned char **out) {
    if (m->n - m->pos < k) return bad(m, "the pickle ends inside an opcode's %zu-byte argument (truncated?)", k);
    *out = m->p + m->pos;
    m->pos += k;
    return GPT2_OK;
}

static uint64_t le(const unsigned char *b, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* --- containers ------------------------------------------------------------- */

static gpt2_status seq_add(pk_vm *m, pk_value *c, pk_value *x) {
    if (x == c) return bad(m, "a %s that holds itself", c->kind == PK_DICT ? "dict" : "list");
    if (x->depth + 1 > c->depth) c->depth = x->depth + 1;
    if (c->depth > PK_MAX_DEPTH) return bad(m, "containers nested deeper than %d levels", PK_MAX_DEPTH);
    if (c->u.seq.n == c->u.seq.cap) {
        size_t cap = c->u.seq.cap ? 2 * c->u.seq.cap : 4;
        pk_value **v = pk_alloc(m, cap * sizeof *v);
        if (!v) return nomem(m);
        if (c->u.seq.n) memcpy(v, c->u.seq.v, c->u.seq.n * sizeof *v);
        c->u.seq.v = v;
        c->u.seq.cap = cap;
    }
    c->u.seq.v[c->u.seq.n++] = x;
    return GPT2_OK;
}

/* A tuple, list or dict of the stack's values from base up (popped). */
static gpt2_status collect(pk_vm *m, size_t base, pk_kind kind) {
    pk_value *c = new_value(m, kind);
    if (!c) return nomem(m);
    if (kind == PK_DICT && (m->sp - base) % 2)
        return bad(m, "a dict of an odd number of keys and values (%zu)", m->sp - base);
    gpt2_status st = GPT2_OK;
    for (size_t i = base; i < m->sp && !st; i++) st = seq_add(m, c, m->stack[i]);
    m->sp = base;
    return st ? st : push(m, c);
}

/* APPEND(S) and SETITEM(S): the values from base up go into the container under them. */
static gpt2_status add_into(pk_vm *m, size_t base, pk_kind want) {
    if (base <= frame_base(m)) return bad(m, "%s with nothing to add to", want == PK_DICT ? "SETITEM(S)" : "APPEND(S)");
    pk_value *c = m->stack[base - 1];
    if (c->kind != want)
        return bad(m, "%s into a value that is not a %s", want == PK_DICT ? "SETITEM(S)" : "APPEND(S)",
                   want == PK_DICT ? "dict" : "list");
    if (want == PK_DICT && (m->sp - base) % 2) return bad(m, "SETITEMS with a key and no value");
    gpt2_status st = GPT2_OK;
    for (size_t i = base; i < m->sp && !st; i++) st = seq_add(m, c, m->stack[i]);
    m->sp = base;
    return st;
}

/* --- globals ---------------------------------------------------------------- */

static const struct {
    const char *name, *dtype;
    int size;
} storages[] = {
    {"FloatStorage", "F32", 4}, {"HalfStorage", "F16", 2},  {"BFloat16Storage", "BF16", 2}, {"DoubleStorage", "F64", 8},
    {"LongStorage", "I64", 8},  {"IntStorage", "I32", 4},   {"ShortStorage", "I16", 2},    {"CharStorage", "I8", 1},
    {"ByteStorage", "U8", 1},   {"BoolStorage", "BOOL", 1},
};

static gpt2_status find_global(pk_vm *m, const char *mod, size_t ml, const char *name, size_t nl) {
    pk_value *g = new_value(m, PK_GLOBAL);
    if (!g) return nomem(m);
#define IS(s, l, lit) ((l) == sizeof(lit) - 1 && memcmp((s), (lit), (l)) == 0)
    if (IS(mod, ml, "collections") && IS(name, nl, "OrderedDict")) g->u.g.which = PK_G_ORDERED_DICT;
    else if (IS(mod, ml, "torch._utils") && IS(name, nl, "_rebuild_tensor_v2")) g->u.g.which = PK_G_REBUILD_TENSOR;
    else if (IS(mod, ml, "torch._utils") && IS(name, nl, "_rebuild_parameter")) g->u.g.which = PK_G_REBUILD_PARAMETER;
    else {
        g = IS(mod, ml, "torch") ? g : NULL;
        for (size_t i = 0; g && i < sizeof storages / sizeof *storages; i++)
            if (strlen(storages[i].name) == nl && memcmp(name, storages[i].name, nl) == 0) {
                g->u.g.which = PK_G_STORAGE;
                snprintf(g->u.g.dtype, sizeof g->u.g.dtype, "%s", storages[i].dtype);
                g->u.g.elem_size = storages[i].size;
                return push(m, g);
            }
        char sm[TEXT_SHOW_BUF], sn[TEXT_SHOW_BUF];
        return bad(m, "the pickle names the global '%s.%s', which a weights file does not need: refused "
                      "(gptscope runs no code from a file; it knows collections.OrderedDict, "
                      "torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and torch.*Storage)",
                   text_show(mod, ml, sm), text_show(name, nl, sn));
    }
#undef IS
    return push(m, g);
}

/* GLOBAL: "module\nname\n" */
static gpt2_status op_global(pk_vm *m) {
    const char *line[2];
    size_t len[2];
    for (int i = 0; i < 2; i++) {
        const unsigned char *s = m->p + m->pos, *nl = memchr(s, '\n', m->n - m->pos < 512 ? m->n - m->pos : 512);
        if (!nl) return bad(m, "GLOBAL without a newline-terminated %s name in 512 bytes", i ? "attribute" : "module");
        line[i] = (const char *)s;
        len[i] = (size_t)(nl - s);
        m->pos += len[i] + 1;
    }
    return find_global(m, line[0], len[0], line[1], len[1]);
}

static gpt2_status op_stack_global(pk_vm *m) {
    pk_value *name = NULL, *mod = NULL;
    gpt2_status st = pop(m, &name);
    if (st || (st = pop(m, &mod))) return st;
    if (name->kind != PK_STR || mod->kind != PK_STR) return bad(m, "STACK_GLOBAL of values that are not strings");
    return find_global(m, mod->u.str.s, mod->u.str.n, name->u.str.s, name->u.str.n);
}

/* --- persistent ids and REDUCE ---------------------------------------------- */

static int is_int(const pk_value *v) { return v->kind == PK_INT; }

/* ('storage', TYPE, key, location, numel) -> a storage */
static gpt2_status op_persid(pk_vm *m) {
    pk_value *pid = NULL;
    gpt2_status st = pop(m, &pid);
    if (st) return st;
    pk_value **a = pid->kind == PK_TUPLE ? pid->u.seq.v : NULL;
    if (!a || pid->u.seq.n != 5 || a[0]->kind != PK_STR || strcmp(a[0]->u.str.s, "storage") != 0 ||
        a[1]->kind != PK_GLOBAL || a[1]->u.g.which != PK_G_STORAGE || a[2]->kind != PK_STR || !is_int(a[4]) ||
        a[4]->u.i < 0)
        return bad(m, "a persistent id that is not ('storage', torch.<type>Storage, key, location, numel)");
    const char *key = a[2]->u.str.s;
    if (a[2]->u.str.n == 0 || a[2]->u.str.n > 64 || strspn(key, "0123456789abcdefghijklmnopqrstuvwxyz"
                                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != a[2]->u.str.n) {
        char s[TEXT_SHOW_BUF];
        return bad(m, "storage key '%s' is not 1 to 64 letters, digits or _", text_show(key, a[2]->u.str.n, s));
    }
    pk_value *s = new_value(m, PK_STORAGE);
    if (!s) return nomem(m);
    s->u.g = a[1]->u.g;
    s->u.g.key = key;
    s->u.g.numel = a[4]->u.i;
    return push(m, s);
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static gpt2_status rebuild_tensor(pk_vm *m, const pk_value *args) {
    pk_value **a = args->u.seq.v;
    const size_t n = args->u.seq.n;
    if ((n != 6 && n != 7) || a[0]->kind != PK_STORAGE || !is_int(a[1]) || a[1]->u.i < 0 || a[2]->kind != PK_TUPLE ||
        a[3]->kind != PK_TUPLE || a[2]->u.seq.n != a[3]->u.seq.n || a[4]->kind != PK_BOOL || a[5]->kind != PK_DICT)
        return bad(m, "_rebuild_tensor_v2 with arguments other than (storage, offset, size, stride, requires_grad, "
                      "hooks[, metadata])");
    if (a[2]->u.seq.n > PK_MAX_DIMS) return bad(m, "a tensor of %zu dimensions, at most %d", a[2]->u.seq.n, PK_MAX_DIMS);
    pk_tensor *t = pk_alloc(m, sizeof *t);
    pk_value *v = new_value(m, PK_TENSOR);
    if (!t || !v) return nomem(m);
    t->storage = a[0];
    t->offset = a[1]->u.i;
    t->n_dims = (int)a[2]->u.seq.n;
    for (int d = 0; d < t->n_dims; d++) {
        const pk_value *sz = a[2]->u.seq.v[d], *sd = a[3]->u.seq.v[d];
        if (!is_int(sz) || !is_int(sd) || sz->u.i < 0 || sd->u.i < 0)
            return bad(m, "a tensor whose size or stride %d is not a non-negative integer", d);
        t->shape[d] = sz->u.i;
        t->stride[d] = sd->u.i;
    }
    v->u.t = t;
    return push(m, v);
}

static gpt2_status op_reduce(pk_vm *m) {
    pk_value *args = NULL, *f = NULL;
    gpt2_status st = pop(m, &args);
    if (st || (st = pop(m, &f))) return st;
    if (f->kind != PK_GLOBAL) return bad(m, "REDUCE calls a value that is not one of the known globals");
    if (args->kind != PK_TUPLE) return bad(m, "REDUCE with arguments that are not a tuple");
    switch (f->u.g.which) {
    case PK_G_ORDERED_DICT:
        if (args->u.seq.n) return bad(m, "OrderedDict called with arguments, expected ()");
        return push(m, new_value(m, PK_DICT));
    case PK_G_REBUILD_TENSOR: return rebuild_tensor(m, args);
    case PK_G_REBUILD_PARAMETER:
        if (args->u.seq.n < 1 || args->u.seq.v[0]->kind != PK_TENSOR)
            return bad(m, "_rebuild_parameter without a tensor first");
        return push(m, args->u.seq.v[0]);
    case PK_G_STORAGE: break;
    }
    return bad(m, "a storage type called directly; a storage may only come from a persistent id");
}

/* BUILD: only a dict's (OrderedDict's) state, which is dropped. */
static gpt2_status op_build(pk_vm *m) {
    pk_value *state = NULL;
    gpt2_status st = pop(m, &state);
    if (st) return st;
    if (m->sp <= frame_base(m) || m->stack[m->sp - 1]->kind != PK_DICT)
        return bad(m, "BUILD on a value that is not an OrderedDict");
    return GPT2_OK;
}

/* --- scalars ---------------------------------------------------------------- */

static gpt2_status push_int(pk_vm *m, int64_t i) {
    pk_value *v = new_value(m, PK_INT);
    if (v) v->u.i = i;
    return push(m, v);
}

/* A string or bytes of k bytes at the current position. */
static gpt2_status push_text(pk_vm *m, pk_kind kind, uint64_t k) {
    const unsigned char *s = NULL;
    if (k > m->n) return bad(m, "a string of %llu bytes in a pickle of %zu", (unsigned long long)k, m->n);
    gpt2_status st = take(m, (size_t)k, &s);
    if (st) return st;
    pk_value *v = new_value(m, kind);
    char *copy = v ? pk_alloc(m, (size_t)k + 1) : NULL;
    if (!copy) return nomem(m);
    memcpy(copy, s, (size_t)k);
    copy[k] = '\0';
    v->u.str.s = copy;
    v->u.str.n = (size_t)k;
    return push(m, v);
}

static gpt2_status op_long1(pk_vm *m) {
    const unsigned char *b = NULL;
    gpt2_status st = take(m, 1, &b);
    const int k = st ? 0 : b[0];
    if (st || (st = take(m, (size_t)k, &b))) return st;
    if (k > 8) return bad(m, "an integer of %d bytes, wider than 64 bits", k);
    uint64_t u = k ? le(b, k) : 0;
    if (k && k < 8 && (b[k - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * k); /* sign-extend */
    return push_int(m, (int64_t)u);
}

static gpt2_status op_binfloat(pk_vm *m) {
    const unsigned char *b = NULL;
    gpt2_status st = take(m, 8, &b);
    if (st) return st;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | b[i]; /* big-endian */
    pk_value *v = new_value(m, PK_FLOAT);
    if (v) memcpy(&v->u.f, &u, 8);
    return push(m, v);
}

/* --- the memo --------------------------------------------------------------- */

static gpt2_status memo_put(pk_vm *m, uint64_t idx) {
    if (m->sp <= frame_base(m)) return bad(m, "nothing on the stack to memoize");
    if (idx >= PK_MAX_MEMO) return bad(m, "memo index %llu, at most %d", (unsigned long long)idx, PK_MAX_MEMO - 1);
    if (idx >= m->memo_cap) {
        size_t cap = m->memo_cap ? m->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        pk_value **p = realloc(m->memo, cap * sizeof *p);
        if (!p) return nomem(m);
        memset(p + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *p);
        m->memo = p;
        m->memo_cap = cap;
    }
    m->memo_len += !m->memo[idx];
    m->memo[idx] = m->stack[m->sp - 1];
    return GPT2_OK;
}

static gpt2_status memo_get(pk_vm *m, uint64_t idx) {
    if (idx >= m->memo_cap || !m->memo[idx]) return bad(m, "memo index %llu was never stored", (unsigned long long)idx);
    return push(m, m->memo[idx]);
}

/* --- the machine ------------------------------------------------------------ */

static const char *refused_name(unsigned op) {
    static const struct { unsigned char op; const char *name; } names[] = {
        {'i', "INST"}, {'o', "OBJ"}, {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"}, {0x82, "EXT1"}, {0x83, "EXT2"},
        {0x84, "EXT4"}, {'P', "PERSID (text)"}, {'I', "INT (text)"}, {'L', "LONG (text)"}, {'F', "FLOAT (text)"},
        {'S', "STRING (text)"}, {'V', "UNICODE (text)"}, {'g', "GET (text)"}, {'p', "PUT (text)"}, {'2', "DUP"},
        {0x8b, "LONG4"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x96, "BYTEARRAY8"},
        {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].op == op) return names[i].name;
    return "unknown";
}

/* One opcode. Long by design: the opcode table itself, one short case each. */
static gpt2_status step(pk_vm *m, unsigned op, int *stop) {
    const unsigned char *b = NULL;
    size_t base = 0;
    gpt2_status st;
    switch (op) {
    case 0x80: /* PROTO */
        if ((st = take(m, 1, &b))) return st;
        if (b[0] < 2 || b[0] > 5) return bad(m, "pickle protocol %d, expected 2 to 5", b[0]);
        return GPT2_OK;
    case 0x95: return take(m, 8, &b); /* FRAME: a length hint */
    case '.': *stop = 1; return GPT2_OK;
    case '(':
        if (m->n_marks == PK_MAX_DEPTH) return bad(m, "MARKs nested deeper than %d levels", PK_MAX_DEPTH);
        m->marks[m->n_marks++] = m->sp;
        return GPT2_OK;
    case '0': { pk_value *x = NULL; return pop(m, &x); }
    case '1': return (st = pop_mark(m, &base)) ? st : (m->sp = base, GPT2_OK);
    case 'N': return push(m, &v_none);
    case 0x88: return push(m, &v_true);
    case 0x89: return push(m, &v_false);
    case 'J': return (st = take(m, 4, &b)) ? st : push_int(m, (int32_t)(uint32_t)le(b, 4));
    case 'K': return (st = take(m, 1, &b)) ? st : push_int(m, b[0]);
    case 'M': return (st = take(m, 2, &b)) ? st : push_int(m, (int64_t)le(b, 2));
    case 0x8a: return op_long1(m);
    case 'G': return op_binfloat(m);
    case 'X': case 'T': return (st = take(m, 4, &b)) ? st : push_text(m, PK_STR, le(b, 4));
    case 0x8c: case 'U': return (st = take(m, 1, &b)) ? st : push_text(m, PK_STR, b[0]);
    case 0x8d: return (st = take(m, 8, &b)) ? st : push_text(m, PK_STR, le(b, 8));
    case 'C': return (st = take(m, 1, &b)) ? st : push_text(m, PK_BYTES, b[0]);
    case 'B': return (st = take(m, 4, &b)) ? st : push_text(m, PK_BYTES, le(b, 4));
    case 0x8e: return (st = take(m, 8, &b)) ? st : push_text(m, PK_BYTES, le(b, 8));
    case ')': return push(m, new_value(m, PK_TUPLE));
    case ']': return push(m, new_value(m, PK_LIST));
    case '}': return push(m, new_value(m, PK_DICT));
    case 't': return (st = pop_mark(m, &base)) ? st : collect(m, base, PK_TUPLE);
    case 'l': return (st = pop_mark(m, &base)) ? st : collect(m, base, PK_LIST);
    case 'd': return (st = pop_mark(m, &base)) ? st : collect(m, base, PK_DICT);
    case 0x85: case 0x86: case 0x87: /* TUPLE1..3 */
        if (m->sp - frame_base(m) < op - 0x84u) return bad(m, "TUPLE%u with fewer values on the stack", op - 0x84u);
        return collect(m, m->sp - (op - 0x84u), PK_TUPLE);
    case 'a': return m->sp - frame_base(m) < 2 ? bad(m, "APPEND with nothing to append to") : add_into(m, m->sp - 1, PK_LIST);
    case 's': return m->sp - frame_base(m) < 3 ? bad(m, "SETITEM without a dict, key and value") : add_into(m, m->sp - 2, PK_DICT);
    case 'e': return (st = pop_mark(m, &base)) ? st : add_into(m, base, PK_LIST);
    case 'u': return (st = pop_mark(m, &base)) ? st : add_into(m, base, PK_DICT);
    case 'q': return (st = take(m, 1, &b)) ? st : memo_put(m, b[0]);
    case 'r': return (st = take(m, 4, &b)) ? st : memo_put(m, le(b, 4));
    case 0x94: return memo_put(m, m->memo_len); /* MEMOIZE: the next index */
    case 'h': return (st = take(m, 1, &b)) ? st : memo_get(m, b[0]);
    case 'j': return (st = take(m, 4, &b)) ? st : memo_get(m, le(b, 4));
    case 'c': return op_global(m);
    case 0x93: return op_stack_global(m);
    case 'R': return op_reduce(m);
    case 'b': return op_build(m);
    case 'Q': return op_persid(m);
    }
    return bad(m, "opcode 0x%02x (%s) is not allowed in a weights file: refused", op, refused_name(op));
}

gpt2_status pickle_load(const char *path, const char *what, const void *data, size_t n, pk_doc *doc,
                        gpt2_error *err) {
    memset(doc, 0, sizeof *doc);
    pk_vm m = {.path = path, .what = what, .p = data, .n = n, .doc = doc, .err = err};
    gpt2_status st = GPT2_OK;
    int stop = 0;
    while (!st && !stop) {
        m.op_at = m.pos;
        if (m.pos >= m.n) {
            st = bad(&m, "the pickle ends before its STOP opcode (truncated?)");
            break;
        }
        st = step(&m, m.p[m.pos++], &stop);
    }
    if (!st && (m.sp != 1 || m.n_marks)) st = bad(&m, "STOP with %zu values and %d marks on the stack, expected one value", m.sp, m.n_marks);
    if (!st) doc->root = m.stack[0];
    free(m.stack);
    free(m.memo);
    if (st) pickle_free(doc);
    return st;
}

void pickle_free(pk_doc *doc) {
    for (pk_block *b = doc->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    memset(doc, 0, sizeof *doc);
}

const pk_value *pk_dict_get(const pk_value *d, const char *key) {
    if (!d || d->kind != PK_DICT) return NULL;
    const size_t kl = strlen(key);
    for (size_t i = d->u.seq.n; i >= 2; i -= 2) {
        const pk_value *k = d->u.seq.v[i - 2];
        if (k->kind == PK_STR && k->u.str.n == kl && memcmp(k->u.str.s, key, kl) == 0) return d->u.seq.v[i - 1];
    }
    return NULL;
}

const char *pk_str(const pk_value *v) { return v && v->kind == PK_STR ? v->u.str.s : NULL; }
