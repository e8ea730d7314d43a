/* fuzz_pickle.c — the input is a pickle: a checkpoint's data.pkl, or a meta.pkl.
 *
 * pickle_load (library-private) runs it first: it must fail with one clean line,
 * or give a document whose containers nest at most PK_MAX_DEPTH deep and whose
 * tensors have at most PK_MAX_DIMS non-negative dimensions (walked here, each
 * container once). Then two loads:
 *   [0] the input as ARCHIVE/data.pkl of a zip that also holds the storages of
 *       the mini nanoGPT checkpoint (so a mutated pickle still finds real
 *       tensors), beside config.json and the BPE files;
 *   [1] the input as meta.pkl beside the mini character-level checkpoint.
 * Each must fail cleanly, naming ckpt.pt, meta.pkl or vocab.json, or give a
 * model that runs (fuzz_model.h). Seeds: the mini checkpoints' and a state
 * dict's pickles, meta.pkl in protocols 2 and 4, formats/bad's hostile pickles.
 */
#include "fuzz_model.h"
#include "core/pickle.h"
#include "core/textio.h"
#include "core/zip.h"

#include <sys/mman.h>

static char *g_root, g_ckpt[2][600];
static uint8_t *g_zip;      /* the mini checkpoint: its storage entries are copied */
static size_t g_zip_n;
static zip_archive g_z;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char sup[512], path[600];
    snprintf(sup, sizeof sup, "%s/formats/fuzz/support", fuzz_fixtures());
    g_root = fuzz_tmpdir("pkl");
    const char *dirs[2] = {"bpe", "char"};
    for (int i = 0; i < 2; i++) {
        char d[300];
        snprintf(d, sizeof d, "%s/%s", g_root, dirs[i]);
        if (mkdir(d, 0700) != 0) FUZZ_DIE("mkdir %s", d);
        snprintf(g_ckpt[i], sizeof g_ckpt[i], "%s/ckpt.pt", d);
        if (i == 0) {
            fuzz_copy(sup, "config.json", d, NULL);
            fuzz_copy(sup, "vocab.json", d, NULL);
            fuzz_copy(sup, "merges.txt", d, NULL);
        } else {
            fuzz_copy(sup, "mini-char.pt", d, "ckpt.pt");
        }
    }
    snprintf(path, sizeof path, "%s/mini-ckpt.pt", sup);
    g_zip = fuzz_read(path, &g_zip_n);
    gpt2_error err;
    if (zip_open(path, g_zip, g_zip_n, &g_z, &err) != GPT2_OK) FUZZ_DIE("%s", err.msg);
    return 0;
}

static uint32_t crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

static void put16(FILE *f, unsigned v) { fputc((int)(v & 0xFF), f), fputc((int)(v >> 8), f); }
static void put32(FILE *f, uint32_t v) { put16(f, v & 0xFFFF), put16(f, v >> 16); }

/* A zip of stored entries: archive/data.pkl = the input, then the mini checkpoint's storages. */
static void write_zip(const uint8_t *pkl, size_t n) {
    FILE *f = fopen(g_ckpt[0], "wb");
    if (!f) FUZZ_DIE("cannot write %s", g_ckpt[0]);
    const char *names[64];
    const uint8_t *datas[64];
    size_t sizes[64], k = 0;
    long at[64];
    names[k] = "archive/data.pkl", datas[k] = pkl, sizes[k++] = n;
    for (size_t i = 0; i < g_z.n && k < 64; i++)
        if (strstr(g_z.entries[i].name, "/data/"))
            names[k] = g_z.entries[i].name, datas[k] = g_z.entries[i].data, sizes[k++] = (size_t)g_z.entries[i].size;
    for (size_t i = 0; i < k; i++) {
        at[i] = ftell(f);
        put32(f, 0x04034b50), put16(f, 20), put16(f, 0), put16(f, 0), put16(f, 0), put16(f, 0x21);
        put32(f, crc32(datas[i], sizes[i])), put32(f, (uint32_t)sizes[i]), put32(f, (uint32_t)sizes[i]);
        put16(f, (unsigned)strlen(names[i])), put16(f, 0);
        fputs(names[i], f);
        fwrite(datas[i], 1, sizes[i], f);
    }
    long cd = ftell(f);
    for (size_t i = 0; i < k; i++) {
        put32(f, 0x02014b50), put16(f, 20), put16(f, 20), put16(f, 0), put16(f, 0), put16(f, 0), put16(f, 0x21);
        put32(f, crc32(datas[i], sizes[i])), put32(f, (uint32_t)sizes[i]), put32(f, (uint32_t)sizes[i]);
        put16(f, (unsigned)strlen(names[i])), put16(f, 0), put16(f, 0), put16(f, 0), put16(f, 0), put32(f, 0);
        put32(f, (uint32_t)at[i]);
        fputs(names[i], f);
    }
    long end = ftell(f);
    put32(f, 0x06054b50), put16(f, 0), put16(f, 0), put16(f, (unsigned)k), put16(f, (unsigned)k);
    put32(f, (uint32_t)(end - cd)), put32(f, (uint32_t)cd), put16(f, 0);
    if (fclose(f) != 0) FUZZ_DIE("cannot close %s", g_ckpt[0]);
}

/* Every container once (an explicit stack; a container may appear twice through the memo). */
static void walk(const pk_value *root, size_t n_values) {
    const pk_value **todo = malloc((n_values + 1) * sizeof *todo);
    size_t n = 0, seen = 0;
    if (!todo) FUZZ_DIE("out of memory");
    todo[n++] = root;
    while (n && seen++ <= n_values) {
        const pk_value *v = todo[--n];
        FUZZ_CHECK(v->depth >= 0 && v->depth <= PK_MAX_DEPTH, "depth %d", v->depth);
        if (v->kind == PK_TENSOR) {
            FUZZ_CHECK(v->u.t->n_dims >= 0 && v->u.t->n_dims <= PK_MAX_DIMS, "%d dims", v->u.t->n_dims);
            for (int d = 0; d < v->u.t->n_dims; d++) FUZZ_CHECK(v->u.t->shape[d] >= 0, "negative size");
            FUZZ_CHECK(v->u.t->storage->kind == PK_STORAGE, "tensor without a storage");
        }
        if (v->kind == PK_TUPLE || v->kind == PK_LIST || v->kind == PK_DICT) {
            FUZZ_CHECK(v->kind != PK_DICT || v->u.seq.n % 2 == 0, "odd dict");
            for (size_t i = 0; i < v->u.seq.n; i++) {
                const pk_value *c = v->u.seq.v[i];
                FUZZ_CHECK(c != v, "a container holds itself");
                if ((c->kind == PK_TUPLE || c->kind == PK_LIST || c->kind == PK_DICT || c->kind == PK_TENSOR) &&
                    n < n_values)
                    todo[n++] = c;
            }
        }
    }
    free(todo);
}

static void load(int i, const char *names_a, const char *names_b) {
    gpt2_model *m = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_model_load(g_ckpt[i], &m, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "[%d] %s\n", i, st ? err.msg : gpt2_model_source(m));
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(m == NULL, "failed load left a model");
        FUZZ_CHECK(strstr(err.msg, names_a) || strstr(err.msg, names_b), "error names no file: %s", err.msg);
        return;
    }
    fuzz_run_model(m);
    gpt2_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pk_doc doc;
    gpt2_error err;
    gpt2_status st = pickle_load("input", "data.pkl", data, size, &doc, &err);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(doc.blocks == NULL && doc.root == NULL, "failed pickle_load left memory");
    } else {
        FUZZ_CHECK(doc.root != NULL && doc.n_values <= PK_MAX_VALUES, "no root, or %zu values", doc.n_values);
        walk(doc.root, doc.n_values);
        pickle_free(&doc);
    }
    write_zip(data, size);
    load(0, "ckpt.pt", "vocab.json");
    char dir[500];
    snprintf(dir, sizeof dir, "%s/char", g_root);
    fuzz_write(dir, "meta.pkl", data, size);
    load(1, "meta.pkl", "ckpt.pt");
    return 0;
}
