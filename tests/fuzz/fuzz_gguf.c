/* fuzz_gguf.c — the input is a GGUF file.
 *
 * gguf_open (the library-private parser) is called directly first and, if it
 * accepts the file, every promise of gguf.h is checked: each metadata value and
 * each string of a string array lies inside the file, each tensor has 1 to 4
 * dimensions of at least 1, a type this engine runs with its rows a multiple of
 * the block, prod(ne) / block * block bytes bytes inside the data section, and
 * no two overlap. Then gpt2_model_load must fail with a one-line error naming
 * the file, or give a model whose matrices lie inside the weight arena, which
 * then runs for a few tokens (fuzz_model.h): the kernels of every block format
 * read their blocks under ASan.
 */
#include "fuzz_model.h"
#include "core/gguf.h"
#include "core/quant.h"

static char *g_root, g_path[400];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_root = fuzz_tmpdir("gguf");
    snprintf(g_path, sizeof g_path, "%s/model.gguf", g_root);
    return 0;
}

static void check_parse(void) {
    gguf_file f;
    gpt2_error err;
    gpt2_status st = gguf_open(g_path, &f, &err);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(f.map == NULL && f.tensors == NULL && f.kv == NULL, "failed gguf_open left memory");
        return;
    }
    const uint8_t *lo = f.map, *hi = lo + f.map_size;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < f.n_kv; i++) {
        const gguf_kv *kv = &f.kv[i];
        FUZZ_CHECK((const uint8_t *)kv->key >= lo && (const uint8_t *)kv->key + kv->key_len <= hi, "key %zu outside", i);
        FUZZ_CHECK(kv->val >= lo && kv->val <= hi, "value %zu outside", i);
        FUZZ_CHECK(gguf_find(&f, "x") == NULL || gguf_find(&f, "x")->key_len == 1, "gguf_find");
        if (kv->type == GGUF_ARRAY && kv->elem_type == GGUF_STRING) {
            const uint8_t *p = kv->val;
            for (uint64_t k = 0; k < kv->n; k++) {
                size_t n;
                const char *s = gguf_str_next(&p, &n);
                FUZZ_CHECK((const uint8_t *)s >= lo && p <= hi, "string %llu of entry %zu outside", (unsigned long long)k, i);
                if (n) sink ^= (uint8_t)(s[0] ^ s[n - 1]);
            }
        }
    }
    for (size_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        const quant_format *q = quant_format_of(t->dtype);
        FUZZ_CHECK(q != NULL && t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS, "tensor '%s': type or dims", t->name);
        unsigned __int128 n = 1;
        for (int d = 0; d < t->n_dims; d++) {
            FUZZ_CHECK(t->ne[d] >= 1, "tensor '%s' ne[%d] = 0", t->name, d);
            n *= t->ne[d];
        }
        FUZZ_CHECK(t->ne[0] % (uint64_t)q->block == 0, "tensor '%s': rows not in blocks", t->name);
        FUZZ_CHECK(n / (unsigned)q->block * (unsigned)q->block_bytes == t->n_bytes, "tensor '%s': %zu bytes", t->name,
                   t->n_bytes);
        const uint8_t *p = t->data;
        FUZZ_CHECK(p >= lo && p <= hi && t->n_bytes <= (size_t)(hi - p), "tensor '%s' outside the file", t->name);
        if (t->n_bytes) sink ^= p[0] ^ p[t->n_bytes - 1];
        for (size_t j = 0; j < i; j++) {
            const gguf_tensor *u = &f.tensors[j];
            const uint8_t *r = u->data;
            FUZZ_CHECK(p + t->n_bytes <= r || r + u->n_bytes <= p, "tensors '%s' and '%s' overlap", t->name, u->name);
        }
    }
    (void)sink;
    gguf_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_root, "model.gguf", data, size);
    check_parse();
    gpt2_model *m = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_model_load(g_path, &m, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "loaded");
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(m == NULL, "failed load left a model");
        FUZZ_CHECK(strstr(err.msg, "model.gguf") != NULL, "error does not name the file: %s", err.msg);
        return 0;
    }
    fuzz_run_model(m);
    gpt2_model_free(m);
    return 0;
}
