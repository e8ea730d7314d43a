/* test_train.c — the trainer: analytic gradients vs finite differences for
 * every tensor, loss falling to its analytic floor, exact resume from a
 * checkpoint, and exported models scored by the (separately tested)
 * inference engine to the same loss as the trainer's own forward pass.
 */
#include <math.h>
#include <sys/stat.h>

#include "gpt2.h"
#include "checkpoint_craft.h"
#include "gpt2_testing.h"
#include "test_util.h"

static gpt2_train_params tiny_params(void) {
    gpt2_train_params p = gpt2_train_default_params();
    p.n_layer = 2, p.n_head = 2, p.n_embd = 8, p.block_size = 6, p.n_vocab = 13;
    p.batch_size = 3, p.dropout = 0, p.n_threads = 2, p.seed = 7;
    return p;
}

static uint64_t lcg(uint64_t *s) { return (*s = *s * 6364136223846793005ull + 1442695040888963407ull) >> 33; }

/* n token ids in 0..12 from seed. */
static void random_ids(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(lcg(&seed) % 13);
}

/* Spreads the weights out (GPT-2's init makes most gradients tiny) so that
 * every tensor's gradient is well above finite-difference noise; matrices
 * scaled by 1 / sqrt(width) so that wider models' scores stay as lively as
 * the 8-wide one's, not saturated. */
static void randomize(gpt2_trainer *tr, uint64_t seed) {
    for (int i = 0; i < gpt2_trainer_n_tensors(tr); i++) {
        gpt2_train_tensor t = gpt2_trainer_tensor(tr, i);
        const double spread = 0.4 * sqrt(8.0 / (t.cols ? t.cols : 8));
        for (size_t j = 0; j < t.n; j++) {
            double u = (double)lcg(&seed) / 2147483648.0 - 1.0; /* [-1, 1) */
            t.param[j] = (float)(t.cols ? spread * u : (strstr(t.name, "weight") ? 1.0 + 0.5 * u : 0.3 * u));
        }
    }
}

/* The loss; with training passes (dropout on, the gradients overwritten), the
 * masks those of the trainer's current step, the same at every call. */
static double loss_at(gpt2_trainer *tr, const int32_t *x, const int32_t *y, int B, int T, int training) {
    float loss;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_loss(tr, x, y, B, T, training, &loss, &err), GPT2_OK);
    return loss;
}

/* Every tensor's analytic gradient against central differences, on a batch
 * of B x T random tokens; with p's dropouts on, through the same masks. */
static void gradient_check(gpt2_train_params p, int B, int T) {
    gpt2_trainer *tr;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
    /* GPT-2's count from the shape: embeddings V*C + P*C; per layer two
     * LayerNorms (4C), qkv (3C*C + 3C), proj (C*C + C), MLP (4C*C + 4C + 4C*C + C);
     * the final LayerNorm 2C; the LM head tied to the embedding. */
    const size_t V = (size_t)p.n_vocab, P = (size_t)p.block_size, C = (size_t)p.n_embd, L = (size_t)p.n_layer;
    assert_int_equal(gpt2_trainer_n_params(tr), V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C);
    randomize(tr, 99);
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    uint64_t s = 5;
    for (int i = 0; i < B * T; i++) x[i] = (int32_t)(lcg(&s) % V), y[i] = (int32_t)(lcg(&s) % V);
    float loss;
    assert_int_equal(gpt2_trainer_loss(tr, x, y, B, T, 1, &loss, &err), GPT2_OK);
    const int nt = gpt2_trainer_n_tensors(tr), training = p.dropout > 0 || p.attn_dropout > 0;
    float *grad = malloc(gpt2_trainer_n_params(tr) * sizeof *grad); /* training passes overwrite them */
    for (int i = 0, at = 0; i < nt; i++) {
        gpt2_train_tensor t = gpt2_trainer_tensor(tr, i);
        memcpy(grad + at, t.grad, t.n * sizeof(float)), at += (int)t.n;
    }
    assert_int_equal(nt, 2 + 12 * (int)L + 2);
    /* float32 forward passes make each finite difference noisy (~1e-7 of the
     * loss / h), so a tensor is judged by the relative error of its whole
     * sampled gradient vector, ||analytic - numeric|| / ||numeric||; a wrong
     * gradient (a missing term, a transposed matrix) gives O(1). */
    double worst = 0, worst_elem = 0;
    const char *worst_name = "";
    for (int i = 0, at = 0; i < nt; i++) {
        gpt2_train_tensor t = gpt2_trainer_tensor(tr, i);
        double diff2 = 0, num2 = 0, elem = 0;
        size_t step = t.n > 40 ? t.n / 40 : 1; /* about 40 coordinates per tensor */
        for (size_t j = 0; j < t.n; j += step) {
            const float h = 1e-2f, w0 = t.param[j], analytic = grad[at + j];
            t.param[j] = w0 + h;
            double up = loss_at(tr, x, y, B, T, training);
            t.param[j] = w0 - h;
            double down = loss_at(tr, x, y, B, T, training);
            t.param[j] = w0;
            double numeric = (up - down) / (2.0 * h);
            diff2 += (analytic - numeric) * (analytic - numeric);
            num2 += numeric * numeric;
            elem = fmax(elem, fabs(analytic - numeric) / fmax(fabs(analytic) + fabs(numeric), 1e-3));
        }
        at += (int)t.n;
        double rel = sqrt(diff2 / num2);
        assert_true(num2 > 1e-6); /* the check exercised real gradients */
        if (getenv("GRADCHECK_VERBOSE"))
            print_message("  %-28s %.2e (worst element %.2e)\n", t.name, rel, elem);
        if (rel > worst) worst = rel, worst_name = t.name;
        worst_elem = fmax(worst_elem, elem);
    }
    print_message("gradient check, %d wide%s: max relative error %.2e (%s), worst single element %.2e\n", p.n_embd,
                  training ? ", dropout on" : "", worst, worst_name, worst_elem);
    assert_true(worst < 1e-2);
    gpt2_trainer_free(tr);
    free(x), free(y), free(grad);
}

/* The loss and every gradient through gemm's kernels equal OpenBLAS's to
 * float rounding (GPTSCOPE_GEMM=blas routes the same products to sgemm). */
static void test_gemm_matches_blas(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    p.n_layer = 2, p.n_embd = 64, p.n_vocab = 128, p.block_size = 9, p.n_head = 4;
    enum { B = 3, T = 9 };
    int32_t x[B * T], y[B * T];
    uint64_t s = 11;
    for (int i = 0; i < B * T; i++) x[i] = (int32_t)(lcg(&s) % 128), y[i] = (int32_t)(lcg(&s) % 128);
    float loss[2], *grads[2];
    for (int run = 0; run < 2; run++) {
        setenv("GPTSCOPE_GEMM", run ? "blas" : "own", 1);
        gpt2_trainer *tr;
        gpt2_error err;
        assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
        randomize(tr, 3);
        assert_int_equal(gpt2_trainer_loss(tr, x, y, B, T, 1, &loss[run], &err), GPT2_OK);
        const size_t n = gpt2_trainer_n_params(tr);
        grads[run] = malloc(n * sizeof(float));
        for (int i = 0, at = 0; i < gpt2_trainer_n_tensors(tr); i++) {
            gpt2_train_tensor t = gpt2_trainer_tensor(tr, i);
            memcpy(grads[run] + at, t.grad, t.n * sizeof(float)), at += (int)t.n;
        }
        gpt2_trainer_free(tr);
    }
    unsetenv("GPTSCOPE_GEMM");
    const size_t n = (size_t)128 * 64 + 9 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64;
    double dmax = 0, gmax = 0;
    for (size_t i = 0; i < n; i++)
        dmax = fmax(dmax, fabs(grads[0][i] - grads[1][i])), gmax = fmax(gmax, fabs(grads[1][i]));
    print_message("gemm vs OpenBLAS: loss %.7f vs %.7f, gradients differ by %.2e at most (largest %.2e)\n", loss[0],
                  loss[1], dmax, gmax);
    assert_true(fabs(loss[0] - loss[1]) < 1e-5 * fabs(loss[1]));
    assert_true(gmax > 1e-3 && dmax < 1e-4 * gmax);
    free(grads[0]), free(grads[1]);
}

static void test_gradient_check(void **state) {
    (void)state;
    gradient_check(tiny_params(), 3, 6);
    /* past 64 positions the attention works in causal row blocks (gemm's
     * kernels take only matrices in whole 64-column panels: the products
     * through them are checked against these, OpenBLAS's, in
     * test_gemm_matches_blas) */
    gpt2_train_params p = tiny_params();
    p.block_size = 70;
    gradient_check(p, 2, 70);
    /* through dropout masks: the residual sites and the attention
       probabilities (the values weighted by the dropped ones, dP masked) */
    p.dropout = 0.1f, p.attn_dropout = 0.3f;
    gradient_check(p, 2, 70);
}

/* A stream with period 7 over 7 distinct tokens is fully predictable after one
 * token of context: the loss must fall from about ln(13) towards 0. */
static void test_loss_falls(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    p.n_embd = 16, p.block_size = 8, p.batch_size = 8, p.steps = 300, p.warmup_steps = 20, p.lr = 1e-2f,
    p.min_lr = 1e-3f, p.dropout = 0.0f;
    gpt2_trainer *tr;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
    int32_t ids[500];
    for (int i = 0; i < 500; i++) ids[i] = (int32_t)(3 + (i * 5) % 7);
    gpt2_train_data d = {ids, 500, 0};
    float first = 0, loss = 0;
    for (int s = 0; s < p.steps; s++) {
        assert_int_equal(gpt2_trainer_step(tr, &d, &loss, &err), GPT2_OK);
        if (s == 0) first = loss;
    }
    float val = gpt2_trainer_eval(tr, &d, 4);
    print_message("loss %.3f -> %.4f (eval %.4f)\n", first, loss, val);
    assert_true(fabsf(first - logf(13.0f)) < 0.3f);
    assert_true(val < 0.05f);
    gpt2_trainer_free(tr);
}

static void assert_same_params(gpt2_trainer *a, gpt2_trainer *b) {
    assert_int_equal(gpt2_trainer_n_tensors(a), gpt2_trainer_n_tensors(b));
    for (int i = 0; i < gpt2_trainer_n_tensors(a); i++) {
        gpt2_train_tensor ta = gpt2_trainer_tensor(a, i), tb = gpt2_trainer_tensor(b, i);
        assert_int_equal(ta.n, tb.n);
        assert_memory_equal(ta.param, tb.param, ta.n * sizeof(float));
    }
}

/* 6 steps straight == 3 steps, checkpoint, resume, 3 steps: bit for bit, with dropout. */
static void test_resume_exact(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    p.dropout = 0.2f, p.steps = 6, p.warmup_steps = 2;
    int32_t ids[200];
    random_ids(ids, 200, 11);
    gpt2_train_data d = {ids, 200, 0};
    gpt2_trainer *a, *b, *c;
    gpt2_error err;
    float loss;
    assert_int_equal(gpt2_trainer_new(p, &a, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_new(p, &b, &err), GPT2_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(gpt2_trainer_step(a, &d, &loss, &err), GPT2_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(gpt2_trainer_step(b, &d, &loss, &err), GPT2_OK);
    char path[] = "/tmp/gptscope-ckpt-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gpt2_trainer_save(b, path, 1234, &err), GPT2_OK);
    gpt2_trainer_free(b);
    uint64_t hash = 0;
    assert_int_equal(gpt2_trainer_resume(path, -1, &c, &hash, &err), GPT2_OK);
    assert_int_equal(hash, 1234);
    assert_int_equal(gpt2_trainer_step_count(c), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(gpt2_trainer_step(c, &d, &loss, &err), GPT2_OK);
    assert_same_params(a, c);
    gpt2_trainer_free(c);

    /* a damaged checkpoint is refused with the reason */
    size_t len;
    char *bytes = read_file(path, &len);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(bytes, 1, len - 100, f);
    fclose(f);
    assert_int_not_equal(gpt2_trainer_resume(path, -1, &c, &hash, &err), GPT2_OK);
    assert_non_null(strstr(err.msg, "truncated"));
    bytes[len / 2] ^= 1;
    f = fopen(path, "wb");
    fwrite(bytes, 1, len, f);
    fclose(f);
    assert_int_not_equal(gpt2_trainer_resume(path, -1, &c, &hash, &err), GPT2_OK);
    assert_non_null(strstr(err.msg, "checksum"));
    free(bytes);
    unlink(path);
    gpt2_trainer_free(a);
}

/* Checkpoints with a valid checksum but values no run can have are refused
 * on load, naming the field: a step past the end (2^64-1 once "resumed at
 * step -1"), sizes beyond int, non-finite settings, weights or moments. */
static void test_crafted_checkpoints(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    p.steps = 6;
    gpt2_trainer *tr, *c = NULL;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
    char path[] = "/tmp/gptscope-ckpt-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gpt2_trainer_save(tr, path, 5, &err), GPT2_OK);
    size_t len, n = 0;
    char *orig = read_file(path, &len);
    for (int i = 0; i < gpt2_trainer_n_tensors(tr); i++) n += gpt2_trainer_tensor(tr, i).n;
    const size_t head = CKPT_HEAD, field = CKPT_FIELD0; /* header fields: u64 each */
    assert_int_equal(len, head + 3 * n * 4 + 8);
    const uint64_t u64max = UINT64_MAX, seven = 7, big = (1ull << 32) + 2, nan_bits = 0x7fc00000, high = 1ull << 40,
                   one_and_half = 0x3fc00000, minus_half = 0xbf000000; /* 1.5f, -0.5f */
    const float fnan = NAN, finf = INFINITY, fneg = -1.0f;
    const struct {
        size_t off;
        const void *val;
        size_t vlen;
        const char *want;
    } cases[] = {
        {field + 18 * 8, &u64max, 8, "step = 18446744073709551615 is out of range"},
        {field + 18 * 8, &seven, 8, "step = 7 is past the run's end (steps = 6)"},
        {field + 0 * 8, &big, 8, "n_layer = 4294967298 is out of range"},
        {field + 5 * 8, &big, 8, "batch_size = 4294967298 is out of range"},
        {field + 8 * 8, &nan_bits, 8, "lr = 0x7fc00000 is not a finite 32-bit float"},
        {field + 15 * 8, &high, 8, "dropout = 0x10000000000 is not a finite 32-bit float"},
        {field + 25 * 8, &seven, 8, "short_init_positions = 7, expected 0 or 1"},
        {field + 26 * 8, &one_and_half, 8, "short_offsets = 0x3fc00000 is not a 32-bit float 0..1"},
        {field + 26 * 8, &high, 8, "short_offsets = 0x10000000000 is not a 32-bit float 0..1"},
        {field + 26 * 8, &nan_bits, 8, "short_offsets = 0x7fc00000 is not a 32-bit float 0..1"},
        {field + 26 * 8, &minus_half, 8, "short_offsets = 0xbf000000 is not a 32-bit float 0..1"},
        {field + 24 * 8, &nan_bits, 8, "attn_dropout = 0x7fc00000 is not a finite 32-bit float"},
        {field + 22 * 8, &big, 8, "short_block = 4294967298 is out of range"},
        {field + 23 * 8, &seven, 8, "short_block 0 must divide block_size 6"}, /* a warmup of 0-token windows */
        {head + 3 * 4, &fnan, 4, "parameter wte.weight[3] = nan"},
        {head + (n + n - 1) * 4, &finf, 4, "Adam first moment ln_f.bias[7] = inf"},
        {head + (2 * n + 5) * 4, &fneg, 4, "Adam second moment wte.weight[5] = -1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ckpt_craft(path, orig, len, cases[k].off, cases[k].val, cases[k].vlen);
        uint64_t hash;
        gpt2_status st = gpt2_trainer_resume(path, 1, &c, &hash, &err);
        if (st == GPT2_OK) fail_msg("case %zu resumed (at step %d); expected '%s'", k, gpt2_trainer_step_count(c),
                                    cases[k].want);
        assert_int_equal(st, GPT2_ERR_FORMAT);
        assert_null(c);
        if (!strstr(err.msg, cases[k].want) || !strstr(err.msg, path))
            fail_msg("case %zu: message '%s' lacks '%s' or the path", k, err.msg, cases[k].want);
    }
    ckpt_craft(path, orig, len, 0, orig, 8); /* unchanged: still loads */
    uint64_t hash;
    assert_int_equal(gpt2_trainer_resume(path, 1, &c, &hash, &err), GPT2_OK);
    gpt2_trainer_free(c);
    free(orig);
    unlink(path);
    gpt2_trainer_free(tr);
}

/* A model holding NaN or inf is never exported or checkpointed: the call
 * fails naming the value and the files there keep their bytes. */
static void test_nonfinite_not_written(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    gpt2_trainer *tr;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
    char dir[] = "/tmp/gptscope-nonfinite-XXXXXX", files[3][512];
    assert_non_null(mkdtemp(dir));
    snprintf(files[0], sizeof files[0], "%s/model.safetensors", dir);
    snprintf(files[1], sizeof files[1], "%s/config.json", dir);
    snprintf(files[2], sizeof files[2], "%s/checkpoint.bin", dir);
    assert_int_equal(gpt2_trainer_export(tr, dir, GPT2_DTYPE_F32, -1, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_save(tr, files[2], 1, &err), GPT2_OK);
    size_t len[3];
    char *before[3];
    for (int i = 0; i < 3; i++) before[i] = read_file(files[i], &len[i]);
    gpt2_train_tensor t = gpt2_trainer_tensor(tr, 2);
    assert_string_equal(t.name, "h.0.ln_1.weight");
    const float bad[2] = {NAN, -INFINITY};
    const char *want[2] = {"parameter h.0.ln_1.weight[3] = nan", "parameter h.0.ln_1.weight[3] = -inf"};
    for (int k = 0; k < 2; k++) {
        t.param[3] = bad[k];
        assert_int_equal(gpt2_trainer_export(tr, dir, GPT2_DTYPE_F16, -1, &err), GPT2_ERR_INVALID_ARG);
        if (!strstr(err.msg, want[k]) || !strstr(err.msg, dir)) fail_msg("export: '%s' lacks '%s'", err.msg, want[k]);
        assert_int_equal(gpt2_trainer_save(tr, files[2], 2, &err), GPT2_ERR_INVALID_ARG);
        if (!strstr(err.msg, want[k]) || !strstr(err.msg, files[2]))
            fail_msg("checkpoint: '%s' lacks '%s'", err.msg, want[k]);
        for (int i = 0; i < 3; i++) {
            size_t l;
            char *now = read_file(files[i], &l);
            if (l != len[i] || memcmp(now, before[i], l)) fail_msg("%s changed", files[i]);
            free(now);
        }
    }
    for (int i = 0; i < 3; i++) free(before[i]), unlink(files[i]);
    assert_int_equal(rmdir(dir), 0); /* nothing else, no temporary file, was left */
    gpt2_trainer_free(tr);
}

typedef struct {
    const int32_t *ids;
    double nats;
    int n;
} score_state;

static void on_logits(void *ud, int pos, const float *logits, int n_vocab) {
    score_state *s = ud;
    double max = logits[0], sum = 0;
    for (int i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < n_vocab; i++) sum += exp(logits[i] - max);
    s->nats += log(sum) + max - logits[s->ids[pos + 1]];
    s->n++;
}

static void copy_file(const char *from, const char *to) {
    size_t len;
    char *data = read_file(from, &len);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    free(data);
}

/* The exported directory loads in the inference engine, which scores a
 * sequence to the trainer's own loss (F32 export: to float rounding). */
static void test_export_matches_engine(void **state) {
    (void)state;
    gpt2_train_params p = gpt2_train_default_params();
    p.n_layer = 2, p.n_head = 4, p.n_embd = 32, p.block_size = 24, p.n_vocab = 507, p.batch_size = 2;
    p.n_threads = 2, p.steps = 5;
    gpt2_trainer *tr;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
    int32_t ids[400];
    uint64_t s = 3;
    for (int i = 0; i < 400; i++) ids[i] = (int32_t)(lcg(&s) % 507);
    gpt2_train_data d = {ids, 400, 0};
    float loss;
    for (int i = 0; i < 5; i++) assert_int_equal(gpt2_trainer_step(tr, &d, &loss, &err), GPT2_OK);
    char dir[] = "/tmp/gptscope-export-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(gpt2_trainer_export(tr, dir, GPT2_DTYPE_F32, 506, &err), GPT2_OK);
    char a[512], b[512];
    snprintf(b, sizeof b, "%s/vocab.json", dir);
    copy_file(fixture_path("models/tiny-f32/vocab.json"), b);
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    copy_file(fixture_path("models/tiny-f32/merges.txt"), b);
    float train_loss;
    assert_int_equal(gpt2_trainer_loss(tr, ids, ids + 1, 1, 24, 0, &train_loss, &err), GPT2_OK);

    gpt2_model *m;
    assert_int_equal(gpt2_model_load(dir, &m, &err), GPT2_OK);
    assert_int_equal(gpt2_model_config(m)->n_ctx, 24);
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    score_state ss = {.ids = ids};
    gpt2_hooks hooks = {.user_data = &ss, .on_logits = on_logits};
    gpt2_context_set_hooks(ctx, &hooks);
    assert_int_equal(gpt2_context_eval(ctx, ids, 24, &err), GPT2_OK);
    assert_int_equal(ss.n, 24);
    double engine_loss = ss.nats / ss.n;
    print_message("trainer %.6f engine %.6f\n", train_loss, engine_loss);
    assert_true(fabs(engine_loss - train_loss) < 1e-4);
    gpt2_context_free(ctx);
    gpt2_model_free(m);

    /* F16 export: same loss to half precision */
    assert_int_equal(gpt2_trainer_export(tr, dir, GPT2_DTYPE_F16, 506, &err), GPT2_OK);
    assert_int_equal(gpt2_model_load(dir, &m, &err), GPT2_OK);
    assert_int_equal(gpt2_model_dtype(m), GPT2_DTYPE_F16);
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    ss = (score_state){.ids = ids};
    gpt2_context_set_hooks(ctx, &hooks);
    assert_int_equal(gpt2_context_eval(ctx, ids, 24, &err), GPT2_OK);
    assert_true(fabs(ss.nats / ss.n - train_loss) < 1e-2);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    const char *files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/%s", dir, files[i]);
        unlink(a);
    }
    rmdir(dir);
    gpt2_trainer_free(tr);
}

/* Copies a's tensors into b where both have them, rows past b's end left out (wpe). */
static void copy_common_params(gpt2_trainer *a, gpt2_trainer *b) {
    for (int i = 0; i < gpt2_trainer_n_tensors(b); i++) {
        gpt2_train_tensor ta = gpt2_trainer_tensor(a, i), tb = gpt2_trainer_tensor(b, i);
        assert_true(tb.n <= ta.n);
        memcpy(tb.param, ta.param, tb.n * sizeof(float));
    }
}

/* The sequence-length warmup is, step for step, a run with the short block and
 * block/short times the batch (the same windows and dropout masks: same seed),
 * bit for bit: a's extra position rows get no gradient meanwhile (without
 * weight decay: unchanged), its validation reads short windows, and the first
 * full-length step moves those rows. Clipping off: the gradient norm sums a's
 * extra zeros in other chunks. */
static void test_short_warmup(void **state) {
    (void)state;
    gpt2_train_params pa = tiny_params(), pb;
    pa.block_size = 8, pa.batch_size = 2, pa.steps = 5, pa.warmup_steps = 1, pa.dropout = 0.2f;
    pa.weight_decay = 0, pa.grad_clip = 0, pa.short_block = 4, pa.short_steps = 3;
    pb = pa;
    pb.block_size = 4, pb.batch_size = 4, pb.short_block = 0, pb.short_steps = 0;
    int32_t ids[300];
    random_ids(ids, 300, 3);
    gpt2_train_data d = {ids, 300, 0};
    gpt2_trainer *a, *b;
    gpt2_error err;
    float la, lb;
    assert_int_equal(gpt2_trainer_new(pa, &a, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_new(pb, &b, &err), GPT2_OK);
    copy_common_params(a, b);
    const gpt2_train_tensor wpe = gpt2_trainer_tensor(a, 1);
    const size_t short_n = 4 * (size_t)pa.n_embd;
    float *tail = malloc((wpe.n - short_n) * sizeof(float));
    assert_non_null(tail);
    memcpy(tail, wpe.param + short_n, (wpe.n - short_n) * sizeof(float));
    for (int k = 0; k < pa.short_steps; k++) {
        assert_int_equal(gpt2_trainer_step(a, &d, &la, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(b, &d, &lb, &err), GPT2_OK);
        assert_memory_equal(&la, &lb, sizeof la);
        if (k == 1) assert_true(gpt2_trainer_eval(a, &d, 2) == gpt2_trainer_eval(b, &d, 2));
    }
    for (int i = 0; i < gpt2_trainer_n_tensors(b); i++) {
        gpt2_train_tensor ta = gpt2_trainer_tensor(a, i), tb = gpt2_trainer_tensor(b, i);
        assert_memory_equal(ta.param, tb.param, tb.n * sizeof(float));
    }
    assert_memory_equal(wpe.param + short_n, tail, (wpe.n - short_n) * sizeof(float));
    /* full length from here: 2 windows of 8, and the rows past 4 learn */
    assert_int_equal(gpt2_trainer_step(a, &d, &la, &err), GPT2_OK);
    assert_memory_not_equal(wpe.param + short_n, tail, (wpe.n - short_n) * sizeof(float));
    free(tail);
    gpt2_trainer_free(a);
    gpt2_trainer_free(b);
    pa.short_block = 3; /* does not divide 8 */
    assert_int_equal(gpt2_trainer_new(pa, &a, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "short_block 3 must divide block_size 8"));
}

/* --short-init-positions: at the switch, rows short_block.. of wpe start
 * as row short_block - 1. Reference: a run without the option whose rows
 * the test copies itself (memcpy) before the first full-length step; the
 * runs then match bit for bit, and a checkpoint taken at the switch resumes
 * to the same weights. Without the copy they differ. */
static void test_short_init_positions(void **state) {
    (void)state;
    gpt2_train_params pa = tiny_params();
    pa.block_size = 8, pa.batch_size = 2, pa.steps = 5, pa.warmup_steps = 1, pa.dropout = 0.2f;
    pa.short_block = 4, pa.short_steps = 3, pa.short_init_positions = 1;
    gpt2_train_params pb = pa;
    pb.short_init_positions = 0;
    int32_t ids[300];
    random_ids(ids, 300, 5);
    gpt2_train_data d = {ids, 300, 0};
    gpt2_trainer *a, *b, *c, *r;
    gpt2_error err;
    float loss;
    assert_int_equal(gpt2_trainer_new(pa, &a, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_new(pb, &b, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_new(pb, &c, &err), GPT2_OK);
    for (int k = 0; k < pa.short_steps; k++) {
        assert_int_equal(gpt2_trainer_step(a, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(b, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(c, &d, &loss, &err), GPT2_OK);
    }
    char path[] = "/tmp/gptscope-ckpt-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    /* the warmup's last step made the copy: validation and export from here on see it */
    const gpt2_train_tensor wb = gpt2_trainer_tensor(b, 1), wa0 = gpt2_trainer_tensor(a, 1);
    const size_t C = (size_t)pa.n_embd;
    for (int t = pa.short_block; t < pa.block_size; t++)
        assert_memory_equal(wa0.param + t * C, wa0.param + (pa.short_block - 1) * C, C * sizeof(float));
    assert_int_equal(gpt2_trainer_save(a, path, 77, &err), GPT2_OK); /* at the switch */
    for (int t = pa.short_block; t < pa.block_size; t++)
        memcpy(wb.param + t * C, wb.param + (pa.short_block - 1) * C, C * sizeof(float));
    uint64_t hash;
    assert_int_equal(gpt2_trainer_resume(path, -1, &r, &hash, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_params(r)->short_init_positions, 1);
    for (int k = pa.short_steps; k < pa.steps; k++) {
        assert_int_equal(gpt2_trainer_step(a, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(b, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(c, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(r, &d, &loss, &err), GPT2_OK);
    }
    for (int i = 0; i < gpt2_trainer_n_tensors(a); i++) {
        gpt2_train_tensor ta = gpt2_trainer_tensor(a, i), tb = gpt2_trainer_tensor(b, i), tr = gpt2_trainer_tensor(r, i);
        assert_memory_equal(ta.param, tb.param, ta.n * sizeof(float));
        assert_memory_equal(ta.param, tr.param, ta.n * sizeof(float));
    }
    const gpt2_train_tensor wa = gpt2_trainer_tensor(a, 1), wc = gpt2_trainer_tensor(c, 1);
    assert_memory_not_equal(wa.param, wc.param, wa.n * sizeof(float));
    unlink(path);
    gpt2_trainer_free(a);
    gpt2_trainer_free(b);
    gpt2_trainer_free(c);
    gpt2_trainer_free(r);
    pa.short_steps = 0; /* the option needs a warmup */
    assert_int_equal(gpt2_trainer_new(pa, &a, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "short_init_positions needs a sequence-length warmup"));
}

/* Close enough for two summation orders: |a - b| <= 1e-5 * scale + 1e-9. */
static void assert_close(const float *a, const float *b, size_t n, float scale, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f * scale + 1e-9f) fail_msg("%s[%zu]: %g against %g", what, i, a[i], b[i]);
}

/* --short-offsets, from its definition: a window at position row o is the
 * same window at row 0 of a model whose rows 0.. are the first one's o..;
 * its gradients land in rows o.. and nowhere else. Then in training: the
 * warmup's steps reach rows past short_block (without it they never do), a
 * checkpoint mid-warmup resumes exactly, and the option is refused where it
 * makes no sense. */
static void test_short_offsets(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    p.block_size = 8, p.batch_size = 2;
    gpt2_trainer *a, *r[2];
    gpt2_error err;
    assert_int_equal(gpt2_trainer_new(p, &a, &err), GPT2_OK);
    randomize(a, 3); /* GPT-2's init makes the position rows' gradients tiny */
    const int T = 3, C = p.n_embd;
    const int32_t pos0[2] = {1, 5};
    int32_t in[6], tg[6];
    random_ids(in, 6, 11), random_ids(tg, 6, 12);
    float loss, lr[2];
    assert_int_equal(gpt2_trainer_loss_at(a, in, tg, 2, T, pos0, 1, &loss, &err), GPT2_OK);
    const gpt2_train_tensor wte = gpt2_trainer_tensor(a, 0), wpe = gpt2_trainer_tensor(a, 1);
    for (int b = 0; b < 2; b++) {
        assert_int_equal(gpt2_trainer_new(p, &r[b], &err), GPT2_OK);
        for (int i = 0; i < gpt2_trainer_n_tensors(a); i++) /* the same weights, then rows 0.. := rows pos0[b].. */
            memcpy(gpt2_trainer_tensor(r[b], i).param, gpt2_trainer_tensor(a, i).param,
                   gpt2_trainer_tensor(a, i).n * sizeof(float));
        memcpy(gpt2_trainer_tensor(r[b], 1).param, wpe.param + pos0[b] * C, (size_t)T * C * sizeof(float));
        assert_int_equal(gpt2_trainer_loss(r[b], in + b * T, tg + b * T, 1, T, 1, &lr[b], &err), GPT2_OK);
    }
    const float want_loss = (lr[0] + lr[1]) / 2;
    assert_close(&loss, &want_loss, 1, fabsf(want_loss), "loss");
    /* the mean over both windows: each reference's gradient halved */
    float *want = calloc(wte.n > wpe.n ? wte.n : wpe.n, sizeof(float)), scale = 0;
    assert_non_null(want);
    for (int b = 0; b < 2; b++) {
        const gpt2_train_tensor g = gpt2_trainer_tensor(r[b], 1);
        for (int i = 0; i < T * C; i++) want[pos0[b] * C + i] += g.grad[i] / 2;
    }
    for (size_t i = 0; i < wpe.n; i++) scale = fmaxf(scale, fabsf(want[i]));
    assert_true(scale > 1e-4f);
    assert_close(wpe.grad, want, wpe.n, scale, "wpe gradient"); /* rows 0, 4 (between the windows): 0 */
    memset(want, 0, wte.n * sizeof(float)), scale = 0;
    for (int b = 0; b < 2; b++)
        for (size_t i = 0; i < wte.n; i++) want[i] += gpt2_trainer_tensor(r[b], 0).grad[i] / 2;
    for (size_t i = 0; i < wte.n; i++) scale = fmaxf(scale, fabsf(want[i]));
    assert_close(wte.grad, want, wte.n, scale, "wte gradient");
    const int32_t past[2] = {0, 6}; /* 6 + 3 > 8 */
    assert_int_equal(gpt2_trainer_loss_at(a, in, tg, 2, T, past, 0, &loss, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "sequence 1 starts at position row 6; 3 positions fit from rows 0..5"));
    free(want);
    gpt2_trainer_free(a), gpt2_trainer_free(r[0]), gpt2_trainer_free(r[1]);

    /* training: rows past the window get gradients in the warmup only with the option */
    p.steps = 5, p.warmup_steps = 1, p.dropout = 0.1f, p.short_block = 2, p.short_steps = 3;
    gpt2_train_params po = p;
    po.short_offsets = 1;
    int32_t ids[300];
    random_ids(ids, 300, 5);
    gpt2_train_data d = {ids, 300, 0};
    gpt2_trainer *plain, *off, *res;
    assert_int_equal(gpt2_trainer_new(p, &plain, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_new(po, &off, &err), GPT2_OK);
    char path[] = "/tmp/gptscope-ckpt-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gpt2_trainer_step(plain, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(off, &d, &loss, &err), GPT2_OK);
        const float *gp = gpt2_trainer_tensor(plain, 1).grad, *go = gpt2_trainer_tensor(off, 1).grad;
        int reached = 0;
        for (int i = p.short_block * C; i < p.block_size * C; i++) {
            assert_true(gp[i] == 0);
            reached += go[i] != 0;
        }
        assert_true(reached > 0); /* 8 windows at offsets 0..6 */
    }
    assert_int_equal(gpt2_trainer_save(off, path, 5, &err), GPT2_OK); /* mid-warmup */
    uint64_t hash;
    assert_int_equal(gpt2_trainer_resume(path, -1, &res, &hash, &err), GPT2_OK);
    assert_true(gpt2_trainer_params(res)->short_offsets == 1);
    /* the same file as version 3 wrote it, the option a flag: 1 is the fraction 1, 2 is refused */
    size_t len;
    char *v4 = read_file(path, &len);
    const uint32_t head3[2] = {3, 27};
    memcpy(v4 + 8, head3, 8);
    gpt2_trainer *res3;
    ckpt_craft(path, v4, len, CKPT_FIELD0 + 26 * 8, &(uint64_t){2}, 8);
    assert_int_equal(gpt2_trainer_resume(path, -1, &res3, &hash, &err), GPT2_ERR_FORMAT);
    if (!strstr(err.msg, "short_offsets = 2, expected 0 or 1 (version 3)")) fail_msg("message: %s", err.msg);
    ckpt_craft(path, v4, len, CKPT_FIELD0 + 26 * 8, &(uint64_t){1}, 8);
    assert_int_equal(gpt2_trainer_resume(path, -1, &res3, &hash, &err), GPT2_OK);
    assert_true(gpt2_trainer_params(res3)->short_offsets == 1);
    for (int k = 2; k < p.steps; k++) {
        assert_int_equal(gpt2_trainer_step(off, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(res, &d, &loss, &err), GPT2_OK);
        assert_int_equal(gpt2_trainer_step(res3, &d, &loss, &err), GPT2_OK);
    }
    assert_same_params(off, res);
    assert_same_params(off, res3);
    unlink(path);
    free(v4);
    gpt2_trainer_free(plain), gpt2_trainer_free(off), gpt2_trainer_free(res), gpt2_trainer_free(res3);
    po.short_init_positions = 1;
    assert_int_equal(gpt2_trainer_new(po, &a, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "short_init_positions would overwrite them"));
    po.short_init_positions = 0, po.short_steps = 0;
    assert_int_equal(gpt2_trainer_new(po, &a, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "short_offsets needs a sequence-length warmup"));
    po.short_steps = 3, po.short_offsets = 1.5f;
    assert_int_equal(gpt2_trainer_new(po, &a, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "short_offsets = 1.5, expected a fraction 0..1"));
}

/* The trainer's RNG state: checkpoint field 19. */
static uint64_t rng_state(const gpt2_trainer *tr, const char *path) {
    gpt2_error err;
    assert_int_equal(gpt2_trainer_save(tr, path, 0, &err), GPT2_OK);
    char *b = read_file(path, NULL);
    uint64_t s;
    memcpy(&s, b + CKPT_FIELD0 + 19 * 8, 8);
    free(b);
    return s;
}

/* 1 - (1 - x)^4, in a test's own words */
static double reach4(double x) { return 1 - pow(1 - x, 4); }

/* short_offsets = f, from its definition: each warmup window starts at a
 * random row with probability f, at a row drawn uniformly from 0..block -
 * short_block. With 4 windows of 2 tokens in a block of 8 (rows 0..6 to
 * draw), a window reaches a position row >= 2 when its row is >= 1
 * (probability 6/7 of a drawn one) and the last row, 7, only from row 6
 * (1/7): a step reaches them with probability 1 - (1 - 6f/7)^4 and
 * 1 - (1 - f/7)^4. Counted over 400 steps for f = 0.25 and 1 (within 5 sd).
 * With f = 1 no coin is drawn, so runs and checkpoints of the flag it
 * replaced go on the same: a step draws 4 windows, 4 rows and a dropout
 * key, 9 steps of the RNG's Weyl sequence (core/rng.h). */
static void test_short_offsets_fraction(void **state) {
    (void)state;
    const float fs[2] = {0.25f, 1};
    int32_t ids[400];
    random_ids(ids, 400, 17);
    gpt2_train_data d = {ids, 400, 0};
    for (int k = 0; k < 2; k++) {
        gpt2_train_params p = tiny_params();
        p.block_size = 8, p.batch_size = 1, p.short_block = 2, p.steps = p.short_steps = 400, p.warmup_steps = 1;
        p.short_offsets = fs[k], p.n_threads = 1;
        gpt2_trainer *tr;
        gpt2_error err;
        float loss;
        assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
        randomize(tr, 3);
        const int C = p.n_embd;
        int past = 0, last = 0;
        char path[] = "/tmp/gptscope-ckpt-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        for (int s = 0; s < p.steps; s++) {
            const uint64_t before = s ? 0 : rng_state(tr, path);
            assert_int_equal(gpt2_trainer_step(tr, &d, &loss, &err), GPT2_OK);
            if (s == 0 && fs[k] == 1) assert_true(rng_state(tr, path) - before == 9 * 0x9E3779B97F4A7C15ull);
            const float *g = gpt2_trainer_tensor(tr, 1).grad;
            int any = 0, end = 0;
            for (int i = 2 * C; i < p.block_size * C; i++) any |= g[i] != 0;
            for (int i = (p.block_size - 1) * C; i < p.block_size * C; i++) end |= g[i] != 0;
            past += any, last += end;
        }
        unlink(path);
        const struct {
            const char *rows;
            int got;
            double q;
        } law[2] = {{"2..", past, reach4(6.0 * fs[k] / 7)}, {"7", last, reach4(fs[k] / 7.0)}};
        for (int j = 0; j < 2; j++) {
            const double mean = p.steps * law[j].q, sd = sqrt(p.steps * law[j].q * (1 - law[j].q));
            print_message("short_offsets %.2f: %d of %d steps reached rows %s, expected %.1f (sd %.1f)\n",
                          (double)fs[k], law[j].got, p.steps, law[j].rows, mean, sd);
            assert_true(fabs(law[j].got - mean) <= 5 * sd + 1);
        }
        gpt2_trainer_free(tr);
    }
}

/* The current (version-4) file cur (len bytes) as version 1 or 2 would have
 * written it: fields 0..21, the three of version 2 if v2 (22..24), field 25, then
 * the arrays; the checksum made right. */
static unsigned char *older_checkpoint(const unsigned char *cur, size_t len, int v2, size_t *out_len) {
    const uint32_t head[2] = {v2 ? 2 : 1, v2 ? 26 : 23};
    *out_len = len - (v2 ? 1 : 4) * 8;
    unsigned char *o = malloc(*out_len), *at = o + 16;
    assert_non_null(o);
    memcpy(o, cur, 8);
    memcpy(o + 8, head, 8);
    memcpy(at, cur + 16, 22 * 8), at += 22 * 8;
    if (v2) memcpy(at, cur + 16 + 22 * 8, 3 * 8), at += 3 * 8;
    memcpy(at, cur + 16 + 25 * 8, 8), at += 8;
    memcpy(at, cur + 16 + 27 * 8, len - 16 - 27 * 8); /* the arrays, the checksum */
    uint64_t h = ckpt_fnv1a(o, *out_len - 8);
    memcpy(o + *out_len - 8, &h, 8);
    return o;
}

/* Version-1 and version-2 checkpoints (23 and 26 header fields) resume as
 * runs without the fields they lack, exactly as the current file. */
static void test_checkpoint_older(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    p.steps = 4, p.dropout = 0.1f;
    int32_t ids[200];
    random_ids(ids, 200, 9);
    gpt2_train_data d = {ids, 200, 0};
    gpt2_trainer *a, *b = NULL;
    gpt2_error err;
    float loss;
    assert_int_equal(gpt2_trainer_new(p, &a, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_step(a, &d, &loss, &err), GPT2_OK);
    char path[] = "/tmp/gptscope-ckpt-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gpt2_trainer_save(a, path, 77, &err), GPT2_OK);
    size_t len;
    unsigned char *cur = (unsigned char *)read_file(path, &len);
    gpt2_trainer *olds[2];
    for (int v2 = 0; v2 < 2; v2++) {
        size_t n;
        unsigned char *o = older_checkpoint(cur, len, v2, &n);
        write_bytes(path, o, n);
        free(o);
        uint64_t hash = 0;
        assert_int_equal(gpt2_trainer_resume(path, -1, &olds[v2], &hash, &err), GPT2_OK);
        assert_int_equal(hash, 77);
        assert_int_equal(gpt2_trainer_params(olds[v2])->short_steps, 0);
        assert_true(gpt2_trainer_params(olds[v2])->short_offsets == 0);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gpt2_trainer_step(a, &d, &loss, &err), GPT2_OK);
        for (int v2 = 0; v2 < 2; v2++) assert_int_equal(gpt2_trainer_step(olds[v2], &d, &loss, &err), GPT2_OK);
    }
    assert_same_params(a, olds[0]);
    assert_same_params(a, olds[1]);
    gpt2_trainer_free(olds[0]);
    gpt2_trainer_free(olds[1]);
    /* version 2's own fields (22..25) come back from where it wrote them */
    gpt2_train_params pw = p;
    pw.block_size = 6, pw.short_block = 3, pw.short_steps = 2, pw.attn_dropout = 0.25f, pw.short_init_positions = 1;
    gpt2_trainer *w, *w2;
    assert_int_equal(gpt2_trainer_new(pw, &w, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_save(w, path, 78, &err), GPT2_OK);
    size_t wlen, n2;
    unsigned char *wcur = (unsigned char *)read_file(path, &wlen), *o2 = older_checkpoint(wcur, wlen, 1, &n2);
    write_bytes(path, o2, n2);
    assert_int_equal(gpt2_trainer_resume(path, -1, &w2, &(uint64_t){0}, &err), GPT2_OK);
    const gpt2_train_params *q = gpt2_trainer_params(w2);
    assert_true(q->short_block == 3 && q->short_steps == 2 && q->attn_dropout == 0.25f && q->short_init_positions == 1);
    gpt2_trainer_free(w), gpt2_trainer_free(w2), free(wcur), free(o2);
    const uint32_t head5[2] = {5, 27};
    memcpy(cur + 8, head5, 8);
    ckpt_craft(path, (const char *)cur, len, 0, cur, 8);
    assert_int_equal(gpt2_trainer_resume(path, -1, &b, &(uint64_t){0}, &err), GPT2_ERR_FORMAT);
    if (!strstr(err.msg, "version 5 with 27 fields; this build reads versions 1 (23 fields), 2 (26), 3 (27) and 4 (27)"))
        fail_msg("message: %s", err.msg);
    unlink(path);
    free(cur);
    gpt2_trainer_free(a);
}

static void test_bad_params(void **state) {
    (void)state;
    gpt2_train_params p = tiny_params();
    gpt2_trainer *tr;
    gpt2_error err;
    p.n_embd = 10, p.n_head = 4;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "multiple of n_head"));
    p = tiny_params();
    p.dropout = 1.0f;
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_ERR_INVALID_ARG);
    p = tiny_params();
    p.short_block = -1; /* even without a warmup: its checkpoint would not resume */
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "short_block -1 must be >= 0"));
    p = tiny_params();
    assert_int_equal(gpt2_trainer_new(p, &tr, &err), GPT2_OK);
    int32_t ids[5] = {1, 2, 3, 4, 5};
    gpt2_train_data d = {ids, 5, 0}; /* block 6 needs 7 tokens */
    float loss;
    assert_int_equal(gpt2_trainer_step(tr, &d, &loss, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no whole sequence"));
    int32_t bad[7] = {1, 2, 3, 40, 5, 6, 7};
    d = (gpt2_train_data){bad, 7, 0};
    assert_int_equal(gpt2_trainer_step(tr, &d, &loss, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "token id 40"));
    gpt2_trainer_free(tr);
    assert_int_equal(gpt2_text_split("abc\xc3\xa9xyz", 8, 0.5), 3); /* not inside é */
    assert_int_equal(gpt2_text_split("abcdefghij", 10, 0.9), 9);
}

static int interrupt_at(void *ud) {
    int *left = ud;
    return --*left == 0;
}

/* A step interrupted in its forward or its backward pass is undone: step count,
 * RNG and weights as before, so the run goes on as if it had never started
 * (the same weights as an uninterrupted twin, bit for bit, with dropout).
 * by_flag: the stop flag, set in the middle of a layer's work (here by the
 * interrupt callback, which itself says go on), stops it: the chunks left do
 * nothing and the step is undone the same way. */
static volatile sig_atomic_t g_stop_flag;
static int set_flag_at(void *ud) {
    int *left = ud;
    if (--*left == 0) g_stop_flag = 1;
    return 0;
}

static void check_interrupted_steps(int by_flag) {
    gpt2_train_params p = tiny_params();
    p.dropout = 0.2f, p.steps = 4, p.warmup_steps = 1;
    int32_t ids[200];
    random_ids(ids, 200, 5);
    gpt2_train_data d = {ids, 200, 0};
    gpt2_trainer *a, *b;
    gpt2_error err;
    float loss;
    assert_int_equal(gpt2_trainer_new(p, &a, &err), GPT2_OK);
    assert_int_equal(gpt2_trainer_new(p, &b, &err), GPT2_OK);
    for (int i = 0; i < 4; i++) assert_int_equal(gpt2_trainer_step(a, &d, &loss, &err), GPT2_OK);
    if (by_flag) gpt2_trainer_set_stop_flag(b, &g_stop_flag);
    /* the callback: layer 1's forward, the last layer's backward; the flag: set
       before layer 0's forward, and before the last layer's backward */
    const int stops[2] = {by_flag ? 1 : 2, p.n_layer + 1};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gpt2_trainer_step(b, &d, &loss, &err), GPT2_OK);
        int left = stops[k];
        g_stop_flag = 0;
        gpt2_trainer_set_cancel(b, by_flag ? set_flag_at : interrupt_at, &left);
        assert_int_equal(gpt2_trainer_step(b, &d, &loss, &err), GPT2_CANCELLED);
        assert_non_null(strstr(err.msg, by_flag ? "interrupted" : k ? "backward" : "forward"));
        assert_int_equal(gpt2_trainer_step_count(b), k + 1);
        gpt2_trainer_set_cancel(b, NULL, NULL);
        g_stop_flag = 0;
    }
    for (int i = 0; i < 2; i++) assert_int_equal(gpt2_trainer_step(b, &d, &loss, &err), GPT2_OK);
    assert_same_params(a, b);
    gpt2_trainer_free(a);
    gpt2_trainer_free(b);
}

static void test_interrupt_step(void **state) {
    (void)state;
    check_interrupted_steps(0);
}

static void test_stop_flag_step(void **state) {
    (void)state;
    check_interrupted_steps(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient_check),
        cmocka_unit_test(test_gemm_matches_blas), cmocka_unit_test(test_loss_falls),
        cmocka_unit_test(test_resume_exact),   cmocka_unit_test(test_export_matches_engine),
        cmocka_unit_test(test_bad_params),     cmocka_unit_test(test_crafted_checkpoints),
        cmocka_unit_test(test_nonfinite_not_written), cmocka_unit_test(test_interrupt_step),
        cmocka_unit_test(test_stop_flag_step),
        cmocka_unit_test(test_short_warmup),   cmocka_unit_test(test_short_init_positions),
        cmocka_unit_test(test_checkpoint_older),
        cmocka_unit_test(test_short_offsets),
        cmocka_unit_test(test_short_offsets_fraction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
