/* test_cli.c — the gptscope binary end to end: published tokenizer ids, the
 * subcommands' output against the numpy/Python references (tests/ref/
 * make_cli_fixtures.py), exit statuses, and one clean error line for every
 * malformed model directory. $GPTSCOPE_BIN names the binary under test. */
#include <cjson/cJSON.h>
#include <math.h>

#include "gpt2.h"
#include "test_util.h"
#include "cli_run.h"

static void test_usage_errors(void **state) {
    (void)state;
    run_result r = run(NULL, "");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "usage"));
    run_free(&r);
    r = run(NULL, "frobnicate");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unknown command 'frobnicate'"));
    run_free(&r);
    r = run(NULL, "generate -m %s", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 2); /* no -p */
    run_free(&r);
    r = run(NULL, "generate -m %s -p hi -n abc", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "-n: expected an integer"));
    run_free(&r);
    r = run(NULL, "generate -m %s -p hi --top-p 1.5", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 2);
    run_free(&r);
    r = run(NULL, "attention -m %s -p hi --layer 9 --head 0", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "2 layers (0..1) of 4 heads (0..3)"));
    run_free(&r);
    r = run(NULL, "generate -m %s -p hi --quantize q3", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--quantize: expected q8, q4, q8_0, q4_0 or q4_k, found 'q3'"));
    run_free(&r);
    r = run(NULL, "generate -m %s -p hi --threads 0", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--threads: expected an integer in [1, 256], found '0'"));
    run_free(&r);
    r = run(NULL, "bench --quantize q8");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--quantize needs -m"));
    run_free(&r);
    r = run(NULL, "--help");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "tokenize"));
    run_free(&r);
}

/* COMMAND --help: the usage on stdout, status 0, nothing on stderr. */
static void test_help(void **state) {
    (void)state;
    static const char *cmds[] = {"tokenize", "generate", "topk", "attention", "eval",
                                 "bench", "train", "train-tokenizer", "chat"};
    run_result top = run(NULL, "--help");
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char want[64];
        snprintf(want, sizeof want, "  %s ", cmds[i]);
        if (!strstr(top.out, want)) continue; /* chat: built only with ncursesw and readline */
        run_result r = run(NULL, "%s --help", cmds[i]);
        snprintf(want, sizeof want, "usage: gptscope %s ", cmds[i]);
        if (r.status != 0 || strncmp(r.out, want, strlen(want)) != 0 || r.err[0])
            fail_msg("%s --help: status %d, stdout '%.60s', stderr '%s'", cmds[i], r.status, r.out, r.err);
        run_free(&r);
    }
    run_free(&top);
}

/* A usage error says what is missing or wrong (then the usage), on stderr, status 2. */
static void test_usage_errors_say_what(void **state) {
    (void)state;
    const char *m = fixture_path("models/tiny-f32");
    static const struct { const char *args, *want; } cases[] = {
        {"attention -m %s -p x --layer 0", "gptscope: attention needs --head H (or --mean)\nusage: gptscope attention"},
        {"attention -m %s --layer 0", "attention needs -p PROMPT and --head H"},
        {"attention -m %s", "attention needs -p PROMPT, --layer L and --head H"},
        {"topk -m %s", "topk needs -p PROMPT"},
        {"generate -m %s -n 3", "generate needs -p PROMPT"},
        {"eval -m %s", "eval needs a FILE to score"},
        {"eval -m %s a.txt b.txt", "eval: unexpected argument 'b.txt' (a FILE to score, one only)"},
        {"tokenize -m %s stray", "tokenize: unexpected argument 'stray'"},
        {"topk -m %s -p x --bogus", "topk: unknown option '--bogus'"},
        {"topk -m %s -p x -Z", "topk: unknown option '-Z'"},
        {"topk -m %s -p", "topk: option '-p' needs a value"},
        {"attention -m %s -p x --layer 0 --head", "attention: option '--head' needs a value"},
        {"train-tokenizer corpus.txt", "train-tokenizer needs --vocab-size N and -o DIR"},
        {"train -o out corpus.txt", "train needs --tokenizer DIR"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run(NULL, cases[i].args, m);
        if (r.status != 2 || !strstr(r.err, cases[i].want) || r.out[0])
            fail_msg("`%s`: status %d, stderr:\n%s\nexpected status 2 and '%s'", cases[i].args, r.status, r.err,
                     cases[i].want);
        run_free(&r);
    }
}

/* Values out of range are refused with the range, never clamped; a directory
 * given as a file says it is one (it said "read error"). */
static void test_refusals_say_why(void **state) {
    (void)state;
    const char *m = fixture_path("models/tiny-f32");
    run_result r = run(NULL, "generate -m %s -p x -n 1 --seed 99999999999999999999999", m);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--seed: expected an integer in [0, 18446744073709551615], found "
                                  "'99999999999999999999999'"));
    run_free(&r);
    r = run(NULL, "generate -m %s -p x -n 1 --seed -1", m);
    assert_int_equal(r.status, 2);
    run_free(&r);
    /* the largest seed is taken: same ids twice */
    run_result a = run(NULL, "generate -m %s -p x -n 5 --ids --seed 18446744073709551615", m);
    run_result b = run(NULL, "generate -m %s -p x -n 5 --ids --seed 18446744073709551615", m);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.out, b.out);
    run_free(&a), run_free(&b);
    r = run(NULL, "eval -m %s %s", m, fixture_path("models"));
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "/models: is a directory, expected a file")) fail_msg("stderr: %s", r.err);
    run_free(&r);
}

/* stderr/stdout text holds no raw control byte but the line ends. */
static void assert_no_raw_controls(const char *what, const char *text) {
    for (const char *c = text; *c; c++)
        if (((unsigned char)*c < 0x20 && *c != '\n') || *c == 0x7f)
            fail_msg("%s: raw control byte 0x%02x in:\n%s", what, *c, text);
}

/* Untrusted bytes never reach the terminal raw: a path with a newline and a
 * colour escape, in errors (from the CLI and from the library) and in eval's
 * report; a theme file's OSC value through chat. */
static void test_hostile_bytes_escaped(void **state) {
    (void)state;
    const char *m = fixture_path("models/tiny-f32");
    const char *evil = "/nonexistent/evil\n\x1b[31mred\x1b]0;t\a";
    run_result r = run(NULL, "eval -m %s %s", m, sq(evil));
    assert_int_equal(r.status, 1);
    assert_no_raw_controls("eval", r.err);
    assert_non_null(strstr(r.err, "/nonexistent/evil\\n\\x1b[31mred\\x1b]0;t\\x07: cannot open"));
    run_free(&r);
    r = run(NULL, "generate -m %s -p x", sq(evil));
    assert_int_equal(r.status, 1);
    assert_no_raw_controls("generate -m", r.err);
    assert_non_null(strstr(r.err, "evil\\n\\x1b[31mred"));
    run_free(&r);
    /* a real file with such a name: eval's report line names it escaped */
    char dir[] = "/tmp/gptscope-evil-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/e\x1b[2Jx\n.txt", dir);
    char *text = read_file(fixture_path("cli/tiny-f32/eval.txt"), NULL);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    r = run(NULL, "eval -q -m %s %s", m, sq(path));
    assert_int_equal(r.status, 0);
    assert_no_raw_controls("eval report", r.out);
    assert_non_null(strstr(r.out, "e\\x1b[2Jx\\n.txt: "));
    run_free(&r);
    unlink(path);
    /* chat refuses a bad theme before it touches the terminal */
    run_result top = run(NULL, "--help");
    if (strstr(top.out, "  chat ")) {
        snprintf(path, sizeof path, "%s/t\x1b[31m.theme", dir);
        f = fopen(path, "wb");
        assert_non_null(f);
        fputs("text = \x1b]0;x\a\n", f);
        fclose(f);
        r = run(NULL, "chat -m %s --theme %s", m, sq(path));
        assert_int_equal(r.status, 1);
        assert_no_raw_controls("chat --theme", r.err);
        assert_non_null(strstr(r.err, "t\\x1b[31m.theme:1: text: '\\x1b]0;x\\x07' is not a colour"));
        run_free(&r);
        unlink(path);
    }
    run_free(&top);
    rmdir(dir);
    free(text);
}

/* tokenize --pieces: bytes that are not valid UTF-8 are told apart (\xe9 is
 * not \xff; both used to print as U+FFFD), control bytes escaped, quotes and
 * backslashes escaped so that the quotes delimit each piece. The ids are the
 * published GPT-2 ones for these bytes (OpenAI's byte-level vocabulary). */
static void test_tokenize_pieces_escaped(void **state) {
    (void)state;
    const char *dir = test_env("GPT2_TOKENIZER_DIR");
    run_result r = run("\xe9\xff\x1b\"\\", "tokenize -m %s", dir);
    /* bytes e9 ff 1b 22 5c, each its own token: GPT-2's byte tokens are ids 0..255 in
     * bytes_to_unicode order ('!'..'~' 0..93, a1..ac 94..105, ae..ff 106..187, then the
     * others from 00: 188..) */
    assert_string_equal(r.out, "165 187 215 1 59\n");
    run_free(&r);
    r = run("\xe9\xff\x1b\"\\", "tokenize -m %s --pieces", dir);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "\"\\xe9\" \"\\xff\" \"\\x1b\" \"\\\"\" \"\\\\\"\n");
    run_free(&r);
    r = run(NULL, "tokenize -m %s --pieces --text 'caf\xc3\xa9 \tx'", dir);
    /* pieces of ids 66 1878 2634 220 197 87 (tests/ref/bpe_ref.py): valid UTF-8 as is */
    assert_string_equal(r.out, "\"c\" \"af\" \"\xc3\xa9\" \" \" \"\\t\" \"x\"\n");
    run_free(&r);
}

/* Published GPT-2 ids (OpenAI's encoder), through argv and through stdin. */
static void test_tokenize_published(void **state) {
    (void)state;
    const char *dir = test_env("GPT2_TOKENIZER_DIR");
    run_result r = run(NULL, "tokenize -m %s --text 'Not all heroes wear capes.'", dir);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "3673 477 10281 5806 1451 274 13\n");
    run_free(&r);
    r = run("Not all heroes wear capes.", "tokenize -m %s", dir);
    assert_string_equal(r.out, "3673 477 10281 5806 1451 274 13\n");
    run_free(&r);
    r = run(NULL, "tokenize -m %s --pieces --text zjqfl", dir);
    assert_string_equal(r.out, "\"z\" \"j\" \"q\" \"fl\"\n");
    run_free(&r);
    r = run(NULL, "tokenize -m %s --text '<|endoftext|>'", dir);
    assert_string_not_equal(trim(r.out), "50256");
    run_free(&r);
    r = run(NULL, "tokenize -m %s --special --text 'a<|endoftext|>'", dir);
    assert_string_equal(trim(r.out), "64 50256");
    run_free(&r);
}

/* `template`: a conversation as the chat feeds it, by the model's own Jinja
 * template (ChatML in the arch fixtures' tokenizer_config.json), against the
 * text ChatML defines; the same text from the GGUF file's copy of it; refusals. */
static void test_template(void **state) {
    (void)state;
    const char *msgs = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Yo\"},"
                       " {\"role\": \"user\", \"content\": \"Bye\"}]";
    const char *want = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"
                       "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n";
    static const char *models[] = {"arch/models/qwen3", "arch/gguf/qwen3.gguf"};
    for (int i = 0; i < 2; i++) {
        run_result r = run(msgs, "template -m %s --messages -", fixture_path("%s", models[i]));
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, want);
        run_free(&r);
    }
    run_result r = run(msgs, "template -m %s --messages - --json", fixture_path("arch/models/qwen3"));
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"template\":\"model\""));
    run_free(&r);
    /* a system message first, as ChatML writes it; anywhere else refused */
    r = run("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]",
            "template -m %s --messages -", fixture_path("arch/models/qwen3"));
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                               "<|im_start|>assistant\n");
    run_free(&r);
    r = run("[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"system\", \"content\": \"x\"}]",
            "template -m %s --messages -", fixture_path("arch/models/qwen3"));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "messages[1].role: expected \"user\" or \"assistant\" (a system message only first)"));
    run_free(&r);
    r = run(NULL, "template -m %s --template raw", fixture_path("arch/models/qwen3")); /* the sample, as typed */
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "Hello! Who are you?I am a language model. How can I help?Tell me a short joke.");
    run_free(&r);
}

static float *read_f32_file(const char *path, size_t n) {
    size_t len;
    float *v = read_file(path, &len);
    assert_int_equal(len, n * sizeof(float));
    return v;
}

/* topk --json: the 10 most probable tokens with the reference's probabilities. */
static void test_topk_json(void **state) {
    const char *model = *state;
    char *prompt = read_file(fixture_path("cli/%s/prompt.txt", model), NULL);
    gpt2_model *m;
    assert_int_equal(gpt2_model_load(fixture_path("models/%s", model), &m, NULL), GPT2_OK);
    const int V = gpt2_model_config(m)->n_vocab;
    gpt2_model_free(m);
    float *ref = read_f32_file(fixture_path("cli/%s/last_logits.f32", model), (size_t)V);
    double mx = ref[0], sum = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, ref[i]);
    for (int i = 0; i < V; i++) sum += exp(ref[i] - mx);
    run_result r = run(NULL, "topk -m %s -p %s -k 10 --json", fixture_path("models/%s", model), sq(prompt));
    assert_int_equal(r.status, 0);
    cJSON *j = cJSON_Parse(r.out);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 10);
    double prev = 2, worst = 0;
    for (cJSON *e = j->child; e; e = e->next) {
        int id = cJSON_GetObjectItem(e, "id")->valueint;
        double p = cJSON_GetObjectItem(e, "prob")->valuedouble;
        double logit = cJSON_GetObjectItem(e, "logit")->valuedouble;
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "token")));
        assert_true(p <= prev);
        prev = p;
        worst = fmax(worst, fabs(p - exp(ref[id] - mx) / sum));
        assert_true(fabs(logit - ref[id]) < 2e-4);
        /* nothing outside the list beats its last entry */
    }
    int n_above = 0;
    for (int i = 0; i < V; i++) n_above += exp(ref[i] - mx) / sum > prev + 1e-5;
    assert_true(n_above <= 9);
    print_message("%s topk: max|dprob| vs reference %.3g\n", model, worst);
    assert_true(worst < 2e-5);
    cJSON_Delete(j);
    run_free(&r);
    free(ref);
    free(prompt);
}

/* attention --json for every head against the reference's matrices. */
static void test_attention_json(void **state) {
    const char *model = *state;
    char *prompt = read_file(fixture_path("cli/%s/prompt.txt", model), NULL);
    char *ids_text = read_file(fixture_path("cli/%s/prompt_ids.txt", model), NULL);
    size_t T;
    int32_t *ids = parse_ids(ids_text, &T);
    gpt2_model *m;
    assert_int_equal(gpt2_model_load(fixture_path("models/%s", model), &m, NULL), GPT2_OK);
    const int L = gpt2_model_config(m)->n_layer, H = gpt2_model_config(m)->n_head;
    gpt2_model_free(m);
    float *ref = read_f32_file(fixture_path("cli/%s/attn.f32", model), (size_t)L * H * T * T);
    double worst = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            run_result r = run(NULL, "attention -m %s -p %s --layer %d --head %d --json",
                               fixture_path("models/%s", model), sq(prompt), l, h);
            assert_int_equal(r.status, 0);
            cJSON *j = cJSON_Parse(r.out);
            assert_non_null(j);
            cJSON *jids = cJSON_GetObjectItem(j, "ids"), *w = cJSON_GetObjectItem(j, "weights");
            assert_int_equal(cJSON_GetArraySize(jids), (int)T);
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), (int)T);
            int i = 0;
            for (cJSON *e = jids->child; e; e = e->next, i++) assert_int_equal(e->valueint, ids[i]);
            i = 0;
            for (cJSON *row = w->child; row; row = row->next, i++) {
                assert_int_equal(cJSON_GetArraySize(row), (int)T);
                int k = 0;
                double s = 0;
                for (cJSON *x = row->child; x; x = x->next, k++) {
                    double want = ref[(((size_t)l * H + h) * T + i) * T + k];
                    worst = fmax(worst, fabs(x->valuedouble - want));
                    if (k > i) assert_true(x->valuedouble == 0);
                    s += x->valuedouble;
                }
                assert_true(fabs(s - 1) < 1e-5);
            }
            assert_int_equal(i, (int)T);
            cJSON_Delete(j);
            run_free(&r);
        }
    print_message("%s attention: max|dattn| vs reference %.3g over %d heads\n", model, worst, L * H);
    assert_true(worst < 2e-5);
    free(ref), free(ids), free(ids_text), free(prompt);
}

/* generate --temperature 0 streams the reference's greedy continuation, as ids and as text. */
static void test_generate_greedy(void **state) {
    const char *model = *state;
    char *prompt = read_file(fixture_path("cli/%s/prompt.txt", model), NULL);
    char *want = read_file(fixture_path("cli/%s/greedy.txt", model), NULL);
    const char *mdir = fixture_path("models/%s", model);
    run_result r = run(NULL, "generate -m %s -p %s -n 20 --temperature 0 --ids", mdir, sq(prompt));
    assert_int_equal(r.status, 0);
    assert_string_equal(trim(r.out), trim(want));
    run_free(&r);
    /* as text: the bytes of those tokens, nothing else (not the prompt) */
    gpt2_tokenizer *tok;
    assert_int_equal(gpt2_tokenizer_load(mdir, &tok, NULL), GPT2_OK);
    size_t n;
    int32_t *ids = parse_ids(want, &n);
    char text[4096] = "";
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t bl;
        const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &bl);
        memcpy(text + at, b, bl);
        at += bl;
    }
    text[at] = '\0';
    r = run(NULL, "generate -m %s -p %s -n 20 --temperature 0", mdir, sq(prompt));
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, text);
    run_free(&r);
    /* the same seed gives the same sample; the context limit is checked up front */
    run_result a = run(NULL, "generate -m %s -p %s -n 15 --seed 7 --ids", mdir, sq(prompt));
    run_result b = run(NULL, "generate -m %s -p %s -n 15 --seed 7 --ids", mdir, sq(prompt));
    assert_string_equal(a.out, b.out);
    run_free(&a), run_free(&b);
    r = run(NULL, "generate -m %s -p %s -n 60", mdir, sq(prompt));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "context window of 64"));
    run_free(&r);
    gpt2_tokenizer_free(tok);
    free(ids), free(want), free(prompt);
}

/* --quantize q8 on a model whose weights are on the 8-bit grid: the same
 * ranking and, to the rounding of each product's inputs to 16 bits (gemm.h),
 * the same logits as the F32 run; off the grid the logits move more. */
static void test_quantize_option(void **state) {
    (void)state;
    const char *mdir = fixture_path("models/tiny-q8grid");
    run_result a = run(NULL, "topk -m %s -p 'the cat' -k 8", mdir);
    run_result b = run(NULL, "topk -m %s -p 'the cat' -k 8 --quantize q8", mdir);
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_int_equal(strncmp(a.out, "    id      logit      prob  token\n", 35), 0); /* the header */
    char *sa = strchr(a.out, '\n') + 1, *sb = strchr(b.out, '\n') + 1;
    for (int line = 0; line < 8; line++) {
        int ida, idb;
        double la, lb;
        assert_int_equal(sscanf(sa, "%d %lf", &ida, &la), 2);
        assert_int_equal(sscanf(sb, "%d %lf", &idb, &lb), 2);
        assert_int_equal(ida, idb);
        assert_true(fabs(la - lb) < 1e-3);
        sa = strchr(sa, '\n') + 1;
        sb = strchr(sb, '\n') + 1;
    }
    run_free(&a), run_free(&b);
    /* off the grid the option really quantizes: the logits move */
    mdir = fixture_path("models/tiny-f32");
    a = run(NULL, "topk -m %s -p 'the cat' -k 1", mdir);
    b = run(NULL, "topk -m %s -p 'the cat' -k 1 --quantize q8", mdir);
    double la, lb;
    int id;
    assert_int_equal(sscanf(strchr(a.out, '\n') + 1, "%d %lf", &id, &la), 2);
    assert_int_equal(sscanf(strchr(b.out, '\n') + 1, "%d %lf", &id, &lb), 2);
    assert_true(fabs(la - lb) > 1e-2); /* 0.074 here; on the grid 1e-4 */
    run_free(&a), run_free(&b);
}

/* --threads changes who computes, never what: the same ids from generate and
 * the same loss from eval with 1 and 3 threads. */
static void test_threads_option(void **state) {
    (void)state;
    const char *mdir = fixture_path("models/tiny-f32");
    run_result a = run(NULL, "generate -m %s -p 'the cat' -n 30 --seed 5 --ids --threads 1", mdir);
    run_result b = run(NULL, "generate -m %s -p 'the cat' -n 30 --seed 5 --ids --threads 3", mdir);
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_true(strlen(a.out) > 30);
    assert_string_equal(a.out, b.out);
    run_free(&a), run_free(&b);
    char *text = strdup(fixture_path("cli/tiny-f32/eval.txt"));
    a = run(NULL, "eval -m %s --json -q --threads 1 %s", mdir, text);
    b = run(NULL, "eval -m %s --json -q --threads 3 %s", mdir, text);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.out, b.out);
    run_free(&a), run_free(&b);
    free(text);
}

/* topk and attention take --threads; their output does not depend on it
 * (the engine computes bit-identical results for any thread count). */
static void test_inspect_threads(void **state) {
    (void)state;
    const char *mdir = fixture_path("models/tiny-f32");
    char *prompt = read_file(fixture_path("cli/tiny-f32/prompt.txt"), NULL);
    static const char *cmds[] = {"topk -k 50", "topk -k 20 --json", "attention --layer 1 --head 2 --json"};
    for (int i = 0; i < 3; i++) {
        run_result a = run(NULL, "%s -m %s -p %s --threads 1", cmds[i], mdir, sq(prompt));
        run_result b = run(NULL, "%s -m %s -p %s --threads 2", cmds[i], mdir, sq(prompt));
        assert_int_equal(a.status, 0);
        assert_int_equal(b.status, 0);
        assert_true(strlen(a.out) > 100);
        assert_string_equal(a.out, b.out);
        run_free(&a), run_free(&b);
    }
    run_result r = run(NULL, "topk -m %s -p x --threads 0", mdir);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--threads: expected an integer in [1, 256], found '0'"));
    run_free(&r);
    free(prompt);
}

static double json_number(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(j, key);
    if (!cJSON_IsNumber(v)) fail_msg("bench --json: \"%s\" is missing or not a number", key);
    return v->valuedouble;
}

/* bench on the bundled model, through a link named sh"k\ (the name comes back
 * exactly, parsed by Python's json): every figure present, the probe's figures real
 * (a probe that never answered reads 0), the ratio between its quartiles, and
 * the weight bytes per token as GPT-2's shapes give them. Too few positions
 * is a clean error. No figure is judged for speed. */
static void test_bench_json(void **state) {
    (void)state;
    /* through a directory named with a quote and a backslash: the name comes back exactly */
    char dir[] = "/tmp/gptscope-bench-XXXXXX", link[128];
    assert_non_null(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/sh\"k\\", dir);
    char *target = realpath("models/shakespeare", NULL);
    assert_non_null(target);
    assert_int_equal(symlink(target, link), 0);
    free(target);
    run_result r = run(NULL, "bench -m %s --reps 1 --json", sq(link));
    assert_int_equal(r.status, 0);
    py_check("bench --json", r.out, hex_let("name", "sh\"k\\", 5), "j['model'] == arg['name'].decode()",
             "'model_bytes' not in j", "j['dtype'] == 'f16' and j['reps'] == 1", NULL);
    unlink(link);
    rmdir(dir);
    cJSON *j = cJSON_Parse(r.out);
    assert_non_null(j);
    static const char *positive[] = {"prefill_128_tok_s", "decode_tok_s", "decode_hooked_tok_s", "peak_rss_mb",
                                     "decode_read_gb_s"};
    for (size_t i = 0; i < sizeof positive / sizeof *positive; i++) assert_true(json_number(j, positive[i]) > 0);
    /* each median within its runs' range */
    py_check("bench --json ranges", r.out, "",
             "all(j[k + '_range'][0] <= j[k] <= j[k + '_range'][1] for k in ('prefill_128_tok_s', 'prefill_512_tok_s', "
             "'decode_tok_s', 'machine_peak_gflops'))", NULL);
    /* the machine's bandwidth: measured, or null with the reason (a machine too busy for its passes to agree) */
    const cJSON *note = cJSON_GetObjectItem(j, "machine_read_note");
    if (cJSON_IsNull(note)) {
        static const char *bw[] = {"machine_read_gb_s", "machine_read_4k_gb_s", "decode_bandwidth_ratio"};
        for (size_t i = 0; i < sizeof bw / sizeof *bw; i++) assert_true(json_number(j, bw[i]) > 0);
        py_check("bench --json machine range", r.out, "",
                 "j['machine_read_gb_s_range'][0] <= j['machine_read_gb_s'] <= j['machine_read_gb_s_range'][1]", NULL);
    } else {
        assert_string_equal(cJSON_GetStringValue(note), "unsteady");
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "decode_bandwidth_ratio")));
        print_message("bench: the machine was too busy for a bandwidth ratio\n");
    }
    /* 1,024 positions: the 512-token figures too */
    static const char *long_ones[] = {"prefill_512_tok_s", "ttft_500_ms", "prefill_512_gflops", "prefill_peak_ratio",
                                      "machine_peak_gflops"};
    for (size_t i = 0; i < sizeof long_ones / sizeof *long_ones; i++) assert_true(json_number(j, long_ones[i]) > 0);
    {
        /* prefill 128's GFLOP/s from GPT-2's shapes: per token 2 (4C^2 + 8C^2) per layer, the
         * causal attention's two products 4 C L T (T + 1) / 2 over all 128, one LM head 2 V C */
        const double C = 384, L = 6, V = 2048, T = 128;
        const double flops = 2 * T * L * 12 * C * C + 4 * C * L * T * (T + 1) / 2 + 2 * V * C;
        const double want = flops * json_number(j, "prefill_128_tok_s") / T / 1e9;
        assert_true(fabs(json_number(j, "prefill_128_gflops") - want) < 0.05 + 1e-3 * want);
    }
    if (cJSON_IsNull(note)) {
        const double q1 = json_number(j, "decode_bandwidth_ratio_q1"), q3 = json_number(j, "decode_bandwidth_ratio_q3"),
                     ratio = json_number(j, "decode_bandwidth_ratio");
        assert_true(q1 <= ratio && ratio <= q3);
    }
    /* 6 layers of 384, 2048 tokens, F16 matrices (12 C^2 per layer, and the
     * tied embedding V C), F32 vectors (ln 4C, biases 3C + C + 4C + C per
     * layer, ln_f 2C) and one F32 row of wpe */
    const double C = 384, L = 6, V = 2048;
    const double bytes = 2 * (12 * C * C * L + V * C) + 4 * (L * 13 * C + 2 * C + C);
    assert_true(json_number(j, "weight_bytes_per_token") == bytes);
    /* and the float keys and values of positions 0 .. p for each of the 128
     * decoded tokens (p = 32 .. 159): 96.5 on average, per layer */
    const double kv = 2 * L * C * 4 * 96.5;
    assert_true(fabs(json_number(j, "kv_bytes_per_token") - kv) < 1);
    const double implied = (bytes + kv) * json_number(j, "decode_tok_s") / 1e9;
    assert_true(fabs(json_number(j, "decode_read_gb_s") - implied) < 0.01 + 1e-3 * implied);
    cJSON_Delete(j);
    run_free(&r);
    /* --positions on 1,024 positions: decode at 32 .. 1000, prefill of 128 .. 1024 */
    r = run(NULL, "bench -m models/shakespeare --reps 1 --positions --json");
    assert_int_equal(r.status, 0);
    py_check("bench --positions", r.out, "",
             "[d['pos'] for d in j['positions']['decode']] == [32, 128, 256, 512, 1000]",
             "[p['tokens'] for p in j['positions']['prefill']] == [128, 256, 512, 1024]",
             /* a floor only where the probe's readings were steady; then the ratio is a share of it */
             "all(d['tok_s'] > 0 and (d['floor_tok_s'] is None) == (d['floor_ratio'] is None) for d in j['positions']['decode'])",
             "all(d['floor_tok_s'] > 0 and 0 < d['floor_ratio'] for d in j['positions']['decode'] if d['floor_tok_s'] is not None)",
             /* GFLOP/s from GPT-2's shapes, written here on its own */
             "all(abs(p['gflops'] - (2*p['tokens']*6*12*384**2 + 4*384*6*p['tokens']*(p['tokens']+1)/2 + 2*2048*384) * p['tok_s'] / p['tokens'] / 1e9) < 0.05 + 1e-3 * p['gflops'] for p in j['positions']['prefill'])",
             NULL);
    run_free(&r);
    /* a model of 256 positions (one step of training makes one): no 512-token
       figures, decode at 32 and 128, prefill of 128 and 256 */
    char dir2[] = "/tmp/gptscope-bench256-XXXXXX";
    assert_non_null(mkdtemp(dir2));
    r = run(NULL, "train --tokenizer models/shakespeare -o %s --layers 1 --heads 1 --embd 64 --block 256 --batch 1 "
                  "--steps 1 --val-fraction 0 --threads 1 models/shakespeare/README.md", dir2);
    if (r.status != 0) fail_msg("train: %s", r.err);
    run_free(&r);
    r = run(NULL, "bench -m %s --reps 1 --positions --json", dir2);
    assert_int_equal(r.status, 0);
    py_check("bench, 256 positions", r.out, "",
             "all(j[k] is None for k in ('prefill_512_tok_s', 'ttft_500_ms', 'prefill_512_gflops', 'prefill_peak_ratio'))",
             "j['machine_peak_gflops'] > 0",
             "[d['pos'] for d in j['positions']['decode']] == [32, 128]",
             "[p['tokens'] for p in j['positions']['prefill']] == [128, 256]", NULL);
    run_free(&r);
    rm_rf(dir2);
    r = run(NULL, "bench -m %s", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "at least 160 positions"));
    run_free(&r);
    r = run(NULL, "bench --shape gpt3");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--shape: expected gpt2, gpt2-medium, gpt2-large, gpt2-xl, smollm2-135m, qwen2.5-0.5b, "
                                  "llama-3.2-1b, gemma3-270m or gemma3-1b, found 'gpt3'"));
    run_free(&r);
    r = run(NULL, "bench -m models/shakespeare --shape gpt2-xl");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--shape makes a random model"));
    run_free(&r);
    /* --machine: the two limits alone, each within its readings' range (or the reason it has none) */
    r = run(NULL, "bench --machine --reps 2 --threads 1 --json");
    assert_int_equal(r.status, 0);
    py_check("bench --machine", r.out, "", "j['threads'] == 1 and j['reps'] == 2 and 'decode_tok_s' not in j",
             "j['machine_peak_gflops_range'][0] <= j['machine_peak_gflops'] <= j['machine_peak_gflops_range'][1]",
             "j['machine_read_note'] in (None, 'unsteady')",
             "j['machine_read_note'] is not None or j['machine_read_gb_s_range'][0] <= j['machine_read_gb_s'] <= "
             "j['machine_read_gb_s_range'][1]",
             "j['machine_read_note'] is None or j['machine_read_gb_s'] is None", NULL);
    run_free(&r);
    r = run(NULL, "bench --machine -m models/shakespeare");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--machine measures the machine alone"));
    run_free(&r);
}

/* Tiny Shakespeare where it is at hand: $GPTSCOPE_SHAKESPEARE, else
 * ../shared/data/tinyshakespeare.txt; NULL without. */
static const char *shakespeare_corpus(void) {
    const char *c = getenv("GPTSCOPE_SHAKESPEARE");
    if (!c) c = "../shared/data/tinyshakespeare.txt";
    return access(c, R_OK) == 0 ? c : NULL;
}

/* models/shakespeare/recipe.sh, the bundled model's one-command recipe, cut
 * to a few steps of a tiny shape (two BPE-dropout copies, not 32) by options
 * after OUT: its tokenizer is the bundled one byte for byte (published
 * files, re-derived), the directory a loadable model with the chat template;
 * OUT = the bundled directory is refused. Needs the corpus (skipped without). */
static void test_recipe_script(void **state) {
    (void)state;
    const char *corpus = shakespeare_corpus();
    run_result refuse =
        run_script("GPTSCOPE=%s sh models/shakespeare/recipe.sh x models/shakespeare", sq(test_env("GPTSCOPE_BIN")));
    assert_int_equal(refuse.status, 2);
    assert_non_null(strstr(refuse.err, "the bundled model's own directory"));
    run_free(&refuse);
    if (!corpus) {
        print_message("recipe not run: no corpus (set GPTSCOPE_SHAKESPEARE)\n");
        skip();
    }
    char dir[] = "/tmp/gptscope recipe-XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));
    run_result r = run_script("GPTSCOPE=%s sh models/shakespeare/recipe.sh %s %s --layers 1 --heads 1 --embd 64 "
                              "--block 64 --short-block 32 --short-steps 2 --steps 3 --batch 2 --eval-every 1 "
                              "--eval-batches 1 --bpe-copies 2", sq(test_env("GPTSCOPE_BIN")), sq(corpus), sq(dir));
    if (r.status != 0) fail_msg("recipe.sh failed (%d):\n%s", r.status, r.err);
    run_free(&r);
    const char *same[] = {"vocab.json", "merges.txt", "chat_template.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, same[i]);
        char ours[512];
        snprintf(ours, sizeof ours, "models/shakespeare/%s", same[i]);
        size_t na, nb;
        char *a = read_file(path, &na), *b = read_file(ours, &nb);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
        free(a), free(b);
    }
    gpt2_model *m;
    gpt2_error err;
    assert_int_equal(gpt2_model_load(dir, &m, &err), GPT2_OK);
    assert_int_equal(gpt2_model_config(m)->n_ctx, 64);
    gpt2_model_free(m);
    rm_rf(dir);
}

/* The bundled model: 1,024 positions, its weights within 25 MB, the bundled
 * draft's greedy text the model's own over 400 tokens, and, where
 * the corpus is at hand ($GPTSCOPE_SHAKESPEARE, else
 * ../shared/data/tinyshakespeare.txt; skipped without), the held-out figure
 * its training.json records, and at most 2.10 bits per byte: the target its
 * README names, below nanoGPT's 2.120 for a character model of this size. */
static void test_bundled_model(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    assert_int_equal(gpt2_model_load("models/shakespeare", &m, &err), GPT2_OK);
    assert_int_equal(gpt2_model_config(m)->n_ctx, 1024);
    gpt2_model_free(m);
    struct stat st;
    assert_int_equal(stat("models/shakespeare/model.safetensors", &st), 0);
    assert_true(st.st_size <= 25000000);
    /* the bundled draft: greedy text with it is the model's own, past 256 positions */
    run_result g = run(NULL, "generate --temperature 0 -n 400 -p 'ROMEO:'");
    run_result d = run(NULL, "generate --draft models/shakespeare-draft --draft-k 4 --temperature 0 -n 400 -p 'ROMEO:'");
    assert_int_equal(g.status, 0);
    assert_int_equal(d.status, 0);
    assert_true(strlen(g.out) > 800); /* 400 tokens (greedy text: about 2.4 bytes each) */
    assert_string_equal(g.out, d.out);
    run_free(&g), run_free(&d);
    const char *corpus = shakespeare_corpus();
    if (!corpus) {
        print_message("held-out figure not checked: no corpus (set GPTSCOPE_SHAKESPEARE)\n");
        skip();
    }
    char *json = read_file("models/shakespeare/training.json", NULL);
    cJSON *rec = cJSON_Parse(json);
    assert_non_null(rec);
    const double recorded = cJSON_GetObjectItem(rec, "heldout_bits_per_byte")->valuedouble;
    run_result r = run(NULL, "eval -m models/shakespeare --heldout 0.1 --json -q %s", sq(corpus));
    assert_int_equal(r.status, 0);
    cJSON *got = cJSON_Parse(r.out);
    assert_non_null(got);
    const double bpb = cJSON_GetObjectItem(got, "bits_per_byte")->valuedouble;
    print_message("bundled model: %.4f bits/byte held out (training.json: %.4f)\n", bpb, recorded);
    assert_true(fabs(bpb - recorded) < 1e-4);
    assert_true(bpb <= 2.10); /* the target; nanoGPT's character model: 2.120 */
    assert_int_equal(cJSON_GetObjectItem(got, "context")->valueint, 1024);
    cJSON_Delete(got), cJSON_Delete(rec);
    free(json);
    run_free(&r);
}

/* eval (with options opt) against the reference's sliding-window loss in ref_json. */
static void check_eval(const char *model, const char *opt, const char *ref_json) {
    char *json = read_file(fixture_path("cli/%s/%s", model, ref_json), NULL);
    cJSON *ref = cJSON_Parse(json);
    run_result r = run(NULL, "eval -m %s --json -q %s %s", fixture_path("models/%s", model), opt,
                       fixture_path("cli/%s/eval.txt", model));
    assert_int_equal(r.status, 0);
    cJSON *got = cJSON_Parse(r.out);
    assert_non_null(got);
    static const char *keys[] = {"tokens", "scored", "bytes"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(cJSON_GetObjectItem(got, keys[i])->valueint, cJSON_GetObjectItem(ref, keys[i])->valueint);
    double dn = fabs(cJSON_GetObjectItem(got, "nats_per_token")->valuedouble -
                     cJSON_GetObjectItem(ref, "nats_per_token")->valuedouble);
    double db = fabs(cJSON_GetObjectItem(got, "bits_per_byte")->valuedouble -
                     cJSON_GetObjectItem(ref, "bits_per_byte")->valuedouble);
    print_message("%s eval %s: %.4f nats/token, |dnats| %.3g |dbpb| %.3g\n", model, opt,
                  cJSON_GetObjectItem(got, "nats_per_token")->valuedouble, dn, db);
    assert_true(dn < 1e-4 && db < 1e-4);
    cJSON_Delete(got), cJSON_Delete(ref);
    run_free(&r);
    free(json);
}

/* eval reproduces the reference's sliding-window loss, with the model's
 * window and with --context 7 (stride 3). */
static void test_eval(void **state) {
    const char *model = *state;
    check_eval(model, "", "eval.json");
    check_eval(model, "--context 7", "eval_context7.json");
    run_result r = run(NULL, "eval -m %s --context 100000 %s", fixture_path("models/%s", model),
                       fixture_path("cli/%s/eval.txt", model));
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "--context 100000: the model has")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    r = run(NULL, "eval -m %s /nonexistent/file.txt", fixture_path("models/%s", model));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "/nonexistent/file.txt"));
    run_free(&r);
}

/* Every malformed model: exit status 1 and exactly one line naming the file. */
static void test_bad_models(void **state) {
    (void)state;
    char *tsv = read_file(fixture_path("bad/cases.tsv"), NULL);
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64], status[16], file[64];
        if (line[0] == '#' || sscanf(line, "%63[^\t]\t%15[^\t]\t%63[^\t]", name, status, file) != 3) continue;
        run_result r = run(NULL, "generate -m %s -p hello -n 1", fixture_path("bad/%s", name));
        if (r.status != 1) fail_msg("%s: exit status %d, expected 1; stderr: %s", name, r.status, r.err);
        char *nl = strchr(r.err, '\n');
        if (!nl || nl[1] != '\0' || strncmp(r.err, "gptscope: ", 10) != 0 || !strstr(r.err, file))
            fail_msg("%s: expected one 'gptscope: ...%s...' line, got: %s", name, file, r.err);
        assert_string_equal(r.out, "");
        run_free(&r);
        n++;
    }
    assert_true(n >= 25);
    free(tsv);
}

int main(void) {
    static const char *f32 = "tiny-f32", *bf16 = "tiny-bf16";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_usage_errors_say_what),
        cmocka_unit_test(test_refusals_say_why),
        cmocka_unit_test(test_hostile_bytes_escaped),
        cmocka_unit_test(test_tokenize_pieces_escaped),
        cmocka_unit_test(test_inspect_threads),
        cmocka_unit_test(test_quantize_option),
        cmocka_unit_test(test_threads_option),
        cmocka_unit_test(test_tokenize_published),
        cmocka_unit_test(test_template),
        cmocka_unit_test_prestate(test_topk_json, (void *)f32),
        cmocka_unit_test_prestate(test_topk_json, (void *)bf16),
        cmocka_unit_test_prestate(test_attention_json, (void *)f32),
        cmocka_unit_test_prestate(test_generate_greedy, (void *)f32),
        cmocka_unit_test_prestate(test_generate_greedy, (void *)bf16),
        cmocka_unit_test_prestate(test_eval, (void *)f32),
        cmocka_unit_test_prestate(test_eval, (void *)bf16),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_bundled_model),
        cmocka_unit_test(test_recipe_script),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
