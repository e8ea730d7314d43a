/* fuzz_llmc.c — the input is an llm.c file: a model (.bin), then a tokenizer.
 *
 *   [0] the input as gpt2.bin beside the tiny fixture's gpt2_tokenizer.bin;
 *   [1] the input as gpt2_tokenizer.bin beside the mini llm.c model.
 * gpt2_model_load must fail with one clean line naming the file (or the other
 * one, when the pair disagrees), or give a model that runs (fuzz_model.h);
 * a tokenizer it accepts must decode every id and round-trip text
 * (fuzz_common.h). Seeds: the mini model in F32 and BF16, the tokenizer in
 * versions 1 and 2, formats/bad's hostile llm.c files.
 */
#include "fuzz_model.h"

static char g_path[2][700], g_dir[2][300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char sup[512];
    snprintf(sup, sizeof sup, "%s/formats/fuzz/support", fuzz_fixtures());
    char *root = fuzz_tmpdir("llmc"); /* fuzz_common.h keeps its own copy to remove at exit */
    for (int i = 0; i < 2; i++) {
        snprintf(g_dir[i], sizeof g_dir[i], "%s/%d", root, i);
        if (mkdir(g_dir[i], 0700) != 0) FUZZ_DIE("mkdir %s", g_dir[i]);
        snprintf(g_path[i], sizeof g_path[i], "%s/gpt2.bin", g_dir[i]);
    }
    fuzz_copy(sup, "gpt2_tokenizer.bin", g_dir[0], NULL);
    fuzz_copy(sup, "mini.bin", g_dir[1], "gpt2.bin");
    free(root);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir[0], "gpt2.bin", data, size);
    fuzz_write(g_dir[1], "gpt2_tokenizer.bin", data, size);
    for (int i = 0; i < 2; i++) {
        gpt2_model *m = NULL;
        gpt2_error err;
        gpt2_status st = gpt2_model_load(g_path[i], &m, &err);
        if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "[%d] %s\n", i, st ? err.msg : gpt2_model_source(m));
        if (st != GPT2_OK) {
            fuzz_check_error(st, &err);
            FUZZ_CHECK(m == NULL, "failed load left a model");
            FUZZ_CHECK(strstr(err.msg, "gpt2.bin") || strstr(err.msg, "gpt2_tokenizer.bin"), "error names no file: %s",
                       err.msg);
            continue;
        }
        const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
        for (int32_t id = 0; id < gpt2_tokenizer_n_vocab(tok); id++) {
            size_t n;
            const char *b = gpt2_tokenizer_token_bytes(tok, id, &n);
            FUZZ_CHECK(b && n > 0, "id %d has no bytes", id);
        }
        static const char text[] = "The keeper's log, 3 March:\n\n  it isn't kind.";
        fuzz_roundtrip(tok, text, sizeof text - 1);
        fuzz_run_model(m);
        gpt2_model_free(m);
    }
    return 0;
}
