/* test_cli_microscope.c — the microscope's commands (heads, lens, --ablate on
 * topk and eval) against the numpy reference (tests/ref/gpt2_ref.py, through
 * tests/ref/microscope_check.py: probabilities and scores within 1e-4) on the
 * tiny fixtures and the 64-wide one; the exports re-read (CSV quoting, exact
 * token bytes) against the JSON the same run printed; the pictures (the SVG
 * parsed for labels, title and scale, the PNG's pixels at every cell against
 * the colour map); bad input refused with precise messages, nothing
 * overwritten. */
#include <sys/stat.h>

#include "test_util.h"
#include "cli_run.h"

static char g_dir[64]; /* a scratch directory for outputs */

static const char *tmp(const char *name) {
    static char bufs[4][256];
    static int slot;
    char *out = bufs[slot++ & 3];
    snprintf(out, 256, "%s/%s", g_dir, name);
    return out;
}

static void save(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Runs tests/ref/SCRIPT with args; its summary line is printed, a failure fails the test. */
static void vscript_check(const char *script, const char *fmt, va_list ap) {
    char args[4096], cmd[8192];
    vsnprintf(args, sizeof args, fmt, ap);
    const char *out = tmp("check.out");
    snprintf(cmd, sizeof cmd, "%s tests/ref/%s %s >%s 2>&1", test_env("PYTHON"), script, args, out);
    int ws = system(cmd);
    char *text = read_file(out, NULL);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) fail_msg("%s %s:\n%s", script, args, text);
    printf("    %s", text);
    free(text);
}

/* microscope_check.py: the microscope's commands against gpt2_ref.py */
static void ref_check(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vscript_check("microscope_check.py", fmt, ap);
    va_end(ap);
}

/* attribute_ref.py: `attribute` against the attribution's reference */
static void attr_check(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vscript_check("attribute_ref.py", fmt, ap);
    va_end(ap);
}

/* `cmd` must succeed; its stdout goes to file name in the scratch directory. */
static void run_to(const char *name, const char *fmt, const char *model, const char *prompt, const char *extra) {
    run_result r = run(NULL, fmt, model, sq(prompt), extra);
    if (r.status != 0) fail_msg("exit %d: %s", r.status, r.err);
    save(tmp(name), r.out);
    run_free(&r);
}

/* The prompt's ids as "1,2,3" (from `tokenize`, itself checked against the reference tokenizer elsewhere). */
static const char *ids_of(const char *model, const char *prompt) {
    static char ids[4096];
    run_result r = run(NULL, "tokenize -m %s --text %s", model, sq(prompt));
    assert_int_equal(r.status, 0);
    snprintf(ids, sizeof ids, "%s", trim(r.out));
    for (char *c = ids; *c; c++)
        if (*c == ' ') *c = ',';
    run_free(&r);
    return ids;
}

static void test_against_numpy(void **state) {
    (void)state;
    const char *models[] = {"tiny-f32", "tiny-head64"};
    const char *prompts[] = {"the cat sat on the mat, the cat sat", "hello world"};
    const char *ablates[] = {"", "0.1", "1.*,0.0"};
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 2; p++)
            for (int a = 0; a < 3; a++) {
                const char *model = fixture_path("models/%s", models[m]), *prompt = prompts[p];
                char opt[64] = "", chk[64] = "";
                if (*ablates[a]) snprintf(opt, sizeof opt, "--ablate %s", ablates[a]);
                if (*ablates[a]) snprintf(chk, sizeof chk, "--ablate '%s'", ablates[a]);
                char ids[4096];
                snprintf(ids, sizeof ids, "%s", ids_of(model, prompt));
                printf("  %s, %s, --ablate '%s'\n", models[m], prompt, ablates[a]);
                run_to("heads.json", "heads -m %s -p %s --json %s", model, prompt, opt);
                ref_check("heads %s %s --ids %s %s", model, tmp("heads.json"), ids, chk);
                run_to("lens.json", "lens -m %s -p %s --json -k 5 %s", model, prompt, opt);
                ref_check("lens %s %s %s", model, tmp("lens.json"), chk);
                run_to("lens.json", "lens -m %s -p %s --json -k 3 --pos -2 %s", model, prompt, opt);
                ref_check("lens %s %s %s", model, tmp("lens.json"), chk);
                run_to("topk.json", "topk -m %s -p %s --json -k 8 %s", model, prompt, opt);
                ref_check("topk %s %s --ids %s %s", model, tmp("topk.json"), ids, chk);
                save(tmp("text.txt"), prompt);
                run_result r = run(NULL, "eval -q --json -m %s %s %s", model, tmp("text.txt"), opt);
                assert_int_equal(r.status, 0);
                save(tmp("eval.json"), r.out);
                run_free(&r);
                ref_check("eval %s %s --ids %s %s", model, tmp("eval.json"), ids, chk);
            }
}

/* Tokens with commas, quotes, a newline and bytes that are not UTF-8 on their own. */
static const char odd_prompt[] = "a, \"b\"\nc caf\xc3\xa9 \xe2\x82\xac, the \"end\"";

static void test_exports(void **state) {
    (void)state;
    const char *model = fixture_path("models/tiny-f32");
    static const struct {
        const char *cmd, *csv, *json;
    } cases[] = {
        {"attention -m %s -p %s --layer 1 --head 3 --json --export %s", "att.csv", "att.json"},
        {"attention -m %s -p %s --layer 0 --mean --json --export %s", "mean.csv", "mean.json"},
        {"heads -m %s -p %s --json --sort entropy --export %s", "heads.csv", "heads.json"},
        {"lens -m %s -p %s --json -k 4 --export %s", "lens.csv", "lens.json"},
        {"lens -m %s -p %s --json -k 1 --pos 0 --export %s", "lens1.csv", "lens1.json"},
        /* the ablation in effect named in each (the reference checks the CSV's column against the JSON) */
        {"attention -m %s -p %s --layer 1 --head 3 --ablate 0.1,1.* --json --export %s", "att-ab.csv", "att-ab.json"},
        {"lens -m %s -p %s --json -k 2 --ablate 1.2 --export %s", "lens-ab.csv", "lens-ab.json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_to(cases[i].json, cases[i].cmd, model, odd_prompt, tmp(cases[i].csv));
        ref_check("csv %s %s %s", model, tmp(cases[i].csv), tmp(cases[i].json));
        char *doc = read_file(tmp(cases[i].json), NULL);
        const char *want = strstr(cases[i].cmd, "0.1,1.*") ? "\"ablated\":[[0,1],[1,0],[1,1],[1,2],[1,3]]"
                           : strstr(cases[i].cmd, "1.2") ? "\"ablated\":[[1,2]]"
                           : strchr(cases[i].cmd, '[') ? "" : "\"ablated\":[]";
        if (!strstr(cases[i].cmd, "heads") && !strstr(doc, want)) fail_msg("%s: no %s in %s", cases[i].cmd, want, doc);
        free(doc);
        /* the JSON export is the document --json printed */
        char *printed = read_file(tmp(cases[i].json), NULL);
        unlink(tmp("again.json"));
        run_to("export.txt", cases[i].cmd, model, odd_prompt, tmp("again.json"));
        char *written = read_file(tmp("again.json"), NULL);
        assert_string_equal(written, printed);
        free(printed), free(written);
    }
    /* the top-k history: its CSV against its JSON, and its probabilities against topk's after each prefix */
    run_to("out.txt", "topk -m %s -p %s -k 3 --export %s", model, odd_prompt, tmp("hist.csv"));
    run_to("out.txt", "topk -m %s -p %s -k 3 --export %s", model, odd_prompt, tmp("hist.json"));
    ref_check("csv %s %s %s", model, tmp("hist.csv"), tmp("hist.json"));
    run_to("out.txt", "topk -m %s -p %s -k 3 --ablate 0.* --export %s", model, odd_prompt, tmp("hist-ab.csv"));
    run_to("out.txt", "topk -m %s -p %s -k 3 --ablate 0.* --export %s", model, odd_prompt, tmp("hist-ab.json"));
    ref_check("csv %s %s %s", model, tmp("hist-ab.csv"), tmp("hist-ab.json"));
    char *hab = read_file(tmp("hist-ab.json"), NULL);
    assert_non_null(strstr(hab, "\"ablated\":[[0,0],[0,1],[0,2],[0,3]]"));
    free(hab);
    run_to("topk.json", "topk -m %s -p %s -k 3 --json%s", model, "the cat sat", "");
    run_to("out.txt", "topk -m %s -p %s -k 3 --export %s", model, "the cat sat", tmp("hist2.json"));
    char *hist = read_file(tmp("hist2.json"), NULL), *top = read_file(tmp("topk.json"), NULL);
    char lets[16384];
    snprintf(lets, sizeof lets, "%s", hex_let("topk", top, strlen(top)));
    py_check("topk --export history", hist, lets,
             "[ (c['id'], round(c['prob'], 9)) for c in j['positions'][-1]['top'] ] == "
             "[ (c['id'], round(c['prob'], 9)) for c in json.loads(arg['topk']) ]",
             "j['positions'][-1]['next'] is None",
             "all(p['next']['id'] == j['ids'][p['pos'] + 1] for p in j['positions'][:-1])", NULL);
    free(hist), free(top);
}

static void test_pictures(void **state) {
    (void)state;
    const char *model = fixture_path("models/tiny-f32");
    const char *pics[] = {"--layer 1 --head 2", "--layer 0 --mean", "--layer 1 --head 0 --ablate 0.2,1.*"};
    for (int i = 0; i < 3; i++) {
        char extra[1024];
        snprintf(extra, sizeof extra, "%s --json --svg %s --png %s --force", pics[i], tmp("a.svg"), tmp("a.png"));
        run_to("a.json", "attention -m %s -p %s %s", model, "the cat sat on the mat. the cat", extra);
        ref_check("svg %s %s %s", model, tmp("a.svg"), tmp("a.json"));
        ref_check("png %s %s %s", model, tmp("a.png"), tmp("a.svg"));
    }
}

/* A model directory whose name holds a control byte and a Latin-1 byte: the
 * title shows them escaped, the SVG stays XML, the PNG is drawn. */
static void test_picture_odd_name(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/na\001me\351", g_dir);
    run_result r = run_script("mkdir -p %s && cp %s/* %s/", sq(dir), fixture_path("models/tiny-f32"), sq(dir));
    assert_int_equal(r.status, 0);
    run_free(&r);
    char extra[1024];
    snprintf(extra, sizeof extra, "--layer 0 --head 1 --json --svg %s --png %s", tmp("odd.svg"), tmp("odd.png"));
    run_to("odd.json", "attention -m %s -p %s %s", dir, "the cat", extra);
    ref_check("svg %s %s %s", fixture_path("models/tiny-f32"), tmp("odd.svg"), tmp("odd.json"));
    char *svg = read_file(tmp("odd.svg"), NULL);
    assert_non_null(strstr(svg, "na\\x01me\\xe9: layer 0, head 1"));
    free(svg);
    ref_check("png %s %s %s", fixture_path("models/tiny-f32"), tmp("odd.png"), tmp("odd.svg"));
}

static void expect_error(int status, const char *msg, const char *fmt, ...) {
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    run_result r = run(NULL, "%s", args);
    if (r.status != status || !strstr(r.err, msg))
        fail_msg("`%s`: exit %d (expected %d), stderr:\n%s\nexpected: %s", args, r.status, status, r.err, msg);
    assert_string_equal(r.out, "");
    run_free(&r);
}

static void test_bad_input(void **state) {
    (void)state;
    const char *m = fixture_path("models/tiny-f32");
    const char *shape = "the model has 2 layers (0..1) of 4 heads (0..3)";
    char want[512];
    snprintf(want, sizeof want, "--ablate 99.0: layer 99 is out of range: %s", shape);
    const char *cmds[] = {"topk", "heads", "lens", "attention --layer 0 --head 0", "generate -n 2"};
    for (int i = 0; i < 5; i++) expect_error(1, want, "%s -m %s -p hi --ablate 99.0", cmds[i], m);
    expect_error(1, want, "eval -m %s --ablate 99.0 %s", m, fixture_path("cli/tiny-f32/eval.txt"));
    snprintf(want, sizeof want, "--ablate 0.*,1.4: head 4 is out of range: %s", shape);
    expect_error(1, want, "heads -m %s -p hi --ablate 0.*,1.4", m);
    expect_error(2, "--ablate 1: '1' is not L.H or L.*", "lens -m %s -p hi --ablate 1", m);
    expect_error(2, "--ablate 0.1,: an empty item", "topk -m %s -p hi --ablate 0.1,", m);
    expect_error(1, "--pos 5: the prompt has 3 tokens: positions 0..2, or -3..-1 counting from the end",
                 "lens -m %s -p 'the cat' --pos 5", m);
    expect_error(1, "--pos -4: the prompt has 3 tokens", "lens -m %s -p 'the cat' --pos -4", m);
    expect_error(2, "--sort: expected layer, prev_token", "heads -m %s -p hi --sort bogus", m);
    expect_error(2, "--export out.txt: a table is written as .json or .csv", "heads -m %s -p hi --export out.txt", m);
    expect_error(2, "--svg a.png: the file's name must end in .svg", "attention -m %s -p hi --layer 0 --head 0 --svg a.png", m);
    /* unwritable paths: a directory where the file would go, a file where a directory would */
    char keep[256], dir[256]; /* tmp's buffers are reused */
    snprintf(keep, sizeof keep, "%s", tmp("keep.csv"));
    snprintf(dir, sizeof dir, "%s", tmp("adir.csv"));
    save(keep, "keep me\n");
    mkdir(dir, 0755);
    expect_error(1, dir, "heads -m %s -p hi --export %s", m, dir);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    char under[512];
    snprintf(under, sizeof under, "%s/x.svg", keep);
    expect_error(1, keep, "attention -m %s -p hi --layer 0 --head 0 --svg %s", m, under);
    /* an existing file is refused without --force, before the model is even read */
    snprintf(want, sizeof want, "%s exists: --force replaces it", keep);
    expect_error(1, want, "heads -m %s -p hi --export %s", m, keep);
    expect_error(1, want, "lens -m /no/such/model -p hi --export %s", keep);
    expect_error(1, want, "topk -m %s -p hi --export %s", m, keep);
    char pic[256];
    snprintf(pic, sizeof pic, "%s", tmp("keep.svg"));
    save(pic, "<svg/>\n");
    snprintf(want, sizeof want, "%s exists: --force replaces it", pic);
    expect_error(1, want, "attention -m %s -p hi --layer 0 --head 0 --export %s --svg %s", m, tmp("new.csv"), pic);
    assert_int_equal(access(tmp("new.csv"), F_OK), -1); /* nothing written when one target is refused */
    /* with --force a failed run leaves the file as it was */
    expect_error(1, "layer 99", "heads -m %s -p hi --ablate 99.0 --export %s --force", m, keep);
    expect_error(1, "--pos 7", "lens -m %s -p hi --pos 7 --force --export %s", m, keep);
    char *kept = read_file(keep, NULL);
    assert_string_equal(kept, "keep me\n");
    free(kept);
    kept = read_file(pic, NULL);
    assert_string_equal(kept, "<svg/>\n");
    free(kept);
    /* and a run that works replaces it */
    run_to("out.txt", "heads -m %s -p %s --export %s --force", m, "hi", keep);
    kept = read_file(keep, NULL);
    if (!strstr(kept, "prev_token")) fail_msg("heads --export --force did not replace %s: %s", keep, kept);
    free(kept);
}

/* attribute --json against the reference on GPT-2 and the decoder families,
 * at the last position (its target the top 1), before it with a baseline
 * (by text and by id), and ablated; its exports; its text at 80 columns. */
static void test_attribute(void **state) {
    (void)state;
    const char *models[] = {"models/tiny-f32", "models/tiny-head64", "arch/models/qwen3", "arch/models/neox",
                            "arch/models/llama-bias", "arch/models/mistral"};
    const char *prompts[] = {"the cat sat on the mat, the cat sat", odd_prompt};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        for (int p = 0; p < 2; p++) {
            const char *model = fixture_path("%s", models[i]);
            printf("  attribute: %s, prompt %d\n", models[i], p);
            run_to("attr.json", "attribute -m %s -p %s --json %s", model, prompts[p], "");
            attr_check("check %s %s --top1", model, tmp("attr.json"));
            run_to("attr.json", "attribute -m %s -p %s --json %s", model, prompts[p], "--pos -3 --vs ' the'");
            attr_check("check %s %s", model, tmp("attr.json"));
            run_to("attr.json", "attribute -m %s -p %s --json %s", model, prompts[p], "--pos 1 --token-id 7 --vs-id 9");
            attr_check("check %s %s", model, tmp("attr.json"));
            if (i < 2) {
                run_to("attr.json", "attribute -m %s -p %s --json %s", model, prompts[p], "--ablate 0.1,1.* --token ' the'");
                attr_check("check %s %s", model, tmp("attr.json"));
            }
        }
    /* the exports: the JSON is what --json printed, the CSV its rows */
    const char *model = fixture_path("models/tiny-f32");
    run_to("attr.json", "attribute -m %s -p %s --json --ablate 1.*,0.2 --vs ' the' --export %s", model, odd_prompt,
           tmp("attr.csv"));
    attr_check("csv %s %s", tmp("attr.csv"), tmp("attr.json"));
    run_to("out.txt", "attribute -m %s -p %s --ablate 1.*,0.2 --vs ' the' --export %s", model, odd_prompt,
           tmp("attr-export.json"));
    char *printed = read_file(tmp("attr.json"), NULL), *written = read_file(tmp("attr-export.json"), NULL);
    assert_string_equal(written, printed);
    if (!strstr(printed, "\"model\":\"tiny-f32\"") || !strstr(printed, "\"ablated\":[[0,2],[1,0],[1,1],[1,2],[1,3]]"))
        fail_msg("attribute --json lacks the model or the ablation: %s", printed);
    free(printed), free(written);
    /* the text: the sum check, the parts sorted with their bars, 80 columns */
    run_result r = run(NULL, "attribute -m models/reverse -p '12 7 99 3 45 0 8 61 61 8 0' -k 5");
    assert_int_equal(r.status, 0);
    const char *want[] = {"reverse: why \" 45\" after \" 0\" (position 10 of 11)", "logit 14.7", "the parts add up to 14.7",
                          "final LayerNorm's scale frozen at", "by kind: embed", "the 5 largest of 14 parts:",
                          "  L0 H1            +4.5", "|████"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(r.out, want[i])) fail_msg("attribute's text lacks '%s':\n%s", want[i], r.out);
    int col = 0, lines = 0;
    for (const unsigned char *c = (const unsigned char *)r.out; *c; c++) {
        if (*c == '\n') lines++, col = 0;
        else if ((*c & 0xC0) != 0x80 && ++col > 80) fail_msg("line %d is wider than 80 columns:\n%s", lines + 1, r.out);
    }
    assert_int_equal(lines, 11);
    run_free(&r);
}

/* patch_ref.py: `patch` against the patching reference */
static void patch_check(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vscript_check("patch_ref.py", fmt, ap);
    va_end(ap);
}

/* patch --json against the reference, each kind, on GPT-2 and two decoder
 * families; the exports; the text at 80 columns; bad input. */
static void test_patch(void **state) {
    (void)state;
    static const char *models[] = {"models/tiny-f32", "arch/models/qwen2", "arch/models/neox"};
    static const char *what[] = {"resid", "mlp", "heads"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        for (int w = 0; w < 3; w++) {
            const char *model = fixture_path("%s", models[i]);
            char extra[128];
            snprintf(extra, sizeof extra, "--corrupt 'the cat sat at the' --answer ' the' --wrong ' a' --what %s --json",
                     what[w]);
            run_to("patch.json", "patch -m %s --clean %s %s", model, "the cat sat on the", extra);
            patch_check("check %s %s", model, tmp("patch.json"));
        }
    /* the exports: the JSON is what --json printed, the CSV a row a cell */
    const char *m = fixture_path("models/tiny-f32");
    char extra[512];
    snprintf(extra, sizeof extra, "--corrupt 'the cat sat at the' --answer ' the' --wrong ' a' --json --ablate 1.0 "
             "--export %s", tmp("patch-export.json"));
    run_to("patch.json", "patch -m %s --clean %s %s", m, "the cat sat on the", extra);
    char *printed = read_file(tmp("patch.json"), NULL), *written = read_file(tmp("patch-export.json"), NULL);
    assert_string_equal(written, printed);
    if (!strstr(printed, "\"model\":\"tiny-f32\"") || !strstr(printed, "\"ablated\":[[1,0]]") ||
        !strstr(printed, "\"what\":\"resid\"") || !strstr(printed, "\"cols\":\"pos\""))
        fail_msg("patch --json lacks the model, the ablation or the grid's axes: %s", printed);
    free(printed), free(written);
    snprintf(extra, sizeof extra, "--corrupt 'the cat sat at the' --answer ' the' --wrong ' a' --what heads --export %s",
             tmp("patch.csv"));
    run_to("out.txt", "patch -m %s --clean %s %s", m, "the cat sat on the", extra);
    char *csv = read_file(tmp("patch.csv"), NULL);
    int rows = 0;
    for (const char *c = csv; *c; c++) rows += *c == '\n';
    assert_int_equal(rows, 1 + 2 * 4); /* the header, then 2 layers x 4 heads */
    assert_true(!strncmp(csv, "model,what,layer,pos,head,clean_token,corrupt_token,score,ld,ablated\r\n", 70));
    assert_non_null(strstr(csv, "tiny-f32,heads,1,,3,,,"));
    free(csv);
    /* the text: both LDs, the grid, 80 columns */
    run_result r = run(NULL, "patch -m %s --clean 'the cat sat on the' --corrupt 'the cat sat at the' --answer ' the' "
                       "--wrong ' a'", m);
    assert_int_equal(r.status, 0);
    const char *want[] = {"tiny-f32: activation patching of the residual stream entering each layer", "LD = logit(",
                          "LD clean ", ", corrupt ", "pos  token (clean/corrupt)", "L0    L1", "runs, "};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(r.out, want[i])) fail_msg("patch's text lacks '%s':\n%s", want[i], r.out);
    int col = 0, line = 1;
    for (const unsigned char *c = (const unsigned char *)r.out; *c; c++) {
        if (*c == '\n') line++, col = 0;
        else if ((*c & 0xC0) != 0x80 && ++col > 80) fail_msg("line %d is wider than 80 columns:\n%s", line, r.out);
    }
    run_free(&r);
    /* bad input: one line each, nothing written */
    expect_error(1, "the clean prompt is 7 tokens and the corrupt one 9", "patch -m %s --clean 'the cat sat on the' "
                 "--corrupt 'the cat sat on the mat' --answer ' the' --wrong ' a'", m);
    expect_error(1, "--answer 'the cat' is 3 tokens", "patch -m %s --clean 'the cat sat on the' --corrupt "
                 "'the cat sat at the' --answer 'the cat' --wrong ' a'", m);
    expect_error(1, "the clean and corrupt prompts are the same 3 tokens", "patch -m %s --clean 'the cat' "
                 "--corrupt 'the cat' --answer ' the' --wrong ' a'", m);
    expect_error(2, "--what all: expected resid, mlp or heads", "patch -m %s --clean a --corrupt b --answer a --wrong b "
                 "--what all", m);
    expect_error(2, "patch needs --wrong B", "patch -m %s --clean a --corrupt b --answer a", m);
    expect_error(2, "--answer and --answer-id both name the answer", "patch -m %s --clean a --corrupt b --answer a "
                 "--answer-id 3 --wrong b", m);
    expect_error(1, "mlp is not patched in gemma2", "patch -m %s --clean 'the cat sat on the' --corrupt "
                 "'the cat sat at the' --answer ' the' --wrong ' a' --what mlp", fixture_path("arch/models/gemma2"));
}

static void test_attribute_bad_input(void **state) {
    (void)state;
    const char *m = fixture_path("models/tiny-f32");
    expect_error(1, "--pos 5: the prompt has 3 tokens: positions 0..2", "attribute -m %s -p 'the cat' --pos 5", m);
    expect_error(1, "--token 'the cat' is 3 tokens (\"the\" \" c\" \"at\"), not one: give a single token's text, or --token-id",
                 "attribute -m %s -p 'the cat' --token 'the cat'", m);
    expect_error(1, "--vs '': the text is empty", "attribute -m %s -p 'the cat' --vs ''", m);
    expect_error(1, "--token-id 9999: outside the vocabulary of model tiny-f32 (ids 0..506)",
                 "attribute -m %s -p 'the cat' --token-id 9999", m);
    expect_error(1, "--vs-id 507: outside the vocabulary", "attribute -m %s -p 'the cat' --vs-id 507", m);
    expect_error(1, "the target and the baseline are the same token", "attribute -m %s -p 'the cat' --token ' the' --vs ' the'", m);
    expect_error(1, "the prompt is empty: at least one token is needed", "attribute -m %s -p ''", m);
    expect_error(2, "--token and --token-id both name the target", "attribute -m %s -p hi --token a --token-id 3", m);
    expect_error(2, "--vs and --vs-id both name the baseline", "attribute -m %s -p hi --vs a --vs-id 3", m);
    expect_error(2, "attribute needs -p PROMPT", "attribute -m %s", m);
    expect_error(2, "--token-id: expected an integer", "attribute -m %s -p hi --token-id -1", m);
    expect_error(1, "--ablate 2.0: layer 2 is out of range", "attribute -m %s -p hi --ablate 2.0", m);
    char keep[256];
    snprintf(keep, sizeof keep, "%s", tmp("keep-attr.csv"));
    save(keep, "keep me\n");
    char want[512];
    snprintf(want, sizeof want, "%s exists: --force replaces it", keep);
    expect_error(1, want, "attribute -m %s -p hi --export %s", m, keep);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/gptscope-microscope-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_numpy),
        cmocka_unit_test(test_exports),
        cmocka_unit_test(test_picture_odd_name),
        cmocka_unit_test(test_pictures),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_attribute),
        cmocka_unit_test(test_attribute_bad_input),
        cmocka_unit_test(test_patch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
