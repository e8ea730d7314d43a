/* fuzz_safetensors.c — the input is model.safetensors.
 *
 * Two model directories share the one file (through symlinks): "tiny" has the
 * config.json of build/fixtures/models/tiny-f32 (2 layers, C=64), "mini" a
 * one-layer C=4 config that the small seeds from gen_seeds.py match. Both get the
 * fixture's vocab.json and merges.txt. gpt2_model_load must either fail with a
 * one-line error or give a model whose matrices lie inside the file, which is then
 * run for a few tokens (fuzz_model.h).
 *
 * Before that, st_open (the library-private parser) is called directly and, if it
 * accepts the file, every promise of safetensors.h is checked: each tensor's bytes
 * lie inside the data section, are prod(shape) * element size long, and no two
 * non-empty tensors overlap.
 */
#include "fuzz_model.h"
#include "core/safetensors.h"

static char *g_root, g_dirs[2][300];

static const char MINI_CONFIG[] =
    "{\"model_type\": \"gpt2\", \"n_layer\": 1, \"n_head\": 2, \"n_embd\": 4, "
    "\"n_positions\": 8, \"vocab_size\": 507, \"layer_norm_epsilon\": 1e-5}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char src[512];
    snprintf(src, sizeof src, "%s/models/tiny-f32", fuzz_fixtures());
    g_root = fuzz_tmpdir("st");
    const char *names[2] = {"tiny", "mini"};
    for (int i = 0; i < 2; i++) {
        snprintf(g_dirs[i], sizeof g_dirs[i], "%s/%s", g_root, names[i]);
        if (mkdir(g_dirs[i], 0700) != 0) FUZZ_DIE("mkdir %s", g_dirs[i]);
        fuzz_copy(src, "vocab.json", g_dirs[i], NULL);
        fuzz_copy(src, "merges.txt", g_dirs[i], NULL);
        char link[700];
        snprintf(link, sizeof link, "%s/model.safetensors", g_dirs[i]);
        if (symlink("../model.safetensors", link) != 0) FUZZ_DIE("symlink %s", link);
    }
    fuzz_copy(src, "config.json", g_dirs[0], NULL);
    fuzz_write(g_dirs[1], "config.json", (const uint8_t *)MINI_CONFIG, sizeof MINI_CONFIG - 1);
    return 0;
}

static void check_st(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/model.safetensors", g_root);
    st_file f;
    gpt2_error err;
    gpt2_status st = st_open(path, &f, &err);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(f.map == NULL && f.tensors == NULL, "failed st_open left memory");
        return;
    }
    const uint8_t *map = f.map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | map[i];
    const uint8_t *lo = map + 8 + hlen, *hi = map + f.map_size;
    FUZZ_CHECK(hlen <= f.map_size - 8, "header length %llu past the end", (unsigned long long)hlen);
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        const uint8_t *p = t->data;
        FUZZ_CHECK(p >= lo && p <= hi && t->n_bytes <= (size_t)(hi - p), "tensor '%s' outside the data", t->name);
        FUZZ_CHECK(t->n_dims >= 0 && t->n_dims <= ST_MAX_DIMS, "tensor '%s' has %d dims", t->name, t->n_dims);
        unsigned __int128 n = (unsigned)t->elem_size;
        for (int d = 0; d < t->n_dims; d++) {
            FUZZ_CHECK(t->shape[d] >= 0, "tensor '%s' shape[%d] < 0", t->name, d);
            n *= (uint64_t)t->shape[d];
        }
        FUZZ_CHECK(n == t->n_bytes, "tensor '%s': %zu bytes for its shape", t->name, t->n_bytes);
        volatile uint8_t sink = 0; /* touch the first and last byte */
        if (t->n_bytes) sink ^= p[0] ^ p[t->n_bytes - 1];
        (void)sink;
        FUZZ_CHECK(st_find(&f, t->name) == t, "st_find does not find '%s'", t->name);
        for (int j = 0; j < i; j++) { /* quadratic, but headers here are small */
            const st_tensor *u = &f.tensors[j];
            const uint8_t *q = u->data;
            FUZZ_CHECK(!t->n_bytes || !u->n_bytes || p + t->n_bytes <= q || q + u->n_bytes <= p,
                       "tensors '%s' [%td, +%zu) and '%s' [%td, +%zu) overlap", t->name, p - lo, t->n_bytes,
                       u->name, q - lo, u->n_bytes);
        }
    }
    st_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_root, "model.safetensors", data, size);
    check_st();
    for (int i = 0; i < 2; i++) {
        gpt2_model *m = NULL;
        gpt2_error err;
        gpt2_status st = gpt2_model_load(g_dirs[i], &m, &err);
        if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "[%d] %s\n", i, st ? err.msg : "loaded");
        if (st != GPT2_OK) {
            fuzz_check_error(st, &err);
            FUZZ_CHECK(m == NULL, "failed load left a model");
            FUZZ_CHECK(strstr(err.msg, "model.safetensors") != NULL,
                       "error does not name the file: %s", err.msg);
            continue;
        }
        fuzz_run_model(m);
        gpt2_model_free(m);
    }
    return 0;
}
