/* test_train_cli.c — `gptscope train` end to end: the reverse task trained
 * from scratch reaches its analytic loss floor and reverses held-out
 * sequences; bad data, resumes on other data and damaged checkpoints give
 * clear errors. $GPTSCOPE_BIN names the binary under test. */
#include <cjson/cJSON.h>
#include <math.h>
#include <sys/stat.h>

#include "checkpoint_craft.h"
#include "cli_run.h"
#include "test_util.h"

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n lines of 16 numbers 0..99, the second half mirroring the first (the
 * format of scripts/make-reverse-data.py). */
static void write_reverse_data(const char *path, int n, uint64_t seed) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < n; i++) {
        int half[8];
        for (int k = 0; k < 8; k++) half[k] = (int)(splitmix(&seed) % 100);
        for (int k = 0; k < 16; k++) fprintf(f, k ? " %d" : "%d", k < 8 ? half[k] : half[15 - k]);
        fputc('\n', f);
    }
    fclose(f);
}

static char *tmpdir_new(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/gptscope-train-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static double json_number(const char *text, const char *key) {
    cJSON *j = cJSON_Parse(text);
    if (!j) fail_msg("not JSON: %s", text);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    assert_true(cJSON_IsNumber(v));
    double d = v->valuedouble;
    cJSON_Delete(j);
    return d;
}

/* The seed post's toy task: the first 8 numbers are random (7 predictions of
 * ln 100 each), the last 8 are determined, so the mean loss over the 15
 * predicted positions has the floor (7/15) ln 100 = 2.149. */
static void test_reverse_end_to_end(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char data[256], model[256];
    snprintf(data, sizeof data, "%s/reverse.txt", dir);
    snprintf(model, sizeof model, "%s/model", dir);
    write_reverse_data(data, 8000, 42);

    run_result r = run(NULL, "train-tokenizer --vocab-size 512 -o %s %s", model, data);
    assert_int_equal(r.status, 0);
    run_free(&r);
    r = run(NULL,
            "train --examples --tokenizer %s -o %s --layers 2 --heads 4 --embd 64 --block 16 --batch 64 "
            "--steps 700 --lr 3e-3 --warmup 70 --dropout 0 --weight-decay 0.01 --threads 2 --eval-every 700 %s",
            model, model, data);
    if (r.status != 0) fail_msg("train failed: %s", r.err);
    assert_non_null(strstr(r.err, "one example per line"));
    assert_non_null(strstr(r.out, "held-out 10%"));
    run_free(&r);

    /* every number is one token, with or without its leading space */
    r = run(NULL, "tokenize -m %s --pieces --text '7 12 99 0 45'", model);
    assert_int_equal(r.status, 0);
    assert_string_equal(trim(r.out), "\"7\" \" 12\" \" 99\" \" 0\" \" 45\"");
    run_free(&r);

    const double floor_nats = 7.0 / 15.0 * log(100.0);
    r = run(NULL, "eval -m %s --examples --heldout 0.1 --json -q %s", model, data);
    assert_int_equal(r.status, 0);
    double nats = json_number(r.out, "nats_per_token");
    print_message("held-out loss %.4f nats/token (floor %.4f)\n", nats, floor_nats);
    assert_true(fabs(nats - floor_nats) < 0.05);
    /* the last 10% of the bytes, moved back to a line start: about 800 lines of 15 predictions */
    int scored = (int)json_number(r.out, "scored");
    assert_int_equal(scored % 15, 0);
    assert_in_range(scored / 15, 780, 820);
    run_free(&r);

    /* greedy continuation of held-out prompts is the mirror image */
    FILE *f = fopen(data, "r");
    char line[256];
    int n_line = 0, reversed = 0, tried = 0;
    while (fgets(line, sizeof line, f)) {
        if (n_line++ < 8000 - 10) continue;
        int v[16];
        assert_int_equal(sscanf(line, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d", &v[0], &v[1], &v[2],
                                &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13],
                                &v[14], &v[15]),
                         16);
        char prompt[64], want[64];
        snprintf(prompt, sizeof prompt, "%d %d %d %d %d %d %d %d", v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        snprintf(want, sizeof want, " %d %d %d %d %d %d %d %d", v[8], v[9], v[10], v[11], v[12], v[13], v[14],
                 v[15]);
        r = run(NULL, "generate -m %s --temperature 0 -n 8 -p %s", model, sq(prompt));
        assert_int_equal(r.status, 0);
        tried++;
        if (strcmp(r.out, want) == 0) reversed++;
        else print_message("prompt '%s': got '%s', want '%s'\n", prompt, r.out, want);
        run_free(&r);
    }
    fclose(f);
    assert_int_equal(tried, 10);
    assert_int_equal(reversed, 10);

    /* Another GPT-2 implementation reads the exported directory: the numpy
     * reference (own safetensors reader, Hugging Face Conv1D conventions)
     * predicts the mirror: from position 7 on, its argmax is the next token. */
    r = run(NULL, "tokenize -m %s --text '3 14 15 92 65 35 89 79 79 89 35 65 92 15 14 3'", model);
    assert_int_equal(r.status, 0);
    char cmd[1024], ref_out[512] = "";
    snprintf(cmd, sizeof cmd, "%s tests/ref/gpt2_ref.py %s %s", getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3",
             model, trim(r.out));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(ref_out, sizeof ref_out, p));
    assert_int_equal(pclose(p), 0);
    int ids[16], pred[16];
    char *s = r.out, *e;
    for (int i = 0; i < 16; i++, s = e) ids[i] = (int)strtol(s, &e, 10);
    s = ref_out;
    for (int i = 0; i < 16; i++, s = e) pred[i] = (int)strtol(s, &e, 10);
    for (int pos = 7; pos < 15; pos++) assert_int_equal(pred[pos], ids[pos + 1]);
    run_free(&r);
    rm_rf(dir);
}

static void test_train_errors(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char data[256], model[256], bad[256];
    snprintf(data, sizeof data, "%s/reverse.txt", dir);
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(bad, sizeof bad, "%s/uneven.txt", dir);
    write_reverse_data(data, 2000, 1);

    run_result r = run(NULL, "train -o %s %s", model, data); /* no --tokenizer */
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "usage"));
    run_free(&r);
    r = run(NULL, "train --tokenizer %s/missing -o %s %s", dir, model, data);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "missing"));
    run_free(&r);

    r = run(NULL, "train-tokenizer --vocab-size 512 -o %s %s", model, data);
    assert_int_equal(r.status, 0);
    run_free(&r);
    FILE *f = fopen(bad, "w");
    fputs("1 2 3 4\n5 6 7 8\n9 10 11\n", f);
    fclose(f);
    r = run(NULL, "train --examples --tokenizer %s -o %s --val-fraction 0 %s", model, model, bad);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "uneven.txt:3: 3 tokens, but the examples before it have 4"));
    run_free(&r);

    /* a warmup window that does not divide the block, or on examples: refused, saying why */
    r = run(NULL, "train --tokenizer %s -o %s --layers 1 --heads 2 --embd 16 --block 16 --short-block 5 "
                  "--short-steps 2 %s", model, model, data);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "short_block 5 must divide block_size 16")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    r = run(NULL, "train --examples --tokenizer %s -o %s --layers 1 --heads 2 --embd 16 --block 16 --short-block 4 "
                  "--short-steps 2 %s", model, model, data);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "warmup needs a token stream, not examples")) fail_msg("stderr: %s", r.err);
    run_free(&r);

    /* a short run, then a resume on other data is refused */
    r = run(NULL,
            "train --examples --tokenizer %s -o %s --layers 1 --heads 2 --embd 16 --block 16 --batch 4 --steps 3 "
            "--eval-every 2 --threads 1 %s",
            model, model, data);
    if (r.status != 0) fail_msg("train failed: %s", r.err);
    run_free(&r);
    write_reverse_data(data, 2000, 2);
    r = run(NULL, "train --examples --resume --tokenizer %s -o %s --steps 5 %s", model, model, data);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "trained on other data"));
    run_free(&r);
    write_reverse_data(data, 2000, 1);
    r = run(NULL, "train --examples --resume --tokenizer %s -o %s --steps 2 %s", model, model, data);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "below the 3 steps already taken"));
    run_free(&r);
    r = run(NULL, "train --examples --resume --tokenizer %s -o %s --steps 5 --eval-every 1000 %s", model, model, data);
    if (r.status != 0) fail_msg("resume failed: %s", r.err);
    assert_non_null(strstr(r.err, "resumed"));
    assert_non_null(strstr(r.err, "step      5/5"));
    run_free(&r);

    /* a checkpoint with a valid checksum but step 2^64-1 (once "resumed at
       step -1", trained to NaN and exported over the model): refused, and the
       model and checkpoint on disk keep their bytes */
    char ckpt[300], weights[300];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.bin", model);
    snprintf(weights, sizeof weights, "%s/model.safetensors", model);
    size_t ck_len, w_len, len;
    char *ck = read_file(ckpt, &ck_len), *w = read_file(weights, &w_len);
    const uint64_t u64max = UINT64_MAX;
    ckpt_craft(ckpt, ck, ck_len, CKPT_FIELD0 + CKPT_STEP_FIELD * 8, &u64max, 8);
    char *crafted = read_file(ckpt, &len);
    r = run(NULL, "train --examples --resume --tokenizer %s -o %s --steps 6 %s", model, model, data);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "step = 18446744073709551615 is out of range")) fail_msg("stderr: %s", r.err);
    assert_null(strstr(r.err, "resumed"));
    run_free(&r);
    char *now = read_file(weights, &len);
    assert_true(len == w_len && memcmp(now, w, len) == 0);
    free(now);
    now = read_file(ckpt, &len);
    assert_true(len == ck_len && memcmp(now, crafted, len) == 0);
    free(now), free(crafted), free(ck), free(w);

    /* a truncated checkpoint: the reason, not a crash */
    assert_int_equal(truncate(ckpt, 1000), 0);
    r = run(NULL, "train --examples --resume --tokenizer %s -o %s --steps 6 %s", model, model, data);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "truncated"));
    run_free(&r);
    rm_rf(dir);
}

/* Runs python3's json module on path: prints the values of keys, one per
 * line (None for null), or fails the test if the file is not JSON. */
static char *python_json(const char *path, const char *keys) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import json, sys\n"
             "d = json.load(open(sys.argv[1], encoding=\"utf-8\"))\n"
             "for k in sys.argv[2].split():\n"
             "    v = d\n"
             "    for part in k.split(\".\"): v = v.get(part) if isinstance(v, dict) else None\n"
             "    print(v)' %s %s",
             getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3", sq(path), sq(keys));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    if (pclose(p) != 0) fail_msg("%s is not JSON to python3 (%s)", path, out);
    return out;
}

/* training.json is JSON (read by python3): the data path with quotes and
 * backslashes escaped, and with --val-fraction 0 the held-out figures null
 * with the reason (they were printed as nan). */
static void test_training_json(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char sub[300], data[400], model[300], json[400];
    snprintf(sub, sizeof sub, "%s/we\"ird\\dir", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(data, sizeof data, "%s/data.txt", sub);
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(json, sizeof json, "%s/training.json", model);
    write_reverse_data(data, 400, 3);
    run_result r = run(NULL, "train-tokenizer --vocab-size 300 -o %s %s", sq(model), sq(data));
    assert_int_equal(r.status, 0);
    run_free(&r);
    r = run(NULL,
            "train --tokenizer %s -o %s --layers 1 --heads 2 --embd 16 --block 16 --batch 4 --steps 3 --threads 1 "
            "--val-fraction 0 %s",
            sq(model), sq(model), sq(data));
    if (r.status != 0) fail_msg("train failed: %s", r.err);
    run_free(&r);
    char *out = python_json(json, "data steps val_tokens final_val_loss_estimate heldout_nats_per_token "
                                  "heldout_bits_per_byte null_reasons.heldout_nats_per_token final_train_loss");
    char want[1024];
    snprintf(want, sizeof want, "%s\n3\n0\nNone\nNone\nNone\n--val-fraction 0: nothing is held out\n", data);
    if (strncmp(out, want, strlen(want)) != 0) fail_msg("python3 read:\n%s\nexpected to start with:\n%s", out, want);
    double train_loss = strtod(out + strlen(want), NULL);
    assert_true(train_loss > 1 && train_loss < 10);

    /* with a held-out split: numbers, and no reasons; a sequence-length warmup and attention dropout recorded */
    r = run(NULL, "train --force --tokenizer %s -o %s --layers 1 --heads 2 --embd 16 --block 16 --batch 4 --steps 3 "
                  "--short-block 4 --short-steps 2 --short-offsets 0.5 --attn-dropout 0.25 --threads 1 %s",
            sq(model), sq(model), sq(data));
    if (r.status != 0) fail_msg("train failed: %s", r.err);
    if (!strstr(r.err, "the first 2 steps: 16 x 4 tokens")) fail_msg("no warmup line in: %s", r.err);
    if (!strstr(r.err, "a fraction 0.5 of the warmup's windows start at random position rows 0..12"))
        fail_msg("no offsets line in: %s", r.err);
    run_free(&r);
    out = python_json(json, "null_reasons short_block short_steps short_offsets attn_dropout val_fraction "
                            "heldout_nats_per_token");
    assert_true(strncmp(out, "None\n4\n2\n0.5\n0.25\n0.1\n", 22) == 0);
    double nats = strtod(out + 22, NULL);
    assert_true(nats > 1 && nats < 10);
    rm_rf(dir);
}

/* "data: N training tokens" from a run's stderr, or -1. */
static long train_tokens(const char *err) {
    const char *at = strstr(err, "data: ");
    return at ? strtol(at + 6, NULL, 10) : -1;
}

/* Trains model on data with shape and opts; returns the sha256 of its
 * exported weights (malloc'd), and the run's output in *keep if asked. */
static char *train_weights(const char *model, const char *opts, const char *shape, const char *data,
                           run_result *keep) {
    run_result r = run(NULL, "train --force --tokenizer %s -o %s %s %s --dtype f32 %s", model, model, shape, opts, data);
    if (r.status != 0) fail_msg("train %s failed: %s", opts, r.err);
    if (keep) *keep = r;
    else run_free(&r);
    r = run_script("sha256sum %s/model.safetensors", model);
    assert_int_equal(r.status, 0);
    char *sum = strndup(r.out, 64);
    run_free(&r);
    return sum;
}

/* --bpe-dropout: K segmentations of the training split, together longer than
 * K usual ones (on this data, at p 0.2, by far; not so for every text) and
 * shorter than K times its bytes; recorded in training.json; a resume needs
 * the same options; --examples refuses it, as does an empty split. */
static void test_bpe_dropout(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char data[300], model[300], json[400];
    snprintf(data, sizeof data, "%s/data.txt", dir);
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(json, sizeof json, "%s/training.json", model);
    write_reverse_data(data, 300, 4);
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    run_result r = run(NULL, "train-tokenizer --vocab-size 400 -o %s %s", model, data);
    assert_int_equal(r.status, 0);
    run_free(&r);
    const char *shape = "--layers 1 --heads 2 --embd 16 --block 16 --batch 4 --threads 1 --eval-every 2";
    r = run(NULL, "train --tokenizer %s -o %s %s --steps 1 %s", model, model, shape, data);
    if (r.status != 0) fail_msg("train failed: %s", r.err);
    const long usual = train_tokens(r.err);
    run_free(&r);
    assert_true(usual > 1000);
    char *out = python_json(json, "bpe_dropout bpe_copies");
    assert_string_equal(out, "0\n0\n");

    r = run(NULL, "train --force --tokenizer %s -o %s %s --steps 2 --bpe-dropout 0.2 --bpe-copies 3 %s", model, model, shape,
            data);
    if (r.status != 0) fail_msg("train failed: %s", r.err);
    const long three = train_tokens(r.err);
    if (!strstr(r.err, "3 segmentations of the split with BPE-dropout 0.2")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    if (!(three > 3 * usual && three < 3 * (long)st.st_size))
        fail_msg("3 copies with dropout: %ld tokens; the usual split %ld, its bytes < %ld", three, usual,
                 (long)st.st_size);
    out = python_json(json, "bpe_dropout bpe_copies train_tokens bpe_dropout_steps");
    char want[64];
    snprintf(want, sizeof want, "0.2\n3\n%ld\n2\n", three);
    assert_string_equal(out, want);

    /* the same options resume; another dropout or seed is other data */
    r = run(NULL, "train --resume --tokenizer %s -o %s --steps 3 --bpe-dropout 0.3 --bpe-copies 3 %s", model, model,
            data);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "--bpe-copies, --bpe-dropout-steps and --seed are needed")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    r = run(NULL, "train --resume --tokenizer %s -o %s --steps 3 --bpe-dropout 0.2 --bpe-copies 3 --seed 7 %s", model,
            model, data);
    assert_int_equal(r.status, 1);
    run_free(&r);
    r = run(NULL, "train --resume --tokenizer %s -o %s --steps 3 --bpe-dropout 0.2 --bpe-copies 3 %s", model, model,
            data);
    if (r.status != 0) fail_msg("resume failed: %s", r.err);
    assert_non_null(strstr(r.err, "resumed"));
    run_free(&r);

    /* --bpe-dropout-steps: none is the usual run, all of them the dropout run, weight for weight */
    char *usual_w = train_weights(model, "--steps 2", shape, data, NULL);
    char *none_w = train_weights(model, "--steps 2 --bpe-dropout 0.2 --bpe-dropout-steps 0", shape, data, &r);
    char cut[96];
    snprintf(cut, sizeof cut, "after step 0: the usual segmentation (%ld tokens)", usual);
    if (!strstr(r.err, cut)) fail_msg("no '%s' in: %s", cut, r.err);
    run_free(&r);
    char *all_w = train_weights(model, "--steps 2 --bpe-dropout 0.2", shape, data, NULL);
    char *two_w = train_weights(model, "--steps 2 --bpe-dropout 0.2 --bpe-dropout-steps 2", shape, data, NULL);
    char *one_w = train_weights(model, "--steps 2 --bpe-dropout 0.2 --bpe-dropout-steps 1", shape, data, NULL);
    assert_string_equal(usual_w, none_w);
    assert_string_equal(all_w, two_w);
    assert_string_not_equal(usual_w, all_w);
    assert_string_not_equal(one_w, all_w);
    assert_string_not_equal(one_w, usual_w);
    free(usual_w), free(none_w), free(all_w), free(two_w), free(one_w);
    out = python_json(json, "bpe_dropout_steps");
    assert_string_equal(out, "1\n");
    r = run(NULL, "train --tokenizer %s -o %s %s --bpe-dropout-steps 1 %s", model, model, shape, data);
    assert_int_equal(r.status, 2);
    if (!strstr(r.err, "--bpe-dropout-steps: no --bpe-dropout P")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    r = run(NULL, "train --tokenizer %s -o %s %s --bpe-copies 3 %s", model, model, shape, data);
    assert_int_equal(r.status, 2);
    if (!strstr(r.err, "--bpe-copies: no --bpe-dropout P")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    char empty[400];
    snprintf(empty, sizeof empty, "%s/empty.txt", dir);
    FILE *ef = fopen(empty, "w");
    assert_non_null(ef);
    fputs("x", ef); /* the training split: nothing */
    fclose(ef);
    r = run(NULL, "train --force --tokenizer %s -o %s %s --bpe-dropout 0.1 --bpe-copies 3 %s", model, model, shape, empty);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "hold no whole sequence")) fail_msg("stderr: %s", r.err);
    run_free(&r);

    r = run(NULL, "train --examples --tokenizer %s -o %s %s --bpe-dropout 0.1 %s", model, model, shape, data);
    assert_int_equal(r.status, 2);
    if (!strstr(r.err, "--bpe-dropout and --examples")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    r = run(NULL, "train --tokenizer %s -o %s %s --bpe-dropout 0.95 %s", model, model, shape, data);
    assert_int_equal(r.status, 2);
    run_free(&r);
    rm_rf(dir);
}

/* Trained with GPT-2's own tokenizer as shipped (encoder.json and vocab.bpe,
 * tokenizers/gpt2), the model directory gets those files as vocab.json and
 * merges.txt, byte for byte, and opens with GPT-2's ids ("Hello, world":
 * 15496 11 995). It used to stop after training, looking for vocab.json. */
static void test_gpt2_tokenizer_names(void **state) {
    (void)state;
    char *dir = tmpdir_new(), data[128], out[128];
    snprintf(data, sizeof data, "%s/data.txt", dir);
    snprintf(out, sizeof out, "%s/model", dir);
    FILE *f = fopen(data, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++) fprintf(f, "Hello, world. The cat sat on the mat number %d.\n", i);
    fclose(f);
    run_result r = run(NULL, "train --tokenizer tokenizers/gpt2 -o %s --layers 1 --heads 1 --embd 16 --block 16 --steps 1 "
                       "--batch 1 --eval-every 1000 --eval-batches 1 --threads 1 %s", out, data);
    if (r.status != 0) fail_msg("train: exit %d: %s", r.status, r.err);
    run_free(&r);
    static const char *const names[][2] = {{"encoder.json", "vocab.json"}, {"vocab.bpe", "merges.txt"}};
    for (int i = 0; i < 2; i++) {
        char from[256], to[256];
        snprintf(from, sizeof from, "tokenizers/gpt2/%s", names[i][0]);
        snprintf(to, sizeof to, "%s/%s", out, names[i][1]);
        size_t a, b;
        char *x = read_file(from, &a), *y = read_file(to, &b);
        assert_int_equal(a, b);
        assert_memory_equal(x, y, a);
        free(x), free(y);
    }
    r = run(NULL, "tokenize -m %s --text 'Hello, world'", out);
    assert_int_equal(r.status, 0);
    assert_string_equal(trim(r.out), "15496 11 995");
    run_free(&r);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_training_json),
        cmocka_unit_test(test_gpt2_tokenizer_names),
        cmocka_unit_test(test_bpe_dropout),
        cmocka_unit_test(test_train_errors),
        cmocka_unit_test(test_reverse_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
