/* fuzz_checkpoint.c — the input is a training checkpoint (src/train/checkpoint.c).
 *
 * A random change almost never keeps the trailing FNV-1a checksum right, which
 * would stop every input at "checksum mismatch". So when the input's last byte
 * is odd, the file written is the input with its checksum recomputed (as
 * tests/checkpoint_craft.h does), and the range checks behind it get fuzzed.
 *
 * gpt2_trainer_resume must either fail cleanly (GPT2_ERR_FORMAT, naming the
 * file) or give a trainer whose step count is within its steps and whose
 * learning-rate schedule is finite; that trainer then takes one step on a few
 * tokens (a finite loss, or a clean refusal of a non-finite one: the weights may
 * be finite yet huge), and its checkpoint, if save takes it, resumes to the same
 * bytes. The loader must bound what it allocates by the file's size: under
 * AddressSanitizer, the peak of what resume holds must stay within the
 * activations the header asks for plus twice the file. Those activations,
 * which the run's batch and block sizes set, are bounded here: inputs whose
 * header asks for more than 256 MB of them are skipped.
 */
#include <math.h>

#include "fuzz_common.h"

enum { HEAD = 16 + 23 * 8 };

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_HEAP_HOOKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_HEAP_HOOKS 1
#endif
#endif
#ifdef FUZZ_HEAP_HOOKS
/* sanitizer/allocator_interface.h, which gcc does not ship */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);
static long long g_live, g_peak; /* bytes held, and the most since the last reset */
static void on_malloc(const volatile void *p, size_t n) {
    (void)p;
    if ((g_live += (long long)n) > g_peak) g_peak = g_live;
}
static void on_free(const volatile void *p) { g_live -= (long long)__sanitizer_get_allocated_size(p); }
#endif

static char *g_dir, g_path[300], g_save[2][300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_dir = fuzz_tmpdir("ckpt");
    snprintf(g_path, sizeof g_path, "%s/in.ckpt", g_dir);
    for (int i = 0; i < 2; i++) snprintf(g_save[i], sizeof g_save[i], "%s/save%d.ckpt", g_dir, i);
#ifdef FUZZ_HEAP_HOOKS
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
#endif
    return 0;
}

static uint64_t field(const uint8_t *data, int i) {
    uint64_t v;
    memcpy(&v, data + 16 + 8 * i, 8);
    return v;
}

/* Bytes of activations trainer_alloc would take for the header's shapes
 * (src/train/train.c), in double so that nothing overflows. */
static double activation_bytes(const uint8_t *data) {
    const double L = (double)field(data, 0), H = (double)field(data, 1), C = (double)field(data, 2),
                 T = (double)field(data, 3), V = (double)field(data, 4), B = (double)field(data, 5);
    const double BT = B * T, BTC = BT * C, F = 4 * C;
    return 4 * (5 * BT + BTC * (7 + 8 * L) + L * BT * 4 + L * B * H * T * T + 2 * L * BT * F + BT * V + BT * F +
                T * T) +
           8 * 16 * 2 * (C + 16);
}

static void write_input(const uint8_t *data, size_t size) {
    if (size < 8 || !(data[size - 1] & 1)) {
        fuzz_write(g_dir, "in.ckpt", data, size);
        return;
    }
    uint8_t *b = malloc(size);
    if (!b) FUZZ_DIE("out of memory");
    memcpy(b, data, size);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size - 8; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    memcpy(b + size - 8, &h, 8);
    fuzz_write(g_dir, "in.ckpt", b, size);
    free(b);
}

/* save(tr) resumes to a trainer that saves to the same bytes. */
static void roundtrip(const gpt2_trainer *tr) {
    gpt2_error err;
    gpt2_status st = gpt2_trainer_save(tr, g_save[0], 42, &err);
    if (st != GPT2_OK) { /* the step may have pushed a value past float's range */
        fuzz_check_error(st, &err);
        FUZZ_CHECK(st == GPT2_ERR_INVALID_ARG && strstr(err.msg, "not written"), "save: %s", err.msg);
        return;
    }
    gpt2_trainer *tr2;
    uint64_t hash = 0;
    FUZZ_CHECK(gpt2_trainer_resume(g_save[0], 1, &tr2, &hash, &err) == GPT2_OK, "its own save: %s", err.msg);
    FUZZ_CHECK(hash == 42, "data hash %llu", (unsigned long long)hash);
    FUZZ_CHECK(gpt2_trainer_save(tr2, g_save[1], 42, &err) == GPT2_OK, "save: %s", err.msg);
    fuzz_check_same_files(g_save[0], g_save[1], "save(resume(save(tr))) != save(tr)");
    gpt2_trainer_free(tr2);
}

static void check_trainer(gpt2_trainer *tr) {
    const gpt2_train_params *p = gpt2_trainer_params(tr);
    const int step = gpt2_trainer_step_count(tr);
    FUZZ_CHECK(step >= 0 && step <= p->steps, "step %d of %d", step, p->steps);
    for (int k = 0; k <= 2; k++) {
        int at = k == 0 ? 0 : k == 1 ? step : p->steps;
        FUZZ_CHECK(isfinite(gpt2_trainer_lr(tr, at)), "lr(%d) = %g", at, (double)gpt2_trainer_lr(tr, at));
    }
    /* one step on a few tokens of the trainer's vocabulary */
    const size_t n = 2 * ((size_t)p->block_size + 1) + 1;
    int32_t *tok = malloc(n * sizeof *tok);
    if (!tok) FUZZ_DIE("out of memory");
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 31 + 7) % (size_t)p->n_vocab);
    gpt2_train_data d = {tok, n, 0};
    float loss = NAN;
    gpt2_error err;
    gpt2_status st = gpt2_trainer_step(tr, &d, &loss, &err);
    if (st == GPT2_OK) {
        FUZZ_CHECK(isfinite(loss), "step gave loss %g", (double)loss);
        FUZZ_CHECK(gpt2_trainer_step_count(tr) == step + 1, "step count %d after step %d",
                   gpt2_trainer_step_count(tr), step);
        roundtrip(tr);
    } else {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(st == GPT2_ERR_INVALID_ARG, "step failed: %s", err.msg);
        FUZZ_CHECK(gpt2_trainer_step_count(tr) == step, "a failed step counted");
    }
    free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const double act = size >= HEAD ? activation_bytes(data) : 0;
    if (act > 256e6) return 0;
    write_input(data, size);
    gpt2_trainer *tr = NULL;
    uint64_t hash = 0;
    gpt2_error err;
#ifdef FUZZ_HEAP_HOOKS
    const long long base = g_peak = g_live;
#endif
    gpt2_status st = gpt2_trainer_resume(g_path, 1, &tr, &hash, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "resumed");
#ifdef FUZZ_HEAP_HOOKS
    FUZZ_CHECK(g_peak - base <= act + 2.0 * (double)size + (1 << 20),
               "resume held %lld bytes for a %zu-byte file (activations %.0f)", g_peak - base, size, act);
#endif
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(st == GPT2_ERR_FORMAT, "status %d: %s", st, err.msg);
        FUZZ_CHECK(strncmp(err.msg, g_path, strlen(g_path)) == 0, "the message does not start with the path: %s",
                   err.msg);
        FUZZ_CHECK(tr == NULL, "a failed resume left a trainer");
        return 0;
    }
    check_trainer(tr);
    gpt2_trainer_free(tr);
    return 0;
}
