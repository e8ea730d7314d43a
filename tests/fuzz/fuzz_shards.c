/* fuzz_shards.c — the input is model.safetensors.index.json (a sharded set's index).
 *
 * One directory holds tiny-f32's config.json and tokenizer and the shards the
 * index may name: the three of build/fixtures/shards/gpt2-3
 * (model-0000K-of-00003.safetensors), tiny-f32's whole file as
 * "whole.safetensors", and a truncated shard as "bad.safetensors".
 *
 * st_open_index (the library-private reader) is called first on the input
 * parsed by cJSON alone (so a key given twice reaches it) and, if it accepts,
 * every promise of safetensors.h is checked: each tensor lies inside one
 * shard's mapping, the names are sorted and distinct and st_find finds each,
 * the shards are distinct files. Then gpt2_model_load on the directory fails
 * with a one-line message or gives a model that runs (fuzz_model.h); either
 * way nothing leaks (ASan).
 */
#include <cjson/cJSON.h>

#include "fuzz_model.h"
#include "core/safetensors.h"

static char *g_dir;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char tiny[512], shards[512], bad[600], name[64];
    snprintf(tiny, sizeof tiny, "%s/models/tiny-f32", fuzz_fixtures());
    snprintf(shards, sizeof shards, "%s/shards/gpt2-3", fuzz_fixtures());
    snprintf(bad, sizeof bad, "%s/shards/bad/shard_truncated", fuzz_fixtures());
    g_dir = fuzz_tmpdir("shards");
    fuzz_copy(tiny, "config.json", g_dir, NULL);
    fuzz_copy(tiny, "vocab.json", g_dir, NULL);
    fuzz_copy(tiny, "merges.txt", g_dir, NULL);
    for (int k = 1; k <= 3; k++) {
        snprintf(name, sizeof name, "model-%05d-of-00003.safetensors", k);
        fuzz_copy(shards, name, g_dir, NULL);
    }
    fuzz_copy(tiny, "model.safetensors", g_dir, "whole.safetensors");
    fuzz_copy(bad, "model-00002-of-00002.safetensors", g_dir, "bad.safetensors");
    return 0;
}

static void check_index(const uint8_t *data, size_t size) {
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    if (!root) return;
    char path[400];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", g_dir);
    st_file f;
    gpt2_error err;
    gpt2_status st = st_open_index(path, root, &f, &err);
    cJSON_Delete(root);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(f.tensors == NULL && f.shards == NULL && f.path == NULL, "failed st_open_index left memory");
        return;
    }
    FUZZ_CHECK(f.map == NULL && f.n_shards >= 1 && f.n_tensors >= 1, "a set of %d shards, %d tensors", f.n_shards,
               f.n_tensors);
    for (int i = 0; i < f.n_shards; i++)
        for (int j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(f.shards[i].path, f.shards[j].path) != 0, "shard %s opened twice", f.shards[i].path);
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        const uint8_t *p = t->data;
        int in = 0;
        for (int s = 0; s < f.n_shards; s++) {
            const uint8_t *lo = f.shards[s].map, *hi = lo + f.shards[s].map_size;
            in += p >= lo && p <= hi && t->n_bytes <= (size_t)(hi - p);
        }
        FUZZ_CHECK(in == 1, "tensor '%s' lies in %d shards' mappings", t->name, in);
        FUZZ_CHECK(i == 0 || strcmp(f.tensors[i - 1].name, t->name) < 0, "tensors not sorted at '%s'", t->name);
        FUZZ_CHECK(st_find(&f, t->name) == t, "st_find does not find '%s'", t->name);
        volatile uint8_t sink = 0; /* touch the first and last byte */
        if (t->n_bytes) sink ^= p[0] ^ p[t->n_bytes - 1];
        (void)sink;
    }
    st_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir, "model.safetensors.index.json", data, size);
    check_index(data, size);
    gpt2_model *m = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_model_load(g_dir, &m, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "loaded");
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(m == NULL, "failed load left a model");
        return 0;
    }
    fuzz_run_model(m);
    gpt2_model_free(m);
    return 0;
}
