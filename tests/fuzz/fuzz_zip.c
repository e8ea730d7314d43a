/* fuzz_zip.c — the input is a PyTorch zip checkpoint (ckpt.pt).
 *
 * It lies in a directory with the mini model's config.json (for state dicts in
 * the Hugging Face layout) and the tiny-f32 fixture's vocab.json + merges.txt.
 * First zip_open (library-private) is called on it directly and, if it accepts
 * the file, zip.h's promises are checked: every entry's bytes inside the file,
 * before the central directory, no two entries overlapping, names unique and
 * found by zip_find; every entry's CRC check runs. Then gpt2_model_load must
 * fail with one clean line naming ckpt.pt (or vocab.json, when the
 * checkpoint's vocabulary is too small for the tokenizer), or give a model
 * that runs (fuzz_model.h). Seeds: mini nanoGPT checkpoints (bias, no bias,
 * character-level), a mini pytorch_model.bin, the hostile zips of formats/bad.
 */
#include "fuzz_model.h"
#include "core/textio.h"
#include "core/zip.h"

#include <sys/mman.h>

static char *g_dir, g_path[400];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char sup[512];
    snprintf(sup, sizeof sup, "%s/formats/fuzz/support", fuzz_fixtures());
    g_dir = fuzz_tmpdir("zip");
    fuzz_copy(sup, "config.json", g_dir, NULL);
    fuzz_copy(sup, "vocab.json", g_dir, NULL);
    fuzz_copy(sup, "merges.txt", g_dir, NULL);
    snprintf(g_path, sizeof g_path, "%s/ckpt.pt", g_dir);
    return 0;
}

static void check_zip(void) {
    void *map;
    size_t size;
    gpt2_error err;
    if (text_map_file(g_path, &map, &size, &err) != GPT2_OK) FUZZ_DIE("%s", err.msg);
    zip_archive z;
    gpt2_status st = zip_open(g_path, map, size, &z, &err);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(z.entries == NULL && z.n == 0, "failed zip_open left entries");
    } else {
        const uint8_t *lo = map, *hi = lo + size;
        for (size_t i = 0; i < z.n; i++) {
            const zip_entry *e = &z.entries[i];
            FUZZ_CHECK(e->data >= lo && e->data <= hi && e->size <= (uint64_t)(hi - e->data),
                       "entry '%s' outside the file", e->name);
            FUZZ_CHECK(e->data_at == (uint64_t)(e->data - lo) && e->header_at < e->data_at, "entry '%s' offsets",
                       e->name);
            FUZZ_CHECK(zip_find(&z, e->name) == e, "zip_find does not find '%s'", e->name);
            for (size_t j = 0; j < i; j++) {
                const zip_entry *f = &z.entries[j];
                FUZZ_CHECK(strcmp(e->name, f->name) != 0, "entry '%s' twice", e->name);
                FUZZ_CHECK(e->data_at + e->size <= f->header_at || f->data_at + f->size <= e->header_at,
                           "entries '%s' and '%s' overlap", e->name, f->name);
            }
            if (zip_check_crc(&z, e, &err) != GPT2_OK) fuzz_check_error(err.status, &err);
        }
        zip_close(&z);
    }
    if (map) munmap(map, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir, "ckpt.pt", data, size);
    check_zip();
    gpt2_model *m = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_model_load(g_path, &m, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : gpt2_model_source(m));
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(m == NULL, "failed load left a model");
        FUZZ_CHECK(strstr(err.msg, "ckpt.pt") || strstr(err.msg, "vocab.json"), "error names no file: %s", err.msg);
        return 0;
    }
    fuzz_run_model(m);
    gpt2_model_free(m);
    return 0;
}
