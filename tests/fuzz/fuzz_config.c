/* fuzz_config.c — the input is config.json.
 *
 * Two directories get the fuzzed config.json: one with the tiny-f32 fixture's
 * model.safetensors (2 layers, C=64, 64 positions), one with the one-layer C=4
 * mini model from gen_seeds.py (8 positions). The tokenizer files are the
 * fixture's. A config that loads is checked and run (fuzz_model.h).
 */
#include "fuzz_model.h"

static char *g_root, g_dirs[2][300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char src[512], mini[512];
    snprintf(src, sizeof src, "%s/models/tiny-f32", fuzz_fixtures());
    const char *md = getenv("FUZZ_MINI_MODEL");
    snprintf(mini, sizeof mini, "%s", md && *md ? md : "build/fuzz/mini");
    g_root = fuzz_tmpdir("cfg");
    const char *names[2] = {"tiny", "mini"};
    const char *from[2] = {src, mini};
    for (int i = 0; i < 2; i++) {
        snprintf(g_dirs[i], sizeof g_dirs[i], "%s/%s", g_root, names[i]);
        if (mkdir(g_dirs[i], 0700) != 0) FUZZ_DIE("mkdir %s", g_dirs[i]);
        fuzz_copy(src, "vocab.json", g_dirs[i], NULL);
        fuzz_copy(src, "merges.txt", g_dirs[i], NULL);
        fuzz_copy(from[i], "model.safetensors", g_dirs[i], NULL);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int i = 0; i < 2; i++) {
        fuzz_write(g_dirs[i], "config.json", data, size);
        gpt2_model *m = NULL;
        gpt2_error err;
        gpt2_status st = gpt2_model_load(g_dirs[i], &m, &err);
        if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "[%d] %s\n", i, st ? err.msg : "loaded");
        if (st != GPT2_OK) {
            fuzz_check_error(st, &err);
            FUZZ_CHECK(m == NULL, "failed load left a model");
            continue;
        }
        fuzz_run_model(m);
        gpt2_model_free(m);
    }
    return 0;
}
