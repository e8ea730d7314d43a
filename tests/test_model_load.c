/* test_model_load.c — the loader accepts good model directories and rejects every
 * malformed one (tests/ref/make_model_fixtures.py writes them under bad/) with
 * the right status and a message naming the file and the defect. */
#include <sys/stat.h>

#include "gpt2.h"
#include "test_util.h"

typedef struct {
    char name[64], status[16], file[64], keyword[160];
} bad_case;

static gpt2_status status_from_name(const char *s) {
    if (!strcmp(s, "io")) return GPT2_ERR_IO;
    if (!strcmp(s, "format")) return GPT2_ERR_FORMAT;
    if (!strcmp(s, "config")) return GPT2_ERR_CONFIG;
    if (!strcmp(s, "tokenizer")) return GPT2_ERR_TOKENIZER;
    fail_msg("cases.tsv: unknown status '%s'", s);
    return GPT2_OK;
}

static void test_bad_case(void **state) {
    const bad_case *c = *state;
    gpt2_model *m = (gpt2_model *)0x1;
    gpt2_error err;
    gpt2_status st = gpt2_model_load(fixture_path("bad/%s", c->name), &m, &err);
    print_message("%-24s -> %s\n", c->name, err.msg);
    assert_null(m);
    if (st != status_from_name(c->status))
        fail_msg("%s: status '%s', expected '%s' (message: %s)", c->name, gpt2_status_name(st), c->status, err.msg);
    assert_int_equal(err.status, st);
    if (!strstr(err.msg, c->file)) fail_msg("%s: message does not name %s: %s", c->name, c->file, err.msg);
    char keys[sizeof c->keyword];
    snprintf(keys, sizeof keys, "%s", c->keyword);
    for (char *k = keys, *next; k; k = next) { /* "a && b": each must be there */
        if ((next = strstr(k, " && "))) *next = '\0', next += 4;
        if (!strstr(err.msg, k)) fail_msg("%s: message lacks '%s': %s", c->name, k, err.msg);
    }
    for (const char *ch = err.msg; *ch; ch++) /* one clean line: no raw control bytes */
        if ((unsigned char)*ch < 0x20 || *ch == 0x7f) fail_msg("%s: control byte 0x%02x in message", c->name, *ch);
}

/* A FIFO or a device in place of any file is refused at once (it used to
 * block forever, or read /dev/zero until memory ran out). */
static void test_special_files(void **state) {
    (void)state;
    static const char *files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
    for (int i = 0; i < 4; i++) {
        for (int dev = 0; dev < 2; dev++) {
            char dir[] = "/tmp/gptscope-special-XXXXXX", path[4200];
            assert_non_null(mkdtemp(dir));
            for (int k = 0; k < 4; k++) {
                snprintf(path, sizeof path, "%s/%s", dir, files[k]);
                if (k == i && dev) {
                    assert_int_equal(symlink("/dev/zero", path), 0);
                } else if (k == i) {
                    assert_int_equal(mkfifo(path, 0600), 0);
                } else {
                    const char *src = fixture_path("models/tiny-f32/%s", files[k]);
                    char *abs = realpath(src, NULL);
                    assert_non_null(abs);
                    assert_int_equal(symlink(abs, path), 0);
                    free(abs);
                }
            }
            gpt2_model *m;
            gpt2_error err;
            gpt2_status st = gpt2_model_load(dir, &m, &err);
            print_message("%-18s as %-9s -> %s\n", files[i], dev ? "/dev/zero" : "a FIFO", err.msg);
            assert_int_equal(st, GPT2_ERR_IO);
            assert_non_null(strstr(err.msg, files[i]));
            assert_non_null(strstr(err.msg, "regular file"));
            for (int k = 0; k < 4; k++) {
                snprintf(path, sizeof path, "%s/%s", dir, files[k]);
                unlink(path);
            }
            rmdir(dir);
        }
    }
}

static void test_good_models(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/tiny-f16"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_config *c = gpt2_model_config(m);
    assert_int_equal(c->n_layer, 2);
    assert_int_equal(c->n_head, 4);
    assert_int_equal(c->n_embd, 64);
    assert_int_equal(c->n_ctx, 64);
    assert_int_equal(gpt2_model_dtype(m), GPT2_DTYPE_F16);
    assert_string_equal(gpt2_model_name(m), "tiny-f16");
    assert_non_null(gpt2_model_tokenizer(m));
    assert_int_equal(gpt2_tokenizer_n_vocab(gpt2_model_tokenizer(m)), c->n_vocab);
    /* weight bytes: 16-bit matrices + float vectors, no position table */
    size_t C = 64, V = (size_t)c->n_vocab;
    size_t mats = 2 * (V * C + 2 * (C * 3 * C + C * C + 2 * C * 4 * C));
    size_t vecs = 4 * (2 * (C * 9 + 4 * C) + 2 * C);
    assert_int_equal(gpt2_model_weight_bytes(m), mats + vecs);
    gpt2_model_free(m);
    if (gpt2_model_load(fixture_path("models/tiny-prefix-lmhead/"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(gpt2_model_config(m)->n_layer, 3);
    assert_string_equal(gpt2_model_name(m), "tiny-prefix-lmhead");
    gpt2_model_free(m);
    assert_int_equal(gpt2_model_load(fixture_path("no-such-dir"), &m, &err), GPT2_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(err.msg, "no-such-dir"));
}

/* Logits after evaluating a fixed prompt, into out (n_vocab floats). */
static void prompt_logits(const gpt2_model *m, float *out) {
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, NULL), GPT2_OK);
    const int32_t ids[5] = {3, 14, 15, 92, 65};
    assert_int_equal(gpt2_context_eval(ctx, ids, 5, NULL), GPT2_OK);
    int32_t next = 35;
    assert_int_equal(gpt2_context_eval(ctx, &next, 1, NULL), GPT2_OK);
    memcpy(out, gpt2_context_logits(ctx), (size_t)gpt2_model_config(m)->n_vocab * sizeof(float));
    gpt2_context_free(ctx);
}

/* Tensors at odd addresses (a header one byte longer shifts the data
 * section): the loader copies them out of the map before packing, and the
 * model computes the same logits, bit for bit, as the aligned original. */
static void test_misaligned_tensors(void **state) {
    (void)state;
    static const char *dtypes[] = {"tiny-f32", "tiny-f16", "tiny-bf16"};
    for (int d = 0; d < 3; d++) {
        char dir[] = "/tmp/gptscope-misaligned-XXXXXX", path[4200];
        assert_non_null(mkdtemp(dir));
        copy_fixture_model(dtypes[d], dir, 0);
        size_t len;
        unsigned char *st = read_file(fixture_path("models/%s/model.safetensors", dtypes[d]), &len);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | st[i];
        assert_true(8 + hlen <= len);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        unsigned char grown[8];
        for (int i = 0; i < 8; i++) grown[i] = (unsigned char)((hlen + 1) >> (8 * i));
        fwrite(grown, 1, 8, f);
        fwrite(st + 8, 1, hlen, f);
        fputc(' ', f); /* JSON allows trailing whitespace */
        fwrite(st + 8 + hlen, 1, len - 8 - hlen, f);
        fclose(f);
        free(st);
        gpt2_model *aligned, *shifted;
        gpt2_error err;
        if (gpt2_model_load(fixture_path("models/%s", dtypes[d]), &aligned, &err) != GPT2_OK) fail_msg("%s", err.msg);
        if (gpt2_model_load(dir, &shifted, &err) != GPT2_OK) fail_msg("%s", err.msg);
        const int V = gpt2_model_config(aligned)->n_vocab;
        float *want = malloc((size_t)V * sizeof(float)), *got = malloc((size_t)V * sizeof(float));
        prompt_logits(aligned, want);
        prompt_logits(shifted, got);
        assert_memory_equal(want, got, (size_t)V * sizeof(float));
        free(want), free(got);
        gpt2_model_free(aligned);
        gpt2_model_free(shifted);
        remove_model_copy(dir);
    }
}

/* gpt2_text_escape, the one escaper for messages: the forms its header
 * promises, written out by hand. */
static void test_text_escape(void **state) {
    (void)state;
    static const struct { const char *in; size_t n; const char *want; } cases[] = {
        {"plain \xc3\xbc \xe2\x82\xac \xf0\x9f\x98\x80 back\\slash", 0, "plain \xc3\xbc \xe2\x82\xac \xf0\x9f\x98\x80 back\\slash"},
        {"\x1b[31mred\x1b[0m", 0, "\\x1b[31mred\\x1b[0m"},
        {"a\nb\tc\rd\a\x7f", 0, "a\\nb\\tc\\rd\\x07\\x7f"},
        {"\x1b]0;x\a", 0, "\\x1b]0;x\\x07"},
        {"caf\xe9 \xff", 0, "caf\\xe9 \\xff"},                /* Latin-1 and a byte UTF-8 never uses */
        {"\xc2\x9b" "2J \xc2\xa0", 0, "\\xc2\\x9b" "2J \xc2\xa0"}, /* C1 CSI escaped, U+00A0 kept */
        {"\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80", 0, "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80"},
        {"cut \xe2\x82", 0, "cut \\xe2\\x82"},                /* a character cut short */
        {"a\0b", 3, "a\\x00b"},
    };
    char out[256], again[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = cases[i].n ? cases[i].n : strlen(cases[i].in);
        gpt2_text_escape(cases[i].in, n, out, sizeof out);
        if (strcmp(out, cases[i].want) != 0) fail_msg("case %zu: got '%s', want '%s'", i, out, cases[i].want);
        gpt2_text_escape(out, strlen(out), again, sizeof again); /* escaping twice changes nothing */
        assert_string_equal(again, out);
    }
    /* too long: cut between escapes, "..." appended, within cap */
    gpt2_text_escape("\x1b\x1b\x1b\x1b\x1b", 5, out, 16);
    assert_string_equal(out, "\\x1b\\x1b\\x1b...");
    gpt2_text_escape("abcdefghij", 10, out, 8);
    assert_string_equal(out, "abcd...");
    gpt2_text_escape("abc", 3, out, 4); /* exactly fits: no cut */
    assert_string_equal(out, "abc");
    gpt2_text_escape("\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 9, out, 9); /* never half a character */
    assert_string_equal(out, "\xe2\x82\xac...");
}

/* A model directory whose name holds a newline and terminal escapes: the
 * message names it with those bytes shown, never raw. */
static void test_hostile_dir_name(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    assert_int_equal(gpt2_model_load("/nonexistent/evil\n\x1b[31mred\x1b]0;title\a\xff", &m, &err), GPT2_ERR_IO);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "/nonexistent/evil\\n\\x1b[31mred\\x1b]0;title\\x07\\xff"));
    for (const char *ch = err.msg; *ch; ch++)
        if ((unsigned char)*ch < 0x20 || *ch == 0x7f) fail_msg("control byte 0x%02x in message", *ch);
}

/* What a load's progress and cancel callbacks saw. */
typedef struct {
    int calls, last_done, total, cancel_calls;
    int stop_progress_at; /* progress returns 1 on this call (1-based); 0 never */
    int stop_cancel_at;   /* cancel returns 1 on this call; 0 never */
} load_watch;

static int watch_progress(void *ud, int done, int total) {
    load_watch *w = ud;
    w->calls++;
    assert_true(done > w->last_done && done <= total); /* strictly forward, within the total */
    assert_true(w->total == 0 || w->total == total);
    w->last_done = done, w->total = total;
    return w->calls == w->stop_progress_at;
}

static int watch_cancel(void *ud) {
    load_watch *w = ud;
    return ++w->cancel_calls == w->stop_cancel_at;
}

/* gpt2_model_load_with: progress runs forward to every weight matrix (wte
 * and the four of each of 2 layers: 9; the head is tied), any thread count
 * gives the same weights bit for bit, and a cancel from either callback
 * returns GPT2_CANCELLED with no model (ASan: nothing leaked). */
static void test_load_params(void **state) {
    (void)state;
    const char *dir = fixture_path("models/tiny-f32");
    gpt2_model *m, *one;
    gpt2_error err;
    load_watch w = {0};
    gpt2_model_params p = gpt2_model_default_params();
    assert_int_equal(p.n_threads, 0);
    assert_null(p.progress);
    assert_null(p.gpt2_tokenizer_dir);
    p.user_data = &w, p.progress = watch_progress, p.cancel = watch_cancel;
    if (gpt2_model_load_with(dir, p, &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(w.total, 1 + 4 * 2);
    assert_int_equal(w.last_done, w.total);
    assert_true(w.cancel_calls >= 1);
    gpt2_model_params p1 = gpt2_model_default_params();
    p1.n_threads = 1;
    if (gpt2_model_load_with(dir, p1, &one, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const int V = gpt2_model_config(m)->n_vocab;
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    prompt_logits(m, a), prompt_logits(one, b);
    assert_memory_equal(a, b, (size_t)V * sizeof *a);
    free(a), free(b);
    gpt2_model_free(m), gpt2_model_free(one);
    for (int by_cancel = 0; by_cancel < 2; by_cancel++) {
        load_watch c = {.stop_progress_at = by_cancel ? 0 : 1, .stop_cancel_at = by_cancel ? 1 : 0};
        p.user_data = &c;
        assert_int_equal(gpt2_model_load_with(dir, p, &m, &err), GPT2_CANCELLED);
        assert_null(m);
        assert_non_null(strstr(err.msg, "loading cancelled after"));
    }
    p1.n_threads = -1;
    assert_int_equal(gpt2_model_load_with(dir, p1, &m, &err), GPT2_ERR_INVALID_ARG);
    assert_null(m);
}

int main(void) {
    char *tsv = read_file(fixture_path("bad/cases.tsv"), NULL);
    bad_case cases[128];
    struct CMUnitTest tests[134];
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line && n < 128; line = strtok(NULL, "\n")) {
        bad_case *c = &cases[n];
        if (line[0] == '#' || sscanf(line, "%63[^\t]\t%15[^\t]\t%63[^\t]\t%159[^\n]", c->name, c->status, c->file,
                                     c->keyword) != 4)
            continue;
        tests[n] = (struct CMUnitTest){.name = c->name, .test_func = test_bad_case, .initial_state = c};
        n++;
    }
    free(tsv);
    if (n < 25) {
        fprintf(stderr, "bad/cases.tsv lists %d cases, expected at least 25\n", n);
        return 1;
    }
    tests[n++] = (struct CMUnitTest){.name = "good_models", .test_func = test_good_models};
    tests[n++] = (struct CMUnitTest){.name = "special_files", .test_func = test_special_files};
    tests[n++] = (struct CMUnitTest){.name = "misaligned_tensors", .test_func = test_misaligned_tensors};
    tests[n++] = (struct CMUnitTest){.name = "text_escape", .test_func = test_text_escape};
    tests[n++] = (struct CMUnitTest){.name = "hostile_dir_name", .test_func = test_hostile_dir_name};
    tests[n++] = (struct CMUnitTest){.name = "load_params", .test_func = test_load_params};
    return _cmocka_run_group_tests("model_load", tests, (size_t)n, NULL, NULL);
}
