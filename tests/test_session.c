/* test_session.c — the chat session on the tiny fixture model (2 layers, n_ctx
 * 64, 507-token vocabulary with <|endoftext|> = 506).
 *
 * Expectations are computed independently of the session: token sequences by
 * encoding hand-built strings with the tokenizer, logits by a fresh context
 * fed the whole sequence at once, argmax and softmax in double here, the
 * stop-string cut from a plain greedy reference run. */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "gpt2.h"
#include <cjson/cJSON.h>

#include "test_util.h"

static gpt2_model *g_model;
static gpt2_model *g_draft_lm; /* tiny-prefix-lmhead: same tokenizer, other weights (rejects some drafts) */
/* When set, mk() gives every session this draft with K = g_draft_k (draft mode
 * runs the plain-mode tests' scenarios unchanged). */
static const gpt2_model *g_draft;
static int g_draft_k;
static const gpt2_tokenizer *g_tok;
static int32_t g_eot;
static char g_dir[64];

/* ---- helpers ---- */

typedef struct {
    int32_t *v;
    int n;
} ivec;

static void iv_cat(ivec *a, const int32_t *v, int n) {
    a->v = realloc(a->v, (size_t)(a->n + n + 1) * sizeof *a->v);
    assert_non_null(a->v);
    if (n) memcpy(a->v + a->n, v, (size_t)n * sizeof *v);
    a->n += n;
}

static void iv_push(ivec *a, int32_t x) { iv_cat(a, &x, 1); }

static void iv_enc(ivec *a, const char *s, size_t len) {
    int32_t *ids;
    size_t n;
    gpt2_error err;
    if (gpt2_tokenizer_encode(g_tok, s, len, 0, &ids, &n, &err) != GPT2_OK) fail_msg("%s", err.msg);
    iv_cat(a, ids, (int)n);
    free(ids);
}

static void iv_encs(ivec *a, const char *s) { iv_enc(a, s, strlen(s)); }

/* Bytes growing buffer. */
typedef struct {
    char *b;
    size_t n;
} buf;

static void buf_add(buf *x, const char *p, size_t n) {
    x->b = realloc(x->b, x->n + n + 1);
    assert_non_null(x->b);
    if (n) memcpy(x->b + x->n, p, n);
    x->n += n;
    x->b[x->n] = '\0';
}

static void buf_adds(buf *x, const char *s) { buf_add(x, s, strlen(s)); }

static void decode(const int32_t *ids, int n, buf *out) {
    for (int i = 0; i < n; i++) {
        size_t l;
        const char *b = gpt2_tokenizer_token_bytes(g_tok, ids[i], &l);
        if (b) buf_add(out, b, l);
    }
}

/* What a UTF-8 stream shows for bytes, flushed at the end. */
static void shown_of(const char *p, size_t n, buf *out) {
    char *o = malloc(3 * (n + 4) + 16);
    gpt2_utf8_stream u = {0};
    size_t w = gpt2_utf8_stream_push(&u, p, n, o);
    w += gpt2_utf8_stream_flush(&u, o + w);
    buf_add(out, o, w);
    free(o);
}

static gpt2_sampler_params greedy(void) {
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.temperature = 0;
    return p;
}

static gpt2_sampler_params hot(uint64_t seed, float temperature) {
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    p.seed = seed;
    return p;
}

static const char *const no_stop[1] = {NULL};

/* A short template for the 64-token context. */
static gpt2_chat_template short_tmpl(void) {
    return (gpt2_chat_template){.name = "short",
                                .description = "",
                                .preamble = "Hi.\n",
                                .user_prefix = "U:",
                                .user_suffix = "\n",
                                .assistant_prefix = "A:",
                                .assistant_suffix = "\n",
                                .stop = no_stop,
                                .n_stop = 0};
}

static gpt2_session *mk(const gpt2_chat_template *t, int n_ctx, int n_batch, int max_new, gpt2_sampler_params sp,
                        gpt2_session_policy pol) {
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_ctx = n_ctx;
    p.context.n_batch = n_batch;
    p.context.n_threads = 1;
    p.sampler = sp;
    p.max_new_tokens = max_new;
    p.context_policy = pol;
    p.chat_template = t;
    gpt2_session *s;
    gpt2_error err;
    if (gpt2_session_new(g_model, p, &s, &err) != GPT2_OK) fail_msg("session_new: %s", err.msg);
    if (g_draft && gpt2_session_set_draft(s, g_draft, g_draft_k, &err) != GPT2_OK)
        fail_msg("set_draft: %s", err.msg);
    return s;
}

static void send_ok(gpt2_session *s, const char *text) {
    gpt2_error err;
    if (gpt2_session_send(s, text, strlen(text), NULL, NULL, &err) != GPT2_OK) fail_msg("send: %s", err.msg);
}

typedef struct {
    ivec ids;      /* every sampled id, kept or not */
    ivec kept;     /* kept ids */
    buf shown;     /* concatenated out.text */
    gpt2_reply_end end;
    int steps;
} reply;

static void reply_free(reply *r) {
    free(r->ids.v);
    free(r->kept.v);
    free(r->shown.b);
    memset(r, 0, sizeof *r);
}

/* Steps until the reply is done (at most limit steps). */
static reply run_reply(gpt2_session *s, int limit) {
    reply r = {0};
    gpt2_session_token t;
    gpt2_error err;
    for (r.steps = 0; r.steps < limit; r.steps++) {
        if (gpt2_session_step(s, &t, &err) != GPT2_OK) fail_msg("step: %s", err.msg);
        assert_non_null(t.text);
        assert_int_equal(strlen(t.text) <= t.len, 1);
        if (t.id >= 0) iv_push(&r.ids, t.id);
        if (t.kept) iv_push(&r.kept, t.id);
        buf_add(&r.shown, t.text, t.len);
        if (t.done) {
            r.end = t.end;
            r.steps++;
            return r;
        }
    }
    fail_msg("reply did not end in %d steps", limit);
    return r;
}

static void turn_of(gpt2_session *s, int i, gpt2_turn *t) { assert_int_equal(gpt2_session_turn(s, i, t), 1); }

/* The session's tokens equal want, and the cache holds exactly them. */
static void assert_tokens(gpt2_session *s, const ivec *want) {
    int n;
    const int32_t *t = gpt2_session_tokens(s, &n);
    if (n != want->n) fail_msg("session has %d tokens, expected %d", n, want->n);
    for (int i = 0; i < n; i++)
        if (t[i] != want->v[i]) fail_msg("token %d: %d, expected %d", i, t[i], want->v[i]);
    const gpt2_context *ctx = gpt2_session_context(s);
    assert_int_equal(gpt2_context_n_past(ctx), n);
    assert_memory_equal(gpt2_context_tokens(ctx), want->v, (size_t)n * sizeof(int32_t));
}

static ivec session_tokens(gpt2_session *s) {
    int n;
    const int32_t *t = gpt2_session_tokens(s, &n);
    ivec v = {0};
    iv_cat(&v, t, n);
    return v;
}

/* The cache holds the session's tokens, and its logits equal a fresh
 * context's fed the whole sequence at once. */
static void assert_cache_fresh(gpt2_session *s) {
    ivec t = session_tokens(s);
    assert_tokens(s, &t);
    const gpt2_context *ctx = gpt2_session_context(s);
    const float *got = gpt2_context_logits(ctx);
    assert_non_null(got);
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_ctx = gpt2_session_n_ctx(s);
    cp.n_threads = 1;
    gpt2_context *fresh;
    gpt2_error err;
    if (gpt2_context_new(g_model, cp, &fresh, &err) != GPT2_OK) fail_msg("%s", err.msg);
    if (gpt2_context_eval(fresh, t.v, t.n, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const float *want = gpt2_context_logits(fresh);
    int V = gpt2_model_config(g_model)->n_vocab;
    for (int i = 0; i < V; i++)
        if (fabsf(got[i] - want[i]) > 1e-5f) fail_msg("logit %d: %.8g, fresh context %.8g", i, got[i], want[i]);
    gpt2_context_free(fresh);
    free(t.v);
}

/* Hand rendering (the header's rule) of turns [first, n_turns). */
static ivec hand_render(gpt2_session *s, const gpt2_chat_template *t, int first, int n_turns) {
    ivec v = {0};
    iv_encs(&v, t->preamble);
    for (int i = first; i < n_turns; i++) {
        gpt2_turn u;
        turn_of(s, i, &u);
        if (u.role == GPT2_ROLE_ASSISTANT) {
            iv_cat(&v, u.ids, u.n_ids);
            continue;
        }
        buf b = {0};
        if (i > first) {
            buf_adds(&b, t->assistant_suffix);
            if (t->eot_after_turn) {
                iv_enc(&v, b.b, b.n);
                iv_push(&v, g_eot);
                b.n = 0;
            }
        }
        buf_adds(&b, t->user_prefix);
        buf_add(&b, u.text, u.len);
        buf_adds(&b, t->user_suffix);
        if (t->eot_after_turn) {
            iv_enc(&v, b.b, b.n);
            iv_push(&v, g_eot);
            b.n = 0;
        }
        buf_adds(&b, t->assistant_prefix);
        iv_enc(&v, b.b ? b.b : "", b.n);
        free(b.b);
    }
    return v;
}

/* Everything load must leave alone, for before/after comparisons. */
typedef struct {
    ivec toks;
    int n_past, n_turns, first, replying, max_new;
    buf texts;
    char tmpl[64];
    gpt2_sampler_params sp;
    uint64_t rng;
    gpt2_session_policy pol;
} snap;

static snap take(gpt2_session *s) {
    snap x = {0};
    x.toks = session_tokens(s);
    x.n_past = gpt2_context_n_past(gpt2_session_context(s));
    x.n_turns = gpt2_session_n_turns(s);
    x.first = -1;
    for (int i = 0; i < x.n_turns; i++) {
        gpt2_turn u;
        turn_of(s, i, &u);
        if (u.in_context && x.first < 0) x.first = i;
        buf_add(&x.texts, u.text, u.len);
        buf_add(&x.texts, "\x01", 1);
    }
    x.replying = gpt2_session_replying(s);
    x.max_new = gpt2_session_max_new_tokens(s);
    snprintf(x.tmpl, sizeof x.tmpl, "%s", gpt2_session_template(s)->name);
    x.sp = gpt2_session_sampler_params(s);
    x.rng = gpt2_session_rng_state(s);
    x.pol = gpt2_session_context_policy(s);
    return x;
}

static void assert_same(const snap *a, const snap *b) {
    assert_int_equal(a->toks.n, b->toks.n);
    assert_memory_equal(a->toks.v, b->toks.v, (size_t)a->toks.n * sizeof(int32_t));
    assert_int_equal(a->n_past, b->n_past);
    assert_int_equal(a->n_turns, b->n_turns);
    assert_int_equal(a->first, b->first);
    assert_int_equal(a->replying, b->replying);
    assert_int_equal(a->max_new, b->max_new);
    assert_int_equal(a->texts.n, b->texts.n);
    if (a->texts.n) assert_memory_equal(a->texts.b, b->texts.b, a->texts.n);
    assert_string_equal(a->tmpl, b->tmpl);
    assert_memory_equal(&a->sp, &b->sp, sizeof a->sp);
    assert_true(a->rng == b->rng);
    assert_int_equal(a->pol, b->pol);
}

static void snap_free(snap *x) {
    free(x->toks.v);
    free(x->texts.b);
}

static const char *tmp_path(const char *name) {
    static char p[4][256];
    static int k;
    char *o = p[k++ & 3];
    snprintf(o, 256, "%s/%s", g_dir, name);
    return o;
}

static void write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
}

static int count_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void rm_dir_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
}

static int group_setup(void **state) {
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/tiny-f32"), &g_model, &err) != GPT2_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    if (gpt2_model_load(fixture_path("models/tiny-prefix-lmhead"), &g_draft_lm, &err) != GPT2_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    g_tok = gpt2_model_tokenizer(g_model);
    g_eot = gpt2_tokenizer_eot(g_tok);
    snprintf(g_dir, sizeof g_dir, "/tmp/gptscope-session-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    return 0;
}

static int group_teardown(void **state) {
    gpt2_model_free(g_model);
    gpt2_model_free(g_draft_lm);
    rm_dir_files(g_dir);
    rmdir(g_dir);
    return 0;
}

/* ---- rendering ---- */

static void test_render_transcript(void **state) {
    const gpt2_chat_template *t = gpt2_chat_template_builtin("transcript");
    assert_non_null(t);
    gpt2_session *s = mk(NULL, 64, 256, 2, greedy(), GPT2_SESSION_DROP_OLDEST);
    assert_string_equal(gpt2_session_template(s)->name, "transcript");
    send_ok(s, "Hi");
    ivec want = {0};
    iv_encs(&want, "A conversation between a user and an assistant.\n\n");
    iv_encs(&want, "User: Hi\nAssistant:");
    assert_tokens(s, &want);
    assert_int_equal(gpt2_session_get_stats(s).last_prefill, want.n);
    reply r = run_reply(s, 10);
    assert_int_equal(r.end, GPT2_REPLY_MAX_TOKENS);
    assert_int_equal(r.kept.n, 2);
    iv_cat(&want, r.kept.v, r.kept.n);
    assert_tokens(s, &want);
    gpt2_turn a;
    turn_of(s, 1, &a);
    buf d = {0};
    decode(r.kept.v, r.kept.n, &d);
    assert_int_equal(a.len, d.n);
    assert_memory_equal(a.text, d.b, d.n);
    reply_free(&r);
    free(d.b);
    free(want.v);
    gpt2_session_free(s);
    /* The second turn (closing the reply, opening the next) with the same
     * template minus its 30-token preamble, which would not leave room in 64. */
    gpt2_chat_template tn = *t;
    tn.name = "transcript-np";
    tn.preamble = "";
    s = mk(&tn, 64, 256, 2, greedy(), GPT2_SESSION_REFUSE);
    send_ok(s, "Hi");
    r = run_reply(s, 10);
    send_ok(s, "Yo");
    want = (ivec){0};
    iv_encs(&want, "User: Hi\nAssistant:");
    iv_cat(&want, r.kept.v, r.kept.n);
    iv_encs(&want, "\nUser: Yo\nAssistant:");
    assert_tokens(s, &want);
    reply_free(&r);
    free(want.v);
    gpt2_session_free(s);
}

static void test_render_dialogpt(void **state) {
    const gpt2_chat_template *t = gpt2_chat_template_builtin("dialogpt");
    assert_non_null(t);
    assert_int_equal(t->eot_after_turn, 1);
    gpt2_session *s = mk(t, 64, 256, 3, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "hello");
    ivec want = {0};
    iv_encs(&want, "hello");
    iv_push(&want, g_eot);
    assert_tokens(s, &want);
    reply r = run_reply(s, 10);
    iv_cat(&want, r.kept.v, r.kept.n);
    assert_tokens(s, &want);
    send_ok(s, "who");
    iv_push(&want, g_eot); /* the reply's end */
    iv_encs(&want, "who");
    iv_push(&want, g_eot);
    assert_tokens(s, &want);
    /* A literal "<|endoftext|>" in a message is text, not the special id. */
    gpt2_session_stop(s, NULL, NULL);
    send_ok(s, "<|endoftext|>");
    int n;
    const int32_t *tk = gpt2_session_tokens(s, &n);
    int n_eot = 0;
    for (int i = want.n; i < n; i++) n_eot += tk[i] == g_eot;
    assert_int_equal(n_eot, 2); /* the one closing the reply, the one closing this turn */
    assert_true(n - want.n > 3);
    reply_free(&r);
    free(want.v);
    gpt2_session_free(s);
}

static void test_render_raw(void **state) {
    const gpt2_chat_template *t = gpt2_chat_template_builtin("raw");
    assert_non_null(t);
    gpt2_session *s = mk(t, 64, 256, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "The cat");
    ivec want = {0};
    iv_encs(&want, "The cat");
    assert_tokens(s, &want);
    reply r = run_reply(s, 10);
    iv_cat(&want, r.kept.v, r.kept.n);
    send_ok(s, " and");
    iv_encs(&want, " and");
    assert_tokens(s, &want);
    /* Nothing to condition on: empty raw session, empty message. */
    gpt2_session *e = mk(t, 64, 256, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    gpt2_error err;
    assert_int_equal(gpt2_session_send(e, "", 0, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "nothing to condition on"));
    assert_int_equal(gpt2_session_n_turns(e), 0);
    gpt2_session_free(e);
    reply_free(&r);
    free(want.v);
    gpt2_session_free(s);
}

/* A tokenizer that puts a BOS before a text (a GGUF's add_bos_token, Llama 3's
 * post-processor): the conversation starts with it, once, and only there. */
static void test_render_bos(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("hf_gguf/llama3-bos.gguf"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_ctx = 64;
    p.context.n_threads = 1;
    p.chat_template = gpt2_chat_template_builtin("transcript");
    gpt2_session *s;
    assert_int_equal(gpt2_session_new(m, p, &s, &err), GPT2_OK);
    send_ok(s, "Hello");
    int n;
    const int32_t *t = gpt2_session_tokens(s, &n);
    assert_true(n > 2);
    assert_int_equal(t[0], 128000);
    for (int i = 1; i < n; i++) assert_int_not_equal(t[i], 128000);
    gpt2_session_free(s);
    gpt2_model_free(m);
}

/* A model's own Jinja template (ChatML here, as Qwen's and SmolLM2's carry it):
 * the conversation is the template's text encoded with its special tokens, a
 * reply re-rendered inside it on the next turn; the expected texts written out
 * by hand from ChatML's definition. */
static void test_render_jinja(void **state) {
    (void)state;
    static const char chatml[] =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("hf_gguf/qwen2_5.gguf"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    gpt2_chat_template t = {.name = "chatml", .jinja = chatml};
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_ctx = 64;
    p.context.n_threads = 1;
    p.sampler = greedy();
    p.max_new_tokens = 5;
    p.chat_template = &t;
    gpt2_session *s;
    if (gpt2_session_new(m, p, &s, &err) != GPT2_OK) fail_msg("%s", err.msg);
    send_ok(s, "Hi");
    buf want = {0};
    const char *head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    buf_add(&want, head, strlen(head));
    int32_t *ids;
    size_t n;
    int k;
    assert_int_equal(gpt2_tokenizer_encode(tok, want.b, want.n, GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    const int32_t *got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, (int)n);
    assert_memory_equal(got, ids, n * sizeof *ids);
    assert_int_equal(ids[0], gpt2_tokenizer_token_id(tok, "<|im_start|>", 12)); /* a special token, not text */
    free(ids);
    reply r = run_reply(s, 10);
    send_ok(s, "Next");
    gpt2_turn reply_turn;
    turn_of(s, 1, &reply_turn);
    buf_add(&want, reply_turn.text, reply_turn.len);
    const char *tail = "<|im_end|>\n<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n";
    buf_add(&want, tail, strlen(tail));
    assert_int_equal(gpt2_tokenizer_encode(tok, want.b, want.n, GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, (int)n);
    assert_memory_equal(got, ids, n * sizeof *ids);
    free(ids);
    reply_free(&r);
    free(want.b);
    gpt2_session_free(s);
    gpt2_model_free(m);
}

/* A model whose greedy reply is "Hi" then ChatML's <|im_end|>
 * (tests/ref/make_chat_fixtures.py, checked there against the float64
 * reference): the reply ends at the template's end of turn, though the
 * tokenizer's end of text and the config's end ids are another token; the
 * next message renders it closed as the template closes it. */
static void test_turn_end_token(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("chat/turn-end"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    const int32_t im_end = gpt2_tokenizer_token_id(tok, "<|im_end|>", 10);
    assert_true(im_end >= 0);
    assert_int_not_equal(im_end, gpt2_tokenizer_eot(tok));
    assert_false(gpt2_model_is_end(m, im_end));
    gpt2_chat_template *t;
    if (gpt2_chat_template_from_model(m, &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_ctx = 128;
    p.context.n_threads = 1;
    p.sampler = greedy();
    p.max_new_tokens = 20;
    p.chat_template = t;
    gpt2_session *s;
    if (gpt2_session_new(m, p, &s, &err) != GPT2_OK) fail_msg("%s", err.msg);
    send_ok(s, "Hello");
    reply r = run_reply(s, 30);
    assert_int_equal(r.end, GPT2_REPLY_EOT);
    assert_int_equal(r.ids.n, 3);
    assert_int_equal(r.ids.v[2], im_end);
    assert_int_equal(r.kept.n, 2);
    assert_int_equal(r.shown.n, 2);
    assert_memory_equal(r.shown.b, "Hi", 2);
    send_ok(s, "Next");
    static const char want[] = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi<|im_end|>\n"
                               "<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n";
    int32_t *ids;
    size_t n;
    int k;
    assert_int_equal(gpt2_tokenizer_encode(tok, want, strlen(want), GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    const int32_t *got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, (int)n);
    assert_memory_equal(got, ids, n * sizeof *ids);
    free(ids);
    reply_free(&r);
    gpt2_session_free(s);
    gpt2_chat_template_free(t);
    gpt2_model_free(m);
}

/* A SentencePiece tokenizer's space prefix: a reply's first token carries
 * the '▁' it puts before the first word ("▁I"), which decoding drops. What
 * the session streams, what a turn shows (text from .start) and what a Jinja
 * template gets as the reply's content are the reply's ids decoded by
 * gpt2_tokenizer_decode (checked against transformers.js in test_tokenizer_json),
 * while the turn's raw text keeps the token bytes. Sampled replies from the
 * Llama 2 vocabulary until one starts with such a token. */
static void test_reply_space_prefix(void **state) {
    (void)state;
    static const char tmpl[] = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                               "{% if add_generation_prompt %}[assistant:{% endif %}";
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("hf_gguf/llama2.gguf"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    assert_true(gpt2_tokenizer_space_prefix(tok));
    gpt2_chat_template t = {.name = "brackets", .jinja = tmpl};
    int seen = 0;
    for (uint64_t seed = 1; seed <= 20 && !seen; seed++) {
        gpt2_session_params p = gpt2_session_default_params();
        p.context.n_ctx = 64;
        p.context.n_threads = 1;
        p.sampler = hot(seed, 1.0f);
        p.max_new_tokens = 4;
        p.chat_template = &t;
        gpt2_session *s;
        if (gpt2_session_new(m, p, &s, &err) != GPT2_OK) fail_msg("%s", err.msg);
        send_ok(s, "Hello");
        reply r = run_reply(s, 10);
        gpt2_turn a;
        turn_of(s, 1, &a);
        size_t l0 = 0;
        const char *b0 = r.kept.n ? gpt2_tokenizer_token_bytes(tok, r.kept.v[0], &l0) : NULL;
        if (r.end == GPT2_REPLY_MAX_TOKENS && b0 && l0 > 1 && b0[0] == ' ') {
            seen = 1;
            char *dec;
            size_t dl;
            assert_int_equal(gpt2_tokenizer_decode(tok, r.kept.v, (size_t)r.kept.n, &dec, &dl, NULL), GPT2_OK);
            assert_true(dl > 0 && dec[0] != ' ');
            buf shown = {0};
            shown_of(dec, dl, &shown);
            assert_int_equal(r.shown.n, shown.n);
            assert_memory_equal(r.shown.b, shown.b, shown.n);
            assert_int_equal(a.start, 1);
            assert_int_equal(a.len - a.start, dl);
            assert_memory_equal(a.text + a.start, dec, dl);
            send_ok(s, "More");
            buf want = {0};
            buf_adds(&want, "[user:Hello][assistant:");
            buf_add(&want, dec, dl);
            buf_adds(&want, "][user:More][assistant:");
            int32_t *ids;
            size_t n;
            int k;
            assert_int_equal(gpt2_tokenizer_encode(tok, want.b, want.n, GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
            const int32_t *got = gpt2_session_tokens(s, &k);
            assert_int_equal(k, (int)n);
            assert_memory_equal(got, ids, n * sizeof *ids);
            free(ids), free(dec), free(shown.b), free(want.b);
        }
        reply_free(&r);
        gpt2_session_free(s);
    }
    assert_true(seen);
    gpt2_model_free(m);
}

/* The system message: first in a Jinja template's messages (the ChatML text
 * written out by hand), a blank line before a plain template's preamble; it
 * survives reset, turn drops and a save/load; a template that refuses it
 * fails with its own message and changes nothing. */
static void test_system_message(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("chat/turn-end"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    gpt2_chat_template *t;
    if (gpt2_chat_template_from_model(m, &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_ctx = 128;
    p.context.n_threads = 1;
    p.sampler = greedy();
    p.chat_template = t;
    gpt2_session *s;
    if (gpt2_session_new(m, p, &s, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_string_equal(gpt2_session_system(s), "");
    assert_int_equal(gpt2_session_set_system(s, "Be brief.", 9, NULL, NULL, &err), GPT2_OK);
    assert_string_equal(gpt2_session_system(s), "Be brief.");
    send_ok(s, "Hello");
    static const char want1[] = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                                "<|im_start|>assistant\n";
    int32_t *ids;
    size_t n;
    int k;
    assert_int_equal(gpt2_tokenizer_encode(tok, want1, strlen(want1), GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    const int32_t *got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, (int)n);
    assert_memory_equal(got, ids, n * sizeof *ids);
    free(ids);
    reply r = run_reply(s, 10);
    reply_free(&r);
    /* not while replying; a NUL byte refused */
    send_ok(s, "Again");
    assert_int_equal(gpt2_session_set_system(s, "x", 1, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    r = run_reply(s, 10);
    reply_free(&r);
    assert_int_equal(gpt2_session_set_system(s, "a\0b", 3, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    /* changing it re-renders from the start, and the cache holds the new tokens */
    assert_int_equal(gpt2_session_set_system(s, "Talk like a pirate.", 19, NULL, NULL, &err), GPT2_OK);
    static const char want2[] = "<|im_start|>system\nTalk like a pirate.<|im_end|>\n<|im_start|>user\nHello"
                                "<|im_end|>\n<|im_start|>assistant\nHi<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
                                "<|im_start|>assistant\nHi";
    assert_int_equal(gpt2_tokenizer_encode(tok, want2, strlen(want2), GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, (int)n);
    assert_memory_equal(got, ids, n * sizeof *ids);
    assert_int_equal(gpt2_context_n_past(gpt2_session_context(s)), k);
    assert_memory_equal(gpt2_context_tokens(gpt2_session_context(s)), ids, n * sizeof *ids);
    free(ids);
    /* saved and loaded with the conversation */
    const char *path = tmp_path("system.json");
    assert_int_equal(gpt2_session_save(s, path, &err), GPT2_OK);
    gpt2_session *b;
    if (gpt2_session_new(m, p, &b, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(gpt2_session_load(b, path, NULL, NULL, &err), GPT2_OK);
    assert_string_equal(gpt2_session_system(b), "Talk like a pirate.");
    got = gpt2_session_tokens(s, &k);
    int kb;
    const int32_t *gb = gpt2_session_tokens(b, &kb);
    assert_int_equal(kb, k);
    assert_memory_equal(gb, got, (size_t)k * sizeof *got);
    gpt2_session_free(b);
    /* reset keeps it */
    assert_int_equal(gpt2_session_reset(s, &err), GPT2_OK);
    assert_string_equal(gpt2_session_system(s), "Talk like a pirate.");
    /* a template that refuses a system message: its error, nothing changed */
    gpt2_chat_template strict = {.name = "strict",
                                 .jinja = "{% if messages and messages[0]['role'] == 'system' %}{{ raise_exception('System role "
                                          "not supported') }}{% endif %}{% for m in messages %}{{ m.content }}"
                                          "{% endfor %}"};
    assert_int_equal(gpt2_session_set_template(s, &strict, NULL, NULL, &err), GPT2_ERR_TEMPLATE);
    assert_non_null(strstr(err.msg, "System role not supported"));
    assert_int_equal(gpt2_session_set_system(s, "", 0, NULL, NULL, &err), GPT2_OK);
    assert_string_equal(gpt2_session_system(s), "");
    assert_int_equal(gpt2_session_set_template(s, &strict, NULL, NULL, &err), GPT2_OK);
    got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, 0);
    assert_int_equal(gpt2_session_set_system(s, "No.", 3, NULL, NULL, &err), GPT2_ERR_TEMPLATE);
    assert_string_equal(gpt2_session_system(s), "");
    gpt2_session_free(s);
    gpt2_chat_template_free(t);
    gpt2_model_free(m);
    /* a plain template: the text and a blank line before the preamble */
    gpt2_chat_template pt = short_tmpl();
    gpt2_session *q = mk(&pt, 64, 256, 3, greedy(), GPT2_SESSION_DROP_OLDEST);
    assert_int_equal(gpt2_session_set_system(q, "Sys", 3, NULL, NULL, &err), GPT2_OK);
    send_ok(q, "one");
    ivec w = {0};
    iv_encs(&w, "Sys\n\n");
    iv_encs(&w, "Hi.\n");
    iv_encs(&w, "U:one\nA:");
    assert_tokens(q, &w);
    free(w.v);
    gpt2_session_free(q);
}

/* Qwen2.5's template reads messages[0], which fails on no messages (in
 * Jinja2 too): an empty conversation renders as nothing, so a session opens
 * on it, and the first message renders whole. */
static void test_template_needs_a_message(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("chat/turn-end"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_chat_template t = {.name = "first",
                            .jinja = "{% if messages[0]['role'] != 'system' %}[default system]{% endif %}"
                                     "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"};
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_ctx = 128;
    p.context.n_threads = 1;
    p.chat_template = &t;
    gpt2_session *s;
    if (gpt2_session_new(m, p, &s, &err) != GPT2_OK) fail_msg("%s", err.msg);
    int k;
    gpt2_session_tokens(s, &k);
    assert_int_equal(k, 0);
    send_ok(s, "Hi");
    static const char want[] = "[default system][user:Hi]";
    int32_t *ids;
    size_t n;
    assert_int_equal(gpt2_tokenizer_encode(gpt2_model_tokenizer(m), want, strlen(want), 0, &ids, &n, NULL), GPT2_OK);
    const int32_t *got = gpt2_session_tokens(s, &k);
    assert_int_equal(k, (int)n);
    assert_memory_equal(got, ids, n * sizeof *ids);
    free(ids);
    assert_int_equal(gpt2_session_reset(s, &err), GPT2_OK);
    gpt2_session_tokens(s, &k);
    assert_int_equal(k, 0);
    gpt2_session_free(s);
    gpt2_model_free(m);
}

/* Greedy continuation of seq by a fresh context: n argmax tokens. */
static ivec greedy_after(const ivec *seq, int n) {
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    gpt2_context *c;
    gpt2_error err;
    if (gpt2_context_new(g_model, cp, &c, &err) != GPT2_OK) fail_msg("%s", err.msg);
    if (gpt2_context_eval(c, seq->v, seq->n, &err) != GPT2_OK) fail_msg("%s", err.msg);
    ivec out = {0};
    int V = gpt2_model_config(g_model)->n_vocab;
    for (int i = 0; i < n; i++) {
        const float *z = gpt2_context_logits(c);
        int32_t a = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > z[a]) a = v;
        iv_push(&out, a);
        if (gpt2_context_eval(c, &a, 1, &err) != GPT2_OK) fail_msg("%s", err.msg);
    }
    gpt2_context_free(c);
    return out;
}

/* Forking a reply at a token: the new branch keeps the prefix (one token
 * evaluated), goes on greedily as a fresh context does from there, the old
 * conversation (later turns included) stays a branch to switch back to, with
 * the cache as fresh as ever; where they part; what is refused; reset ends
 * the tree. */
static void test_fork(void **state) {
    (void)state;
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 8, greedy(), GPT2_SESSION_REFUSE);
    gpt2_error err;
    send_ok(s, "one");
    reply r1 = run_reply(s, 20);
    assert_true(r1.kept.n >= 4);
    send_ok(s, "two");
    reply r2 = run_reply(s, 20);
    snap before = take(s);
    assert_int_equal(gpt2_session_n_branches(s), 1);
    /* refusals */
    gpt2_token_candidates tc;
    assert_int_equal(gpt2_session_candidates(s, 1, 2, &tc), GPT2_OK);
    assert_true(tc.n >= 2);
    const int32_t alt = tc.c[1].id;
    assert_int_not_equal(alt, r1.kept.v[2]);
    assert_int_equal(gpt2_session_fork(s, 0, 0, alt, NULL, NULL, &err), GPT2_ERR_INVALID_ARG); /* a user turn */
    assert_int_equal(gpt2_session_fork(s, 1, r1.kept.n, alt, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_session_fork(s, 1, 2, r1.kept.v[2], NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_session_fork(s, 1, 2, g_eot, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_session_fork(s, 1, 2, 1 << 20, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    snap same = take(s);
    assert_same(&before, &same);
    /* fork reply 1 at its token 2 */
    assert_int_equal(gpt2_session_fork(s, 1, 2, alt, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_n_branches(s), 2);
    assert_int_equal(gpt2_session_branch(s), 1);
    assert_int_equal(gpt2_session_n_turns(s), 2);
    assert_true(gpt2_session_replying(s));
    assert_int_equal(gpt2_session_get_stats(s).last_call, 1); /* only the new token */
    assert_int_equal(gpt2_session_fork(s, 1, 0, alt, NULL, NULL, &err), GPT2_ERR_INVALID_ARG); /* replying */
    ivec seq = {0};
    iv_encs(&seq, "Hi.\n");
    iv_encs(&seq, "U:one\nA:");
    iv_cat(&seq, r1.kept.v, 2);
    iv_push(&seq, alt);
    reply r3 = run_reply(s, 20);
    ivec want = greedy_after(&seq, r3.kept.n);
    assert_int_equal(r3.kept.n, 8 - 3); /* max_new counts the reply's 3 tokens */
    assert_memory_equal(r3.kept.v, want.v, (size_t)want.n * sizeof *want.v);
    gpt2_turn a;
    turn_of(s, 1, &a);
    assert_int_equal(a.n_ids, 3 + r3.kept.n);
    assert_int_equal(a.ids[2], alt);
    assert_memory_equal(a.ids, r1.kept.v, 2 * sizeof *a.ids);
    buf d = {0};
    decode(a.ids, a.n_ids, &d);
    assert_int_equal(a.len, d.n);
    assert_memory_equal(a.text, d.b, d.n);
    gpt2_token_candidates kept;
    assert_int_equal(gpt2_session_candidates(s, 1, 2, &kept), GPT2_OK); /* the distribution at 2 stays */
    assert_memory_equal(&kept, &tc, sizeof tc);
    assert_cache_fresh(s);
    int at, tok;
    assert_int_equal(gpt2_session_branch_diverges(s, 0, &at, &tok), 1);
    assert_int_equal(at, 1);
    assert_int_equal(tok, 2);
    assert_int_equal(gpt2_session_branch_diverges(s, 1, &at, &tok), 0); /* the active one */
    /* back to the first branch: the conversation as it was, later turn included */
    assert_int_equal(gpt2_session_switch_branch(s, 5, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_session_switch_branch(s, 0, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_branch(s), 0);
    snap back = take(s);
    assert_same(&before, &back);
    assert_cache_fresh(s);
    assert_int_equal(gpt2_session_switch_branch(s, 1, NULL, NULL, &err), GPT2_OK);
    turn_of(s, 1, &a);
    assert_int_equal(a.ids[2], alt);
    assert_int_equal(gpt2_session_n_turns(s), 2);
    /* the tree through a session file (version 4): the same branches, the same one active */
    snap act = take(s);
    const char *path = tmp_path("tree.json");
    assert_int_equal(gpt2_session_save(s, path, &err), GPT2_OK);
    gpt2_session *b = mk(&t, 64, 256, 8, greedy(), GPT2_SESSION_REFUSE);
    assert_int_equal(gpt2_session_load(b, path, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_n_branches(b), 2);
    assert_int_equal(gpt2_session_branch(b), 1);
    snap lb = take(b);
    assert_same(&act, &lb);
    assert_int_equal(gpt2_session_switch_branch(b, 0, NULL, NULL, &err), GPT2_OK);
    snap lb0 = take(b);
    assert_same(&before, &lb0);
    assert_cache_fresh(b);
    gpt2_session_free(b);
    snap_free(&act), snap_free(&lb), snap_free(&lb0);
    /* a file whose active branch is listed as well is refused, naming it */
    char *text = read_file(path, NULL);
    cJSON *root = cJSON_Parse(text);
    cJSON *br = cJSON_GetObjectItemCaseSensitive(root, "branches");
    cJSON_ReplaceItemInArray(br, 1, cJSON_CreateObject());
    char *bad = cJSON_Print(root);
    FILE *f = fopen(path, "w");
    fputs(bad, f);
    fclose(f);
    b = mk(&t, 64, 256, 8, greedy(), GPT2_SESSION_REFUSE);
    assert_int_equal(gpt2_session_load(b, path, NULL, NULL, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "branches[1]: expected null (the active branch is the file's turns)"));
    gpt2_session_free(b);
    free(text), free(bad);
    cJSON_Delete(root);
    assert_int_equal(gpt2_session_reset(s, &err), GPT2_OK);
    assert_int_equal(gpt2_session_n_branches(s), 1);
    free(d.b), free(seq.v), free(want.v);
    reply_free(&r1), reply_free(&r2), reply_free(&r3);
    snap_free(&before), snap_free(&same), snap_free(&back);
    gpt2_session_free(s);
}

/* ---- KV reuse ---- */

static void test_kv_reuse(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 5, hot(3, 1.0f), GPT2_SESSION_DROP_OLDEST);
    assert_int_equal(gpt2_context_n_past(gpt2_session_context(s)), 0); /* nothing evaluated yet */
    send_ok(s, "one two");
    ivec b1 = {0};
    iv_encs(&b1, "Hi.\n");
    iv_encs(&b1, "U:one two\nA:");
    gpt2_session_stats st = gpt2_session_get_stats(s);
    assert_int_equal(st.last_prefill, b1.n);
    assert_int_equal(st.total, b1.n);
    reply r = run_reply(s, 10);
    st = gpt2_session_get_stats(s);
    assert_int_equal(st.last_reply, r.kept.n);
    long long before = st.total;
    send_ok(s, "three");
    ivec b2 = {0};
    iv_encs(&b2, "\nU:three\nA:");
    st = gpt2_session_get_stats(s);
    assert_int_equal(st.last_prefill, b2.n);
    assert_int_equal(st.last_call, b2.n);
    assert_int_equal(st.total - before, b2.n);
    ivec want = {0};
    iv_cat(&want, b1.v, b1.n);
    iv_cat(&want, r.kept.v, r.kept.n);
    iv_cat(&want, b2.v, b2.n);
    assert_tokens(s, &want);
    assert_cache_fresh(s);
    reply_free(&r);
    free(b1.v);
    free(b2.v);
    free(want.v);
    gpt2_session_free(s);
}

/* ---- stop strings ---- */

typedef struct {
    ivec prompt; /* the prompt's tokens */
    ivec ids;    /* greedy reply ids */
    int *off;    /* (ids.n + 1) byte offsets */
    buf text;
    gpt2_reply_end end;
} ref_run;

static ref_run greedy_reference(const char *prompt, int n) {
    const gpt2_chat_template *raw = gpt2_chat_template_builtin("raw");
    gpt2_session *s = mk(raw, 64, 256, n, greedy(), GPT2_SESSION_REFUSE);
    send_ok(s, prompt);
    ref_run R = {0};
    iv_encs(&R.prompt, prompt);
    reply r = run_reply(s, n + 1);
    R.ids = r.kept;
    r.kept.v = NULL;
    R.end = r.end;
    R.off = calloc((size_t)R.ids.n + 1, sizeof *R.off);
    for (int i = 0; i < R.ids.n; i++) {
        size_t l;
        const char *b = gpt2_tokenizer_token_bytes(g_tok, R.ids.v[i], &l);
        if (b) buf_add(&R.text, b, l);
        R.off[i + 1] = (int)R.text.n;
    }
    reply_free(&r);
    gpt2_session_free(s);
    return R;
}

static void ref_free(ref_run *R) {
    free(R->prompt.v);
    free(R->ids.v);
    free(R->off);
    free(R->text.b);
}

/* First occurrence of needle in the reference text, or -1. */
static long find_in(const buf *t, const char *needle, size_t n) {
    for (size_t i = 0; i + n <= t->n; i++)
        if (memcmp(t->b + i, needle, n) == 0) return (long)i;
    return -1;
}

/* Runs the raw template with one stop string and checks the cut at byte m of
 * the reference: reply text, shown text, kept ids (whole tokens before m, then
 * the re-encoded rest of the straddling token), cache. */
/* Each draft test starts without g_draft, even after one that failed with it set. */
static int no_draft(void **state) {
    g_draft = NULL;
    return 0;
}

static long g_discarded; /* draft mode: queued tokens a stop string discarded */

static void check_stop_cut(const ref_run *R, const char *prompt, const char *stop, size_t m) {
    const char *stops[1] = {stop};
    gpt2_chat_template t = *gpt2_chat_template_builtin("raw");
    t.name = "raw-stop";
    t.stop = stops;
    t.n_stop = 1;
    gpt2_session *s = mk(&t, 64, 256, R->ids.n, greedy(), GPT2_SESSION_REFUSE);
    send_ok(s, prompt);
    reply r = run_reply(s, R->ids.n + 1);
    assert_int_equal(r.end, GPT2_REPLY_STOP_STRING);
    assert_int_equal(gpt2_session_replying(s), 0);
    gpt2_turn a;
    turn_of(s, 1, &a);
    assert_int_equal(a.len, m);
    assert_memory_equal(a.text, R->text.b, m);
    assert_int_equal(a.shown, a.len);
    assert_null(strstr(a.text, stop));
    buf want_shown = {0};
    shown_of(R->text.b, m, &want_shown);
    assert_int_equal(r.shown.n, want_shown.n);
    if (r.shown.n) assert_memory_equal(r.shown.b, want_shown.b, r.shown.n);
    int k = 0;
    while (k < R->ids.n && R->off[k + 1] <= (int)m) k++;
    ivec want = {0};
    iv_cat(&want, R->prompt.v, R->prompt.n);
    iv_cat(&want, R->ids.v, k);
    iv_enc(&want, R->text.b + R->off[k], m - (size_t)R->off[k]);
    assert_tokens(s, &want); /* the stop is not in the cache, the tail is evaluated */
    assert_int_equal(a.n_ids, want.n - R->prompt.n);
    buf d = {0};
    decode(want.v + R->prompt.n, want.n - R->prompt.n, &d);
    assert_int_equal(d.n, m);
    if (m) assert_memory_equal(d.b, R->text.b, m);
    /* The last sampled id was the one that completed the stop: not kept. */
    assert_int_equal(r.ids.n, r.kept.n + 1);
    if (g_draft) {
        /* draft mode: what was still queued is gone, the cache is the sequence */
        assert_cache_fresh(s);
        gpt2_draft_stats ds;
        gpt2_session_draft_stats(s, &ds, NULL);
        assert_true(ds.iterations > 0);
        g_discarded += ds.produced - r.ids.n;
    }
    free(d.b);
    free(want.v);
    free(want_shown.b);
    reply_free(&r);
    gpt2_session_free(s);
}

static int has_nul(const char *p, size_t n) { return memchr(p, 0, n) != NULL; }

static void test_stop_strings(void **state) {
    const char *prompt = "The cat";
    ref_run R = greedy_reference(prompt, 40);
    assert_true(R.ids.n >= 8);
    /* (1) A stop split across two tokens: last byte of token j, first of j + 1. */
    int found = 0;
    for (int j = 2; j + 1 < R.ids.n && !found; j++) {
        int b = R.off[j + 1];
        if (R.off[j + 1] == R.off[j] || R.off[j + 2] == R.off[j + 1]) continue;
        char stop[3] = {R.text.b[b - 1], R.text.b[b], 0};
        if (has_nul(stop, 2) || find_in(&R.text, stop, 2) != b - 1) continue;
        found = 1;
        check_stop_cut(&R, prompt, stop, (size_t)b - 1);
    }
    assert_true(found);
    /* (2) A stop inside a token, after visible text of that same token: the
     * text before it is kept and re-encoded. */
    found = 0;
    for (int j = 1; j < R.ids.n && !found; j++) {
        int o = R.off[j];
        if (R.off[j + 1] - o < 2 || o + 3 > (int)R.text.n) continue;
        char stop[3] = {R.text.b[o + 1], R.text.b[o + 2], 0};
        if (has_nul(stop, 2) || find_in(&R.text, stop, 2) != o + 1) continue;
        found = 1;
        check_stop_cut(&R, prompt, stop, (size_t)o + 1);
    }
    assert_true(found);
    /* (3) Text that starts like a stop string but diverges is given out in
     * full, after being held back while it could still be one. */
    found = 0;
    for (int j = 2; j + 1 < R.ids.n && !found; j++) {
        int b = R.off[j + 1];
        if (R.off[j + 1] == R.off[j] || R.off[j + 2] == R.off[j + 1]) continue;
        char stop[4] = {R.text.b[b - 1], R.text.b[b], '~', 0};
        if (has_nul(stop, 3)) continue;
        for (const char *x = "~#@%"; *x && find_in(&R.text, stop, 3) >= 0; x++) stop[2] = *x;
        if (find_in(&R.text, stop, 3) >= 0 || find_in(&R.text, stop, 2) != b - 1) continue;
        found = 1;
        const char *stops[1] = {stop};
        gpt2_chat_template t = *gpt2_chat_template_builtin("raw");
        t.stop = stops;
        t.n_stop = 1;
        gpt2_session *s = mk(&t, 64, 256, R.ids.n, greedy(), GPT2_SESSION_REFUSE);
        send_ok(s, prompt);
        gpt2_session_token tk;
        gpt2_error err;
        buf shown = {0};
        int held_seen = 0;
        for (int i = 0;; i++) {
            assert_true(i <= R.ids.n);
            assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
            buf_add(&shown, tk.text, tk.len);
            if (tk.done) break;
            assert_int_equal(tk.id, R.ids.v[i]);
            gpt2_turn a;
            turn_of(s, 1, &a);
            if (i == j) { /* token j ends with the stop's first byte: held back */
                assert_int_equal(a.len, (size_t)b);
                assert_int_equal(a.shown, (size_t)b - 1);
                held_seen = 1;
            }
            /* Once token j + 1 brings a byte that differs from the stop's third, the
             * held byte is given out. */
            if (i == j + 1 && R.off[j + 2] - R.off[j + 1] >= 2) assert_true(a.shown >= (size_t)b);
        }
        assert_true(held_seen);
        assert_int_equal(tk.end, R.end);
        buf want = {0};
        shown_of(R.text.b, R.text.n, &want);
        assert_int_equal(shown.n, want.n);
        assert_memory_equal(shown.b, want.b, want.n);
        gpt2_turn a;
        turn_of(s, 1, &a);
        assert_int_equal(a.len, R.text.n);
        free(shown.b);
        free(want.b);
        gpt2_session_free(s);
    }
    assert_true(found);
    ref_free(&R);
}

/* A stop that starts exactly where a token starts: nothing to re-encode. */
static void test_stop_at_token_start(void **state) {
    ref_run R = greedy_reference("The cat", 40);
    int found = 0;
    for (int j = 1; j < R.ids.n && !found; j++) {
        int b = R.off[j];
        if (b + 2 > (int)R.text.n) break;
        char stop[3] = {R.text.b[b], R.text.b[b + 1], 0};
        if (has_nul(stop, 2) || find_in(&R.text, stop, 2) != b) continue;
        found = 1;
        check_stop_cut(&R, "The cat", stop, (size_t)b);
    }
    assert_true(found);
    ref_free(&R);
}

/* <|endoftext|> ends a reply and is kept neither in the reply nor the cache.
 * At a huge temperature every token is about equally likely, so regenerating
 * (a seeded RNG: always the same runs) soon draws it. */
static void test_eot_ends_reply(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 0, hot(2024, 1e4f), GPT2_SESSION_REFUSE);
    send_ok(s, "end");
    ivec prompt = session_tokens(s);
    gpt2_error err;
    int got = 0;
    for (int k = 0; k < 200 && !got; k++) {
        reply r = run_reply(s, 100);
        if (r.end == GPT2_REPLY_EOT) {
            got = 1;
            assert_int_equal(r.ids.v[r.ids.n - 1], g_eot);
            assert_int_equal(r.ids.n, r.kept.n + 1);
            for (int i = 0; i < r.kept.n; i++) assert_int_not_equal(r.kept.v[i], g_eot);
            ivec want = {0};
            iv_cat(&want, prompt.v, prompt.n);
            iv_cat(&want, r.kept.v, r.kept.n);
            assert_tokens(s, &want);
            gpt2_turn a;
            turn_of(s, 1, &a);
            buf d = {0};
            decode(r.kept.v, r.kept.n, &d);
            assert_int_equal(a.len, d.n);
            if (d.n) assert_memory_equal(a.text, d.b, d.n);
            free(d.b);
            free(want.v);
        } else {
            assert_int_equal(r.end, GPT2_REPLY_CONTEXT_FULL);
            assert_int_equal(gpt2_session_regen(s, NULL, NULL, &err), GPT2_OK);
        }
        reply_free(&r);
    }
    assert_true(got);
    free(prompt.v);
    gpt2_session_free(s);
}

/* ---- parameters mid-reply ---- */

static int argmax(const float *z, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (z[i] > z[best]) best = i;
    return best;
}

static double softmax_at(const float *z, int n, int id) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = z[i] > mx ? z[i] : mx;
    for (int i = 0; i < n; i++) sum += exp((double)z[i] - mx);
    return exp((double)z[id] - mx) / sum;
}

static void test_params_mid_reply(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 30, hot(11, 3.0f), GPT2_SESSION_REFUSE);
    send_ok(s, "go");
    int V = gpt2_model_config(g_model)->n_vocab, not_argmax = 0;
    float *z = malloc((size_t)V * sizeof *z);
    gpt2_session_token tk;
    gpt2_error err;
    for (int i = 0; i < 8; i++) {
        memcpy(z, gpt2_context_logits(gpt2_session_context(s)), (size_t)V * sizeof *z);
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        assert_false(tk.done);
        not_argmax += tk.id != argmax(z, V);
        assert_float_equal(tk.prob, softmax_at(z, V, tk.id), 1e-6);
    }
    assert_true(not_argmax > 0); /* temperature 3 really sampled */
    gpt2_sampler_params p = gpt2_session_sampler_params(s);
    p.temperature = 0;
    gpt2_session_set_sampler_params(s, p);
    assert_true(gpt2_session_sampler_params(s).temperature == 0.0f);
    for (int i = 0; i < 8; i++) {
        memcpy(z, gpt2_context_logits(gpt2_session_context(s)), (size_t)V * sizeof *z);
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        assert_int_equal(tk.id, argmax(z, V));
        assert_float_equal(tk.prob, softmax_at(z, V, tk.id), 1e-6);
        assert_false(tk.done);
    }
    /* max_new_tokens lowered mid-reply: two more tokens, then the limit. */
    gpt2_session_set_max_new_tokens(s, 18);
    assert_int_equal(gpt2_session_max_new_tokens(s), 18);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_false(tk.done);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_true(tk.done);
    assert_int_equal(tk.kept, 1);
    assert_int_equal(tk.end, GPT2_REPLY_MAX_TOKENS);
    gpt2_turn a;
    turn_of(s, 1, &a);
    assert_int_equal(a.n_ids, 18);
    /* Lowered below what a reply already has: it ends at the next step, unsampled. */
    send_ok(s, "more");
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    gpt2_session_set_max_new_tokens(s, 1);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_true(tk.done);
    assert_int_equal(tk.id, -1);
    assert_int_equal(tk.end, GPT2_REPLY_MAX_TOKENS);
    /* No reply in progress: step is an error. */
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no reply in progress"));
    free(z);
    gpt2_session_free(s);
}

/* ---- stop (Esc), send while replying ---- */

static void test_stop_and_busy(void **state) {
    const char *stops[1] = {"\x7f\x7f"};
    gpt2_chat_template t = short_tmpl();
    t.stop = stops;
    t.n_stop = 1;
    gpt2_session *s = mk(&t, 64, 256, 20, hot(5, 1.0f), GPT2_SESSION_REFUSE);
    send_ok(s, "x");
    reply r = {0};
    gpt2_session_token tk;
    gpt2_error err;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        assert_false(tk.done);
        iv_push(&r.kept, tk.id);
        buf_add(&r.shown, tk.text, tk.len);
    }
    assert_int_equal(gpt2_session_send(s, "y", 1, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "still replying"));
    assert_int_equal(gpt2_session_n_turns(s), 2);
    assert_int_equal(gpt2_session_stop(s, &tk, &err), GPT2_OK);
    assert_true(tk.done);
    assert_int_equal(tk.end, GPT2_REPLY_STOPPED);
    assert_int_equal(tk.id, -1);
    buf_add(&r.shown, tk.text, tk.len);
    gpt2_turn a;
    turn_of(s, 1, &a);
    buf d = {0}, want = {0};
    decode(r.kept.v, r.kept.n, &d);
    assert_int_equal(a.len, d.n);
    assert_memory_equal(a.text, d.b, d.n);
    shown_of(d.b, d.n, &want);
    assert_int_equal(r.shown.n, want.n);
    assert_memory_equal(r.shown.b, want.b, want.n);
    assert_int_equal(gpt2_session_replying(s), 0);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_ERR_INVALID_ARG);
    send_ok(s, "y"); /* now it may */
    free(d.b);
    free(want.b);
    reply_free(&r);
    gpt2_session_free(s);
}

/* ---- context full ---- */

static int reserve_rule(int n_ctx, int max_new) {
    int r = n_ctx / 4;
    if (max_new > 0 && max_new < r) r = max_new;
    return r < 1 ? 1 : r;
}

static void test_context_full_drop(void **state) {
    gpt2_chat_template t = short_tmpl();
    const int max_new = 6;
    gpt2_session *s = mk(&t, 64, 256, max_new, greedy(), GPT2_SESSION_DROP_OLDEST);
    const char *msgs[] = {"alpha", "beta gamma", "delta", "epsilon zeta", "eta", "theta iota", "kappa"};
    int dropped_at = -1;
    for (int k = 0; k < 7 && dropped_at < 0; k++) {
        gpt2_session_stats before = gpt2_session_get_stats(s);
        snap pre = take(s);
        send_ok(s, msgs[k]);
        gpt2_session_stats st = gpt2_session_get_stats(s);
        if (st.notices != before.notices) {
            dropped_at = k;
            assert_int_equal(st.notices, before.notices + 1);
            assert_true(st.dropped_turns > 0 && st.dropped_turns % 2 == 0);
            assert_non_null(strstr(gpt2_session_notice(s), "dropped the"));
            /* Oldest first, the rule's amount: the smallest drop that leaves
             * the reserve free, found here by hand rendering. */
            int n_turns = gpt2_session_n_turns(s), f = pre.first < 0 ? 0 : pre.first;
            int expect_first = -1;
            ivec full = hand_render(s, &t, f, n_turns);
            assert_true(full.n + 1 > 64); /* it really did not fit */
            free(full.v);
            for (int g = f + 2; g <= n_turns - 2; g += 2) {
                ivec v = hand_render(s, &t, g, n_turns);
                int ok = v.n + reserve_rule(64, max_new) <= 64 || g == n_turns - 2;
                free(v.v);
                if (ok) {
                    expect_first = g;
                    break;
                }
            }
            assert_int_equal(st.dropped_turns, expect_first - f);
            for (int i = 0; i < n_turns; i++) {
                gpt2_turn u;
                turn_of(s, i, &u);
                assert_int_equal(u.in_context, i >= expect_first);
            }
            ivec want = hand_render(s, &t, expect_first, n_turns);
            assert_tokens(s, &want);
            /* Positions moved: all but the common prefix (the preamble, maybe
             * the start of the first kept block) recomputed. */
            int common = 0;
            while (common < want.n && common < pre.toks.n && want.v[common] == pre.toks.v[common]) common++;
            assert_true(common < pre.toks.n);
            assert_int_equal(st.last_prefill, want.n - common);
            assert_cache_fresh(s);
            /* Preamble kept. */
            ivec pre_t = {0};
            iv_encs(&pre_t, t.preamble);
            assert_memory_equal(want.v, pre_t.v, (size_t)pre_t.n * sizeof(int32_t));
            free(pre_t.v);
            free(want.v);
        }
        snap_free(&pre);
        reply r = run_reply(s, 20);
        reply_free(&r);
    }
    assert_true(dropped_at > 0);
    gpt2_session_free(s);
    /* Mid-reply: an unlimited reply fills the context, the oldest exchange
     * goes, the reply goes on, and finally ends when only it is left. */
    s = mk(&t, 64, 256, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "alpha");
    reply r0 = run_reply(s, 10);
    reply_free(&r0);
    gpt2_session_set_max_new_tokens(s, 0);
    send_ok(s, "lambda");
    gpt2_session_stats before = gpt2_session_get_stats(s);
    assert_int_equal(before.notices, 0);
    gpt2_session_token tk;
    gpt2_error err;
    int mid_drops = 0, steps = 0;
    for (;; steps++) {
        assert_true(steps < 500);
        unsigned n0 = gpt2_session_get_stats(s).notices;
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        if (tk.done) break;
        if (gpt2_session_get_stats(s).notices != n0) {
            mid_drops++;
            assert_cache_fresh(s);
            int n_turns = gpt2_session_n_turns(s);
            gpt2_turn u;
            turn_of(s, n_turns - 1, &u);
            assert_int_equal(u.replying, 1);
            assert_int_equal(u.in_context, 1);
        }
    }
    assert_true(mid_drops > 0);
    assert_true(gpt2_session_get_stats(s).notices > before.notices);
    assert_int_equal(tk.end, GPT2_REPLY_CONTEXT_FULL);
    int n;
    gpt2_session_tokens(s, &n);
    assert_int_equal(n, 64);
    /* Only the last exchange is left in the context. */
    int n_turns = gpt2_session_n_turns(s);
    gpt2_turn u;
    turn_of(s, n_turns - 3, &u);
    assert_int_equal(u.in_context, 0);
    turn_of(s, n_turns - 2, &u);
    assert_int_equal(u.in_context, 1);
    ivec want = hand_render(s, &t, n_turns - 2, n_turns);
    assert_tokens(s, &want);
    free(want.v);
    gpt2_session_free(s);
}

static void test_context_full_refuse(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 6, greedy(), GPT2_SESSION_REFUSE);
    const char *msgs[] = {"alpha", "beta gamma", "delta", "epsilon zeta", "eta", "theta iota", "kappa"};
    int refused = 0;
    gpt2_error err;
    for (int k = 0; k < 7 && !refused; k++) {
        snap pre = take(s);
        gpt2_status st = gpt2_session_send(s, msgs[k], strlen(msgs[k]), NULL, NULL, &err);
        if (st == GPT2_ERR_CONTEXT_FULL) {
            refused = 1;
            assert_non_null(strstr(err.msg, "context full"));
            assert_non_null(strstr(err.msg, "refuse"));
            snap post = take(s);
            assert_same(&pre, &post);
            snap_free(&post);
            assert_int_equal(gpt2_session_get_stats(s).notices, 0);
        } else {
            assert_int_equal(st, GPT2_OK);
            reply r = run_reply(s, 20);
            reply_free(&r);
        }
        snap_free(&pre);
    }
    assert_true(refused);
    /* A reply that fills the context ends there under refuse. */
    gpt2_session_reset(s, NULL);
    gpt2_session_set_max_new_tokens(s, 0);
    send_ok(s, "go on");
    reply r = run_reply(s, 100);
    assert_int_equal(r.end, GPT2_REPLY_CONTEXT_FULL);
    int n;
    gpt2_session_tokens(s, &n);
    assert_int_equal(n, 64);
    assert_int_equal(gpt2_session_get_stats(s).notices, 0);
    reply_free(&r);
    gpt2_session_free(s);
}

static void test_oversized_message(void **state) {
    gpt2_chat_template t = short_tmpl();
    char big[400];
    for (int i = 0; i < 399; i++) big[i] = "abcdefghij klmnop"[i % 17];
    big[399] = 0;
    for (int pol = 0; pol < 2; pol++) {
        gpt2_session *s = mk(&t, 64, 256, 4, greedy(), (gpt2_session_policy)pol);
        send_ok(s, "first");
        reply r = run_reply(s, 10);
        reply_free(&r);
        snap pre = take(s);
        gpt2_error err;
        assert_int_equal(gpt2_session_send(s, big, strlen(big), NULL, NULL, &err), GPT2_ERR_CONTEXT_FULL);
        assert_non_null(strstr(err.msg, "does not fit the context even on its own"));
        snap post = take(s);
        assert_same(&pre, &post);
        snap_free(&pre);
        snap_free(&post);
        gpt2_session_free(s);
    }
}

/* ---- regen, undo, reset ---- */

static void test_regen(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 8, hot(77, 1.0f), GPT2_SESSION_REFUSE);
    send_ok(s, "tell");
    ivec prompt = session_tokens(s);
    uint64_t rng0 = gpt2_session_rng_state(s);
    reply r1 = run_reply(s, 20);
    gpt2_error err;
    /* Same RNG state: the same reply. */
    gpt2_session_set_rng_state(s, rng0);
    assert_int_equal(gpt2_session_regen(s, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_replying(s), 1);
    assert_tokens(s, &prompt);
    assert_int_equal(gpt2_session_get_stats(s).last_call, 1); /* the last prompt token, for its logits */
    assert_cache_fresh(s);
    reply r2 = run_reply(s, 20);
    assert_int_equal(r1.ids.n, r2.ids.n);
    assert_memory_equal(r1.ids.v, r2.ids.v, (size_t)r1.ids.n * sizeof(int32_t));
    assert_int_equal(r1.end, r2.end);
    /* RNG going on: a different reply (temperature 1 over 507 tokens). */
    assert_int_equal(gpt2_session_regen(s, NULL, NULL, &err), GPT2_OK);
    reply r3 = run_reply(s, 20);
    assert_true(r3.ids.n != r1.ids.n || memcmp(r3.ids.v, r1.ids.v, (size_t)r1.ids.n * sizeof(int32_t)) != 0);
    ivec want = {0};
    iv_cat(&want, prompt.v, prompt.n);
    iv_cat(&want, r3.kept.v, r3.kept.n);
    assert_tokens(s, &want);
    assert_int_equal(gpt2_session_n_turns(s), 2);
    /* Regen mid-reply restarts it. */
    gpt2_session_stop(s, NULL, NULL);
    assert_int_equal(gpt2_session_regen(s, NULL, NULL, &err), GPT2_OK);
    gpt2_session_token tk;
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_int_equal(gpt2_session_regen(s, NULL, NULL, &err), GPT2_OK);
    assert_tokens(s, &prompt);
    gpt2_turn a;
    turn_of(s, 1, &a);
    assert_int_equal(a.len, 0);
    assert_int_equal(a.n_ids, 0);
    /* Nothing to regenerate in an empty session. */
    gpt2_session *e = mk(&t, 64, 256, 8, greedy(), GPT2_SESSION_REFUSE);
    assert_int_equal(gpt2_session_regen(e, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    gpt2_session_free(e);
    reply_free(&r1);
    reply_free(&r2);
    reply_free(&r3);
    free(prompt.v);
    free(want.v);
    gpt2_session_free(s);
}

static void test_undo_reset(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 4, greedy(), GPT2_SESSION_REFUSE);
    send_ok(s, "one");
    reply r = run_reply(s, 10);
    reply_free(&r);
    ivec t0 = session_tokens(s);
    send_ok(s, "two");
    int block = gpt2_session_get_stats(s).last_prefill;
    r = run_reply(s, 10);
    reply_free(&r);
    ivec t1 = session_tokens(s);
    assert_true(t1.n > t0.n);
    free(t1.v);
    gpt2_error err;
    long long total = gpt2_session_get_stats(s).total;
    assert_int_equal(gpt2_session_undo(s, &err), GPT2_OK);
    assert_tokens(s, &t0); /* the previous sequence exactly, cache rewound */
    assert_int_equal(gpt2_session_get_stats(s).total, total); /* nothing evaluated */
    assert_int_equal(gpt2_session_n_turns(s), 2);
    send_ok(s, "two");
    assert_int_equal(gpt2_session_get_stats(s).last_prefill, block); /* only the new turn */
    /* Undo a reply in progress. */
    gpt2_session_token tk;
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_int_equal(gpt2_session_undo(s, &err), GPT2_OK);
    assert_int_equal(gpt2_session_replying(s), 0);
    assert_tokens(s, &t0);
    assert_int_equal(gpt2_session_undo(s, &err), GPT2_OK);
    ivec pre = {0};
    iv_encs(&pre, t.preamble);
    assert_tokens(s, &pre);
    assert_int_equal(gpt2_session_undo(s, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "undo"));
    /* Reset keeps the template, parameters and the cached preamble. */
    send_ok(s, "three");
    gpt2_session_set_max_new_tokens(s, 3);
    assert_int_equal(gpt2_session_reset(s, &err), GPT2_OK);
    assert_int_equal(gpt2_session_n_turns(s), 0);
    assert_int_equal(gpt2_session_replying(s), 0);
    assert_int_equal(gpt2_session_max_new_tokens(s), 3);
    assert_string_equal(gpt2_session_template(s)->name, "short");
    assert_tokens(s, &pre);
    send_ok(s, "four");
    ivec b = {0};
    iv_encs(&b, "U:four\nA:");
    assert_int_equal(gpt2_session_get_stats(s).last_prefill, b.n); /* the preamble stayed cached */
    free(b.v);
    free(pre.v);
    free(t0.v);
    gpt2_session_free(s);
}

/* ---- templates: switching, files ---- */

static void test_set_template(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 3, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "hi");
    reply r = run_reply(s, 10);
    gpt2_error err;
    gpt2_chat_template t2 = t;
    t2.name = "other";
    t2.preamble = "P\n";
    t2.user_prefix = "Q: ";
    t2.assistant_prefix = "R:";
    assert_int_equal(gpt2_session_set_template(s, &t2, NULL, NULL, &err), GPT2_OK);
    assert_string_equal(gpt2_session_template(s)->name, "other");
    ivec want = {0};
    iv_encs(&want, "P\n");
    iv_encs(&want, "Q: hi\nR:");
    iv_cat(&want, r.kept.v, r.kept.n);
    assert_tokens(s, &want);
    assert_int_equal(gpt2_session_get_stats(s).last_call, want.n); /* recomputed (the preamble changed) */
    send_ok(s, "yo");
    iv_encs(&want, "\nQ: yo\nR:");
    assert_tokens(s, &want);
    assert_cache_fresh(s);
    /* Not while replying; a template the model cannot run; a bad template. */
    assert_int_equal(gpt2_session_set_template(s, &t, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "still replying"));
    gpt2_session_stop(s, NULL, NULL);
    gpt2_chat_template bad = t;
    bad.name = "has space";
    snap pre = take(s);
    assert_int_equal(gpt2_session_set_template(s, &bad, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "name"));
    const char *empty_stop[1] = {""};
    bad = t;
    bad.stop = empty_stop;
    bad.n_stop = 1;
    assert_int_equal(gpt2_session_set_template(s, &bad, NULL, NULL, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "stop[0]"));
    snap post = take(s);
    assert_same(&pre, &post);
    snap_free(&pre);
    snap_free(&post);
    /* Built-ins by name. */
    int n_builtin = 0;
    while (gpt2_chat_template_builtin_name(n_builtin)) n_builtin++;
    assert_int_equal(n_builtin, 3);
    assert_null(gpt2_chat_template_builtin("nope"));
    assert_int_equal(gpt2_session_set_template(s, gpt2_chat_template_builtin("dialogpt"), NULL, NULL, &err),
                     GPT2_OK);
    free(want.v);
    want = hand_render(s, gpt2_chat_template_builtin("dialogpt"), 0, gpt2_session_n_turns(s));
    assert_tokens(s, &want);
    free(want.v);
    reply_free(&r);
    gpt2_session_free(s);
}

static void test_template_files(void **state) {
    /* The format of models/shakespeare/chat_template.json. */
    const char *play = "{\n  \"name\": \"play\",\n  \"description\": \"ROMEO and JULIET\",\n  \"preamble\": \"\",\n"
                       "  \"user_prefix\": \"ROMEO:\\n\",\n  \"user_suffix\": \"\\n\\n\",\n"
                       "  \"assistant_prefix\": \"JULIET:\\n\",\n  \"assistant_suffix\": \"\\n\\n\",\n"
                       "  \"stop\": [\"\\n\\n\"]\n}\n";
    char mdir[300];
    snprintf(mdir, sizeof mdir, "%s/model", g_dir);
    mkdir(mdir, 0700);
    gpt2_chat_template *t;
    gpt2_error err;
    assert_int_equal(gpt2_chat_template_for_model(mdir, &t, &err), GPT2_OK); /* no file: transcript */
    assert_string_equal(t->name, "transcript");
    assert_string_equal(t->user_prefix, "User: ");
    gpt2_chat_template_free(t);
    char path[400];
    snprintf(path, sizeof path, "%s/chat_template.json", mdir);
    write_text(path, play, strlen(play));
    assert_int_equal(gpt2_chat_template_for_model(mdir, &t, &err), GPT2_OK);
    assert_string_equal(t->name, "play");
    assert_string_equal(t->user_prefix, "ROMEO:\n");
    assert_string_equal(t->assistant_prefix, "JULIET:\n");
    assert_string_equal(t->assistant_suffix, "\n\n");
    assert_int_equal(t->n_stop, 1);
    assert_string_equal(t->stop[0], "\n\n");
    assert_int_equal(t->eot_after_turn, 0);
    gpt2_session *s = mk(t, 64, 256, 3, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "Good morrow.");
    ivec want = {0};
    iv_encs(&want, "ROMEO:\nGood morrow.\n\nJULIET:\n");
    assert_tokens(s, &want);
    free(want.v);
    gpt2_session_free(s);
    gpt2_chat_template_free(t);
    /* The committed file itself, when the tests run from the repository. */
    if (access("models/shakespeare/chat_template.json", R_OK) == 0) {
        assert_int_equal(gpt2_chat_template_for_model("models/shakespeare", &t, &err), GPT2_OK);
        assert_string_equal(t->user_prefix, "ROMEO:\n");
        gpt2_chat_template_free(t);
    }
    /* Invalid files: precise errors. */
    struct {
        const char *text, *want1, *want2;
        gpt2_status st;
    } bad[] = {
        {"{\"name\": \"x\", \"stop\": \"\\n\"}", "stop: expected an array of strings", "found a string",
         GPT2_ERR_FORMAT},
        {"{\"name\": \"x\", \"stop\": [\"a\", 3]}", "stop[1]: expected a string", "found a number", GPT2_ERR_FORMAT},
        {"{\"name\": \"x\", \"stop\": [\"\"]}", "stop[0]: expected a non-empty string", "", GPT2_ERR_FORMAT},
        {"{\"user_prefix\": \"a\"}", "name: missing", "", GPT2_ERR_FORMAT},
        {"{\"name\": 7}", "name: expected a string", "found a number", GPT2_ERR_FORMAT},
        {"{\"name\": \"x\", \"user_prefx\": \"a\"}", "user_prefx: unknown field", "", GPT2_ERR_FORMAT},
        {"{\"chat_template\": \"{% for m in messages %}\"}", "Jinja", "", GPT2_ERR_FORMAT},
        {"{\"name\": \"x\", \"eot_after_turn\": 1}", "eot_after_turn: expected true or false", "found a number",
         GPT2_ERR_FORMAT},
        {"{\"name\": \"x\"", "not valid JSON", "", GPT2_ERR_FORMAT},
        {"[1]", "expected a JSON object", "found an array", GPT2_ERR_FORMAT},
        {"{\"name\": \"x\"} {}", "text after the value", "", GPT2_ERR_FORMAT},
        {"{\"name\": \"x\\u0000y\"}", "NUL", "", GPT2_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i].text, strlen(bad[i].text));
        t = (gpt2_chat_template *)1;
        gpt2_status st = gpt2_chat_template_for_model(mdir, &t, &err);
        if (st != bad[i].st) fail_msg("case %zu: status %d, message %s", i, st, err.msg);
        assert_null(t);
        if (!strstr(err.msg, bad[i].want1) || !strstr(err.msg, bad[i].want2) || !strstr(err.msg, path))
            fail_msg("case %zu: message \"%s\" lacks \"%s\" / \"%s\" / the path", i, err.msg, bad[i].want1,
                     bad[i].want2);
    }
    unlink(path);
    assert_int_equal(gpt2_chat_template_load(path, &t, &err), GPT2_ERR_IO);
    rmdir(mdir);
    /* eot_after_turn on a vocabulary without <|endoftext|> is refused by the
     * session; here the vocabulary has it, so dialogpt is accepted. */
    gpt2_session *d = mk(gpt2_chat_template_builtin("dialogpt"), 64, 256, 3, greedy(), GPT2_SESSION_REFUSE);
    gpt2_session_free(d);
}

/* ---- save / load ---- */

static void test_save_load(void **state) {
    const char *path = tmp_path("chat.json");
    gpt2_chat_template t = short_tmpl();
    const char *stops[1] = {"\x7f\x7f"};
    t.stop = stops;
    t.n_stop = 1;
    gpt2_session *a = mk(&t, 64, 256, 10, hot(123, 0.9f), GPT2_SESSION_DROP_OLDEST);
    send_ok(a, "save me");
    reply r = run_reply(a, 50);
    reply_free(&r);
    gpt2_session_set_max_new_tokens(a, 30);
    send_ok(a, "and me");
    gpt2_session_token tk;
    gpt2_error err;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gpt2_session_step(a, &tk, &err), GPT2_OK);
        assert_false(tk.done);
    }
    /* Mid-reply save. */
    rm_dir_files(g_dir);
    assert_int_equal(gpt2_session_save(a, path, &err), GPT2_OK);
    assert_int_equal(count_dir_entries(g_dir), 1); /* no temporary file left */
    snap sa = take(a);
    reply ra = run_reply(a, 40);
    /* A fresh session with other settings takes the file's. */
    gpt2_session *b = mk(NULL, 64, 256, 5, greedy(), GPT2_SESSION_REFUSE);
    assert_int_equal(gpt2_session_load(b, path, NULL, NULL, &err), GPT2_OK);
    snap sb = take(b);
    assert_same(&sa, &sb);
    gpt2_turn u;
    turn_of(b, 3, &u);
    assert_int_equal(u.replying, 1);
    assert_cache_fresh(b);
    reply rb = run_reply(b, 40);
    assert_int_equal(ra.ids.n, rb.ids.n);
    assert_memory_equal(ra.ids.v, rb.ids.v, (size_t)ra.ids.n * sizeof(int32_t));
    assert_int_equal(ra.end, rb.end);
    assert_int_equal(ra.shown.n, rb.shown.n);
    assert_memory_equal(ra.shown.b, rb.shown.b, ra.shown.n);
    assert_true(ra.ids.n >= 5);
    /* Between turns: both go on the same way after the same message. */
    assert_int_equal(gpt2_session_save(a, path, &err), GPT2_OK);
    gpt2_session *c = mk(NULL, 64, 256, 5, greedy(), GPT2_SESSION_REFUSE);
    assert_int_equal(gpt2_session_load(c, path, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_replying(c), 0);
    send_ok(a, "next");
    send_ok(c, "next");
    reply r1 = run_reply(a, 40), r2 = run_reply(c, 40);
    assert_int_equal(r1.ids.n, r2.ids.n);
    assert_memory_equal(r1.ids.v, r2.ids.v, (size_t)r1.ids.n * sizeof(int32_t));
    /* Overwriting an existing file is atomic too. */
    assert_int_equal(gpt2_session_save(a, path, &err), GPT2_OK);
    assert_int_equal(count_dir_entries(g_dir), 1);
    /* A directory that does not exist: an error naming the path. */
    const char *nodir = tmp_path("no/such/dir/chat.json");
    assert_int_equal(gpt2_session_save(a, nodir, &err), GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, nodir));
    snap_free(&sa);
    snap_free(&sb);
    reply_free(&ra);
    reply_free(&rb);
    reply_free(&r1);
    reply_free(&r2);
    gpt2_session_free(a);
    gpt2_session_free(b);
    gpt2_session_free(c);
}

/* Saved while text is held back as a possible stop string: the loaded
 * session holds back the same bytes and gives them out the same way. */
static void test_save_load_held(void **state) {
    const char *path = tmp_path("held.json");
    ref_run R = greedy_reference("The cat", 40);
    int found = 0;
    for (int j = 2; j + 2 < R.ids.n && !found; j++) {
        int b = R.off[j + 1];
        if (R.off[j + 1] == R.off[j] || R.off[j + 2] == R.off[j + 1]) continue;
        char stop[4] = {R.text.b[b - 1], R.text.b[b], '~', 0};
        if (has_nul(stop, 3)) continue;
        for (const char *x = "~#@%"; *x && find_in(&R.text, stop, 3) >= 0; x++) stop[2] = *x;
        if (find_in(&R.text, stop, 3) >= 0 || find_in(&R.text, stop, 2) != b - 1) continue;
        found = 1;
        const char *stops[1] = {stop};
        gpt2_chat_template t = *gpt2_chat_template_builtin("raw");
        t.name = "raw-held";
        t.stop = stops;
        t.n_stop = 1;
        gpt2_session *a = mk(&t, 64, 256, R.ids.n, greedy(), GPT2_SESSION_REFUSE);
        send_ok(a, "The cat");
        gpt2_session_token tk;
        gpt2_error err;
        buf before = {0};
        for (int i = 0; i <= j; i++) {
            assert_int_equal(gpt2_session_step(a, &tk, &err), GPT2_OK);
            buf_add(&before, tk.text, tk.len);
        }
        gpt2_turn u;
        turn_of(a, 1, &u);
        assert_int_equal(u.shown, (size_t)b - 1); /* the stop's first byte held back */
        assert_int_equal(gpt2_session_save(a, path, &err), GPT2_OK);
        gpt2_session *c = mk(NULL, 64, 256, 3, greedy(), GPT2_SESSION_DROP_OLDEST);
        assert_int_equal(gpt2_session_load(c, path, NULL, NULL, &err), GPT2_OK);
        turn_of(c, 1, &u);
        assert_int_equal(u.replying, 1);
        assert_int_equal(u.len, (size_t)b);
        assert_int_equal(u.shown, (size_t)b - 1);
        reply ra = run_reply(a, 50), rc = run_reply(c, 50);
        assert_int_equal(ra.shown.n, rc.shown.n);
        assert_memory_equal(ra.shown.b, rc.shown.b, ra.shown.n);
        assert_int_equal(ra.ids.n, rc.ids.n);
        assert_memory_equal(ra.ids.v, rc.ids.v, (size_t)ra.ids.n * sizeof(int32_t));
        /* Everything given out, before and after, is the whole reply once. */
        buf_add(&before, ra.shown.b, ra.shown.n);
        buf want = {0};
        shown_of(R.text.b, R.text.n, &want);
        assert_int_equal(before.n, want.n);
        assert_memory_equal(before.b, want.b, want.n);
        free(before.b);
        free(want.b);
        reply_free(&ra);
        reply_free(&rc);
        gpt2_session_free(a);
        gpt2_session_free(c);
    }
    assert_true(found);
    ref_free(&R);
}

/* Bytes that are not UTF-8, and NUL, in a reply survive the file exactly. */
static void test_save_load_odd_bytes(void **state) {
    const char *path = tmp_path("odd.json");
    gpt2_chat_template t = short_tmpl();
    gpt2_session *a = mk(&t, 64, 256, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    const char msg[] = "caf\xc3\xa9 \xff\xfe nul\0here";
    gpt2_error err;
    assert_int_equal(gpt2_session_send(a, msg, sizeof msg - 1, NULL, NULL, &err), GPT2_OK);
    reply r = run_reply(a, 10);
    assert_int_equal(gpt2_session_save(a, path, &err), GPT2_OK);
    char *text = read_file(path, NULL);
    assert_non_null(strstr(text, "\"text_base64\""));
    free(text);
    gpt2_session *b = mk(&t, 64, 256, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    assert_int_equal(gpt2_session_load(b, path, NULL, NULL, &err), GPT2_OK);
    gpt2_turn u;
    turn_of(b, 0, &u);
    assert_int_equal(u.len, sizeof msg - 1);
    assert_memory_equal(u.text, msg, sizeof msg - 1);
    snap sa = take(a), sb = take(b);
    assert_same(&sa, &sb);
    snap_free(&sa);
    snap_free(&sb);
    reply_free(&r);
    gpt2_session_free(a);
    gpt2_session_free(b);
}

/* Replaces the first occurrence of from with to in text (malloc'd result). */
static char *replace1(const char *text, const char *from, const char *to) {
    const char *p = strstr(text, from);
    if (!p) fail_msg("fixture lacks \"%s\"", from);
    size_t a = (size_t)(p - text), lf = strlen(from), lt = strlen(to), lr = strlen(p + lf);
    char *o = malloc(a + lt + lr + 1);
    memcpy(o, text, a);
    memcpy(o + a, to, lt);
    memcpy(o + a + lt, p + lf, lr + 1);
    return o;
}

static void test_load_errors(void **state) {
    const char *good = tmp_path("good.json"), *badp = tmp_path("bad.json");
    gpt2_chat_template t = short_tmpl();
    gpt2_session *a = mk(&t, 64, 256, 3, hot(9, 1.0f), GPT2_SESSION_DROP_OLDEST);
    send_ok(a, "keep");
    reply r = run_reply(a, 10);
    reply_free(&r);
    gpt2_error err;
    assert_int_equal(gpt2_session_save(a, good, &err), GPT2_OK);
    size_t len;
    char *text = read_file(good, &len);
    /* The session to stay untouched: a different, ongoing conversation. */
    gpt2_session *s = mk(NULL, 64, 256, 7, hot(1, 0.5f), GPT2_SESSION_REFUSE);
    send_ok(s, "untouched");
    gpt2_session_token tk;
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    snap pre = take(s);
    struct {
        const char *from, *to, *want1, *want2;
    } cases[] = {
        {"\"max_new_tokens\":\t3", "\"max_new_tokens\":\t\"x\"", "max_new_tokens: expected an integer",
         "found a string"},
        {"\"max_new_tokens\":\t3", "\"max_new_tokens\":\t-1", "max_new_tokens: expected an integer", "found -1"},
        {"\"role\":\t\"user\"", "\"role\":\t\"bot\"", "turns[0].role: expected \"user\"", "found \"bot\""},
        {"\"role\":\t\"assistant\"", "\"role\":\t\"user\"", "turns[1].role: expected \"assistant\"",
         "found \"user\""},
        {"\"rng_state\":\t\"", "\"rng_state\":\t7, \"x\": \"", "rng_state: expected a string of decimal digits",
         "found a number"},
        {"\"version\":\t2", "\"version\":\t5", "version: expected 1, 2, 3 or 4", "found 5"},
        {"\"format\":\t\"gptscope-session\"", "\"format\":\t\"other\"", "format: expected \"gptscope-session\"",
         "found \"other\""},
        {"\"context_policy\":\t\"drop-oldest\"", "\"context_policy\":\t\"lru\"", "context_policy: expected",
         "found \"lru\""},
        {"\"top_p\":", "\"top_q\": 1, \"top_p\":", "sampler.top_q: unknown field", ""},
        {"\"temperature\":\t1", "\"temperature\":\t-1", "sampler.temperature: expected a number in [0", "found -1"},
        {"\"turns\":\t[", "\"turns\": 5, \"x\": [", "turns: expected an array", "found a number"},
        {"\"ids\":\t[", "\"ids\":\t[\"a\", ", "turns[1].ids[0]: expected a non-negative integer", "found a string"},
        {"\"ids\":\t[", "\"ids\":\t[1000, ", "turns[1].ids[0]: expected an array of token ids", "found 1000"},
        {"\"ids\":\t[", "\"ids\":\t[65, ", "turns[1].ids: do not decode to turns[1].text", ""},
        {"\"first_in_context\":\t0", "\"first_in_context\":\t1", "first_in_context: expected an even", "found 1"},
        {"\"replying\":\tfalse", "\"replying\":\t0", "replying: expected true or false", "found a number"},
        {"\"stop\":\t[]", "\"stop\":\t[1]", "template.stop[0]: expected a string", "found a number"},
        {"\"name\":\t\"short\"", "\"nam\":\t\"short\"", "template.nam: unknown field", ""},
        {"\"seed\":\t\"9\"", "\"seed\":\t\"99999999999999999999999\"", "sampler.seed: expected a string of decimal",
         "found \"99999999999999999999999\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *b = replace1(text, cases[i].from, cases[i].to);
        write_text(badp, b, strlen(b));
        free(b);
        gpt2_status st = gpt2_session_load(s, badp, NULL, NULL, &err);
        if (st != GPT2_ERR_FORMAT) fail_msg("case %zu: status %d (%s)", i, st, err.msg);
        if (!strstr(err.msg, cases[i].want1) || !strstr(err.msg, cases[i].want2) || !strstr(err.msg, badp))
            fail_msg("case %zu: message \"%s\" lacks \"%s\" / \"%s\" / the path", i, err.msg, cases[i].want1,
                     cases[i].want2);
        snap post = take(s);
        assert_same(&pre, &post);
        snap_free(&post);
    }
    /* Missing, garbage, truncated, empty, not an object. */
    struct {
        const char *content;
        size_t n;
        gpt2_status st;
        const char *want;
    } files[] = {
        {NULL, 0, GPT2_ERR_IO, "cannot open"},
        {"garbage", 7, GPT2_ERR_FORMAT, "not valid JSON"},
        {text, len / 2, GPT2_ERR_FORMAT, "not valid JSON"},
        {"", 0, GPT2_ERR_FORMAT, "not valid JSON"},
        {"[]", 2, GPT2_ERR_FORMAT, "expected a JSON object"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        unlink(badp);
        if (files[i].content) write_text(badp, files[i].content, files[i].n);
        gpt2_status st = gpt2_session_load(s, badp, NULL, NULL, &err);
        if (st != files[i].st || !strstr(err.msg, files[i].want) || !strstr(err.msg, badp))
            fail_msg("file case %zu: status %d, message \"%s\"", i, st, err.msg);
        snap post = take(s);
        assert_same(&pre, &post);
        snap_free(&post);
    }
    /* The untouched session goes on as if nothing happened: same as a twin. */
    gpt2_session *twin = mk(NULL, 64, 256, 7, hot(1, 0.5f), GPT2_SESSION_REFUSE);
    send_ok(twin, "untouched");
    assert_int_equal(gpt2_session_step(twin, &tk, &err), GPT2_OK);
    reply r1 = run_reply(s, 10), r2 = run_reply(twin, 10);
    assert_int_equal(r1.ids.n, r2.ids.n);
    assert_memory_equal(r1.ids.v, r2.ids.v, (size_t)r1.ids.n * sizeof(int32_t));
    /* And the good file still loads. */
    assert_int_equal(gpt2_session_load(s, good, NULL, NULL, &err), GPT2_OK);
    assert_string_equal(gpt2_session_template(s)->name, "short");
    reply_free(&r1);
    reply_free(&r2);
    snap_free(&pre);
    free(text);
    gpt2_session_free(twin);
    gpt2_session_free(a);
    gpt2_session_free(s);
}

/* ---- cancel ---- */

typedef struct {
    int calls, cancel_at, last_done, last_total;
} prog;

static int on_progress(void *ud, int done, int total) {
    prog *p = ud;
    p->calls++;
    assert_true(done > 0 && done < total);
    p->last_done = done;
    p->last_total = total;
    return p->calls >= p->cancel_at;
}

static void test_cancel_prefill(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 2, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    gpt2_session *twin = mk(&t, 64, 2, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "first");
    send_ok(twin, "first");
    reply r = run_reply(s, 10);
    reply_free(&r);
    r = run_reply(twin, 10);
    reply_free(&r);
    snap pre = take(s);
    const char *msg = "a long message to cancel half way";
    prog p = {.cancel_at = 2};
    gpt2_error err;
    assert_int_equal(gpt2_session_send(s, msg, strlen(msg), on_progress, &p, &err), GPT2_CANCELLED);
    assert_int_equal(p.calls, 2);
    assert_int_equal(p.last_done, 4); /* two batches of two */
    snap post = take(s);
    assert_same(&pre, &post); /* turns, tokens, n_past (the cache rewound) */
    snap_free(&post);
    snap_free(&pre);
    assert_int_equal(gpt2_session_replying(s), 0);
    /* It goes on exactly like the twin that never saw the cancelled send. */
    send_ok(s, "second");
    send_ok(twin, "second");
    assert_int_equal(gpt2_session_get_stats(s).last_prefill, gpt2_session_get_stats(twin).last_prefill);
    reply r1 = run_reply(s, 10), r2 = run_reply(twin, 10);
    assert_int_equal(r1.ids.n, r2.ids.n);
    assert_memory_equal(r1.ids.v, r2.ids.v, (size_t)r1.ids.n * sizeof(int32_t));
    ivec ts = session_tokens(s), tt = session_tokens(twin);
    assert_int_equal(ts.n, tt.n);
    assert_memory_equal(ts.v, tt.v, (size_t)ts.n * sizeof(int32_t));
    /* A progress that never cancels sees the whole prefill. */
    gpt2_session_stop(s, NULL, NULL);
    prog q = {.cancel_at = 1000};
    assert_int_equal(gpt2_session_send(s, msg, strlen(msg), on_progress, &q, &err), GPT2_OK);
    assert_int_equal(q.last_total, gpt2_session_get_stats(s).last_prefill);
    assert_true(q.calls >= q.last_total / 2 - 1);
    /* Cancel during a drop's full recompute: the conversation is as before
     * and the cache catches up at the next call. */
    gpt2_session_stop(s, NULL, NULL);
    int dropped = 0;
    for (int k = 0; k < 12 && !dropped; k++) {
        char m[32];
        snprintf(m, sizeof m, "message number %d", k);
        snap before = take(s);
        prog c = {.cancel_at = 1};
        assert_int_equal(gpt2_session_send(s, m, strlen(m), on_progress, &c, &err), GPT2_CANCELLED);
        snap after = take(s);
        /* The conversation and its tokens are unchanged; the cache holds at
         * least their common prefix with what was being evaluated. */
        assert_int_equal(after.toks.n, before.toks.n);
        assert_memory_equal(after.toks.v, before.toks.v, (size_t)before.toks.n * sizeof(int32_t));
        assert_int_equal(after.n_turns, before.n_turns);
        assert_memory_equal(gpt2_context_tokens(gpt2_session_context(s)), after.toks.v,
                            (size_t)after.n_past * sizeof(int32_t));
        unsigned notices = gpt2_session_get_stats(s).notices;
        send_ok(s, m); /* no cancel this time */
        dropped = gpt2_session_get_stats(s).notices != notices;
        if (dropped) /* the cancelled send had begun a full recompute: the cache fell short */
            assert_true(after.n_past < before.n_past);
        else
            assert_int_equal(after.n_past, before.n_past);
        assert_cache_fresh(s);
        gpt2_session_stop(s, NULL, NULL);
        snap_free(&before);
        snap_free(&after);
    }
    assert_true(dropped);
    free(ts.v);
    free(tt.v);
    reply_free(&r1);
    reply_free(&r2);
    gpt2_session_free(s);
    gpt2_session_free(twin);
}

/* ---- hooks through the session ---- */

typedef struct {
    int logits_calls, cancels;
} hook_count;

static void count_logits(void *ud, int pos, const float *z, int n) {
    ((hook_count *)ud)->logits_calls++;
    (void)pos, (void)z, (void)n;
}

static int count_cancel(void *ud, int done, int total) {
    ((hook_count *)ud)->cancels++;
    return 0;
}

static void test_hooks(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 2, 3, greedy(), GPT2_SESSION_DROP_OLDEST);
    hook_count h = {0};
    gpt2_hooks hk = {.user_data = &h, .on_logits = count_logits, .progress = count_cancel};
    gpt2_session_set_hooks(s, &hk);
    prog p = {.cancel_at = 1000};
    gpt2_error err;
    assert_int_equal(gpt2_session_send(s, "hooked up", 9, on_progress, &p, &err), GPT2_OK);
    int n = gpt2_session_get_stats(s).last_prefill;
    assert_int_equal(h.logits_calls, n); /* one per evaluated position */
    assert_true(p.calls > 0);
    assert_int_equal(h.cancels, p.calls); /* the user's cancel is still asked */
    gpt2_session_token tk;
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_int_equal(h.logits_calls, n + 1);
    gpt2_session_set_hooks(s, NULL);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_int_equal(h.logits_calls, n + 1);
    gpt2_session_free(s);
}


/* ---- draft mode (speculative sampling) ---- */

typedef struct {
    reply r;
    int origins[4]; /* count per gpt2_token_origin */
    int max_rejected;
} dreply;

static dreply run_dreply(gpt2_session *s, int limit) {
    dreply d = {0};
    gpt2_session_token t;
    gpt2_error err;
    for (d.r.steps = 0; d.r.steps < limit; d.r.steps++) {
        if (gpt2_session_step(s, &t, &err) != GPT2_OK) fail_msg("step: %s", err.msg);
        if (t.id >= 0) {
            iv_push(&d.r.ids, t.id);
            d.origins[t.origin]++;
            if (t.origin == GPT2_TOKEN_CORRECTED) {
                assert_true(t.n_rejected >= 1);
                if (t.n_rejected > d.max_rejected) d.max_rejected = t.n_rejected;
            } else {
                assert_int_equal(t.n_rejected, 0);
            }
        } else {
            assert_int_equal(t.origin, GPT2_TOKEN_SAMPLED);
        }
        if (t.kept) iv_push(&d.r.kept, t.id);
        buf_add(&d.r.shown, t.text, t.len);
        if (t.done) {
            d.r.end = t.end;
            d.r.steps++;
            return d;
        }
    }
    fail_msg("reply did not end in %d steps", limit);
    return d;
}

static void assert_same_reply(const reply *a, const reply *b) {
    assert_int_equal(a->kept.n, b->kept.n);
    assert_memory_equal(a->kept.v, b->kept.v, (size_t)a->kept.n * sizeof(int32_t));
    assert_int_equal(a->ids.n, b->ids.n);
    assert_memory_equal(a->ids.v, b->ids.v, (size_t)a->ids.n * sizeof(int32_t));
    assert_int_equal(a->shown.n, b->shown.n);
    if (a->shown.n) assert_memory_equal(a->shown.b, b->shown.b, a->shown.n);
    assert_int_equal(a->end, b->end);
}

/* Three exchanges: a token limit, then another, then up to the full context
 * (window end: K shrinks to 0 there). */
static const char *const g_msgs[3] = {"The cat", "dog", "so"};
static const int g_max_new[3] = {10, 6, 0};

/* Temperature 0: draft mode's replies are plain mode's, token for token, for
 * K = 1, 3, 4, 8, with a draft that gets rejected and with the model as its
 * own draft (every draft accepted: r = 1); after each reply the cache is the
 * sequence, with the logits of a fresh recomputation. */
static void test_draft_greedy_identical(void **state) {
    gpt2_chat_template t = short_tmpl();
    reply ref[3];
    gpt2_session *p = mk(&t, 64, 256, 0, greedy(), GPT2_SESSION_REFUSE);
    for (int i = 0; i < 3; i++) {
        gpt2_session_set_max_new_tokens(p, g_max_new[i]);
        send_ok(p, g_msgs[i]);
        ref[i] = run_reply(p, 80);
    }
    assert_int_equal(ref[2].end, GPT2_REPLY_CONTEXT_FULL);
    gpt2_session_free(p);
    static const int ks[] = {1, 3, 4, 8};
    const gpt2_model *drafts[2] = {g_draft_lm, g_model};
    int corrected = 0;
    for (int d = 0; d < 2; d++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            int k = ks[ki];
            gpt2_session *s = mk(&t, 64, 256, 0, greedy(), GPT2_SESSION_REFUSE);
            gpt2_error err;
            assert_int_equal(gpt2_session_set_draft(s, drafts[d], k, &err), GPT2_OK);
            assert_int_equal(gpt2_session_draft_enabled(s), 1);
            assert_int_equal(gpt2_session_draft_k(s), k);
            for (int i = 0; i < 3; i++) {
                gpt2_session_set_max_new_tokens(s, g_max_new[i]);
                send_ok(s, g_msgs[i]);
                dreply r = run_dreply(s, 80);
                assert_same_reply(&ref[i], &r.r);
                assert_cache_fresh(s);
                gpt2_draft_stats ds;
                gpt2_session_draft_stats(s, &ds, NULL);
                assert_true(ds.iterations > 0);
                assert_true(ds.r >= 1.0 / (k + 1) - 1e-12 && ds.r <= 1.0);
                assert_true(ds.produced >= r.r.ids.n);
                assert_true(r.max_rejected <= k);
                corrected += r.origins[GPT2_TOKEN_CORRECTED];
                if (drafts[d] == g_model) { /* its own draft: all accepted */
                    assert_int_equal(r.origins[GPT2_TOKEN_CORRECTED], 0);
                    assert_true(ds.r == 1.0);
                    assert_true(r.origins[GPT2_TOKEN_ACCEPTED] > 0);
                } else {
                    assert_true(r.origins[GPT2_TOKEN_ACCEPTED] + r.origins[GPT2_TOKEN_CORRECTED] +
                                    r.origins[GPT2_TOKEN_BONUS] > 0);
                }
                reply_free(&r.r);
            }
            gpt2_draft_stats tot;
            gpt2_session_draft_stats(s, NULL, &tot);
            assert_true(tot.iterations > 0);
            assert_float_equal(tot.tokens_per_pass, (double)tot.produced / tot.iterations, 1e-12);
            gpt2_session_free(s);
        }
    }
    assert_true(corrected > 0); /* the other draft was rejected somewhere */
    for (int i = 0; i < 3; i++) reply_free(&ref[i]);
}

/* A draft whose window (24) is smaller than the session's (64): drafting
 * while the conversation fits the draft's window, plain sampling after it, and
 * the reply is still token for token plain greedy decoding. */
static void test_draft_short_window(void **state) {
    (void)state;
    gpt2_model *shortm;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/tiny-short"), &shortm, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(gpt2_model_config(shortm)->n_ctx, 24);
    gpt2_chat_template t = short_tmpl();
    gpt2_session *p = mk(&t, 64, 256, 0, greedy(), GPT2_SESSION_REFUSE);
    gpt2_session_set_max_new_tokens(p, 40);
    send_ok(p, g_msgs[0]);
    reply ref = run_reply(p, 80);
    gpt2_session_free(p);
    gpt2_session *s = mk(&t, 64, 256, 0, greedy(), GPT2_SESSION_REFUSE);
    assert_int_equal(gpt2_session_set_draft(s, shortm, 4, &err), GPT2_OK);
    gpt2_session_set_max_new_tokens(s, 40);
    send_ok(s, g_msgs[0]);
    int n_prompt;
    gpt2_session_tokens(s, &n_prompt);
    assert_true(n_prompt < 20); /* room to draft first */
    dreply r = run_dreply(s, 80);
    assert_same_reply(&ref, &r.r);
    assert_cache_fresh(s);
    int n_after;
    gpt2_session_tokens(s, &n_after);
    assert_true(n_after > 30); /* and well past the draft's window */
    print_message("short draft: prompt %d, sequence %d; accepted %d, corrected %d, bonus %d, sampled %d\n", n_prompt,
                  n_after, r.origins[GPT2_TOKEN_ACCEPTED], r.origins[GPT2_TOKEN_CORRECTED], r.origins[GPT2_TOKEN_BONUS],
                  r.origins[GPT2_TOKEN_SAMPLED]);
    assert_true(r.origins[GPT2_TOKEN_ACCEPTED] + r.origins[GPT2_TOKEN_BONUS] > 0); /* drafted early */
    assert_true(r.origins[GPT2_TOKEN_SAMPLED] >= n_after - 24); /* plainly after */
    gpt2_draft_stats ds;
    gpt2_session_draft_stats(s, &ds, NULL);
    assert_true(ds.iterations > 0 && ds.produced <= 24);
    reply_free(&ref);
    reply_free(&r.r);
    gpt2_session_free(s);
    gpt2_model_free(shortm);
}

/* Stop strings in draft mode: the same cuts as plain mode (the scenarios of
 * test_stop_strings and test_stop_at_token_start), the stop often inside a
 * queued batch: the rest of the batch is discarded and the cache then matches
 * a fresh recomputation (check_stop_cut, with g_draft set). */
static void test_draft_stop_in_batch(void **state) {
    g_discarded = 0;
    g_draft = g_model; /* its own draft: batches of K + 1 = 9 tokens */
    g_draft_k = 8;
    test_stop_strings(state);
    test_stop_at_token_start(state);
    assert_true(g_discarded > 0); /* some stop came before the end of its batch */
    g_draft = g_draft_lm;
    g_draft_k = 4;
    test_stop_strings(state);
    test_stop_at_token_start(state);
    g_draft = NULL;
}

/* The target's logits after toks, from a context of our own. */
static const float *ref_logits(gpt2_context *ref, gpt2_session *s) {
    int n;
    const int32_t *toks = gpt2_session_tokens(s, &n);
    const int32_t *have = gpt2_context_tokens(ref);
    int np = gpt2_context_n_past(ref), c = 0;
    while (c < np && c < n - 1 && have[c] == toks[c]) c++;
    gpt2_error err;
    assert_int_equal(gpt2_context_rewind(ref, c, &err), GPT2_OK);
    if (gpt2_context_eval(ref, toks + c, n - c, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return gpt2_context_logits(ref);
}

/* A knob changed mid-reply in draft mode applies at the very next token: the
 * queued tokens (drawn at temperature 3) are discarded and the following
 * tokens are the target's argmax; the inspector's report is the target's
 * distribution at each token's position. */
static void test_draft_params_mid_reply(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 30, hot(11, 3.0f), GPT2_SESSION_REFUSE);
    gpt2_error err;
    assert_int_equal(gpt2_session_set_draft(s, g_model, 4, &err), GPT2_OK);
    send_ok(s, "go");
    int V = gpt2_model_config(g_model)->n_vocab, not_argmax = 0;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    gpt2_context *ref;
    assert_int_equal(gpt2_context_new(g_model, cp, &ref, &err), GPT2_OK);
    float *z = malloc((size_t)V * sizeof *z);
    gpt2_candidate c[4];
    gpt2_session_token tk;
    for (int i = 0; i < 6; i++) {
        memcpy(z, ref_logits(ref, s), (size_t)V * sizeof *z);
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        assert_false(tk.done);
        assert_true(tk.origin != GPT2_TOKEN_SAMPLED);
        not_argmax += tk.id != argmax(z, V);
        assert_float_equal(tk.prob, softmax_at(z, V, tk.id), 1e-5);
        /* the report: the target's ranking at this position, not a stale one */
        assert_int_equal(gpt2_sampler_report(gpt2_session_sampler(s), c, 4), 4);
        assert_int_equal(c[0].id, argmax(z, V));
        assert_float_equal(c[0].prob, softmax_at(z, V, c[0].id), 1e-5);
    }
    assert_true(not_argmax > 0); /* temperature 3 really sampled */
    gpt2_draft_stats ds;
    gpt2_session_draft_stats(s, &ds, NULL);
    /* its own draft accepts (nearly) everything: tokens are still queued now */
    assert_true(ds.produced > 6);
    gpt2_sampler_params p = gpt2_session_sampler_params(s);
    p.temperature = 0;
    gpt2_session_set_sampler_params(s, p);
    for (int i = 0; i < 10; i++) {
        memcpy(z, ref_logits(ref, s), (size_t)V * sizeof *z);
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        assert_false(tk.done);
        assert_int_equal(tk.id, argmax(z, V));
        assert_float_equal(tk.prob, softmax_at(z, V, tk.id), 1e-5);
        assert_int_equal(gpt2_sampler_report(gpt2_session_sampler(s), c, 4), 4);
        assert_int_equal(c[0].id, tk.id);
        assert_int_equal(c[0].removed_by, GPT2_STAGE_KEPT);
        assert_int_equal(c[1].removed_by, GPT2_STAGE_GREEDY);
    }
    /* The same knobs again change nothing: the queue is kept. Its own draft
     * at temperature 0 gives batches of K + 1 = 5: step into a fresh one. */
    gpt2_session_draft_stats(s, &ds, NULL);
    long it = ds.iterations;
    for (int i = 0; i < 5 && ds.iterations == it; i++) {
        assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
        gpt2_session_draft_stats(s, &ds, NULL);
    }
    assert_int_equal(ds.iterations, it + 1);
    gpt2_session_set_sampler_params(s, gpt2_session_sampler_params(s));
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    gpt2_session_draft_stats(s, &ds, NULL);
    assert_int_equal(ds.iterations, it + 1);
    free(z);
    gpt2_context_free(ref);
    gpt2_session_free(s);
}

/* Setting up draft mode: a draft with another tokenizer is refused with the
 * decoder's message and the session unchanged; K ranges; K changed mid-reply
 * applies from the next iteration; on/off; the RNG stream is the sampler's. */
static void test_draft_setup(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 256, 40, greedy(), GPT2_SESSION_REFUSE);
    gpt2_error err;
    /* another tokenizer: ids 0 and 1 swapped */
    char sub[128];
    snprintf(sub, sizeof sub, "%s/other-tok", g_dir);
    copy_fixture_model("tiny-f32", sub, 1);
    gpt2_model *other;
    assert_int_equal(gpt2_model_load(sub, &other, &err), GPT2_OK);
    remove_model_copy(sub);
    assert_int_equal(gpt2_session_set_draft(s, other, 4, &err), GPT2_ERR_TOKENIZER);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "draft model 'other-tok' does not share the tokenizer of target 'tiny-f32'"));
    assert_non_null(strstr(err.msg, "token id 0 differs"));
    assert_null(gpt2_session_draft_model(s));
    assert_int_equal(gpt2_session_draft_enabled(s), 0);
    /* a good draft, then the bad one again: the good one stays */
    assert_int_equal(gpt2_session_set_draft(s, g_model, 8, &err), GPT2_OK);
    assert_int_equal(gpt2_session_set_draft(s, other, 4, &err), GPT2_ERR_TOKENIZER);
    assert_ptr_equal(gpt2_session_draft_model(s), g_model);
    assert_int_equal(gpt2_session_draft_k(s), 8);
    gpt2_model_free(other);
    /* K out of range */
    assert_int_equal(gpt2_session_set_draft(s, g_model, 0, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "outside [1, 16]"));
    assert_int_equal(gpt2_session_set_draft_k(s, 17, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "K = 17"));
    assert_int_equal(gpt2_session_draft_k(s), 8);
    /* K changed mid-reply: the batch in the queue is handed out, the next
     * iteration drafts the new K (its own draft at temperature 0 accepts all) */
    send_ok(s, "count");
    gpt2_session_token tk;
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    gpt2_draft_stats ds;
    gpt2_session_draft_stats(s, &ds, NULL);
    assert_int_equal(ds.iterations, 1);
    assert_int_equal(ds.drafted, 8);
    assert_int_equal(ds.produced, 9);
    assert_int_equal(gpt2_session_set_draft_k(s, 2, &err), GPT2_OK);
    for (int i = 0; i < 8; i++) assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    gpt2_session_draft_stats(s, &ds, NULL);
    assert_int_equal(ds.iterations, 1); /* the queue was kept */
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    gpt2_session_draft_stats(s, &ds, NULL);
    assert_int_equal(ds.iterations, 2);
    assert_int_equal(ds.drafted, 8 + 2);
    assert_int_equal(ds.produced, 9 + 3);
    assert_true(ds.r == 1.0);
    assert_float_equal(ds.tokens_per_pass, 6.0, 1e-12);
    /* off mid-reply: the next token is sampled plainly, the queue dropped */
    assert_int_equal(gpt2_session_set_draft_enabled(s, 0, &err), GPT2_OK);
    assert_int_equal(gpt2_session_draft_enabled(s), 0);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_int_equal(tk.origin, GPT2_TOKEN_SAMPLED);
    assert_int_equal(gpt2_session_set_draft_enabled(s, 1, &err), GPT2_OK);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_true(tk.origin != GPT2_TOKEN_SAMPLED);
    gpt2_session_draft_stats(s, &ds, NULL);
    assert_int_equal(ds.iterations, 3);
    gpt2_session_stop(s, NULL, &err);
    assert_cache_fresh(s);
    /* removed: off, and turning it on is an error */
    assert_int_equal(gpt2_session_set_draft(s, NULL, 0, &err), GPT2_OK);
    assert_null(gpt2_session_draft_model(s));
    assert_int_equal(gpt2_session_set_draft_enabled(s, 1, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no draft model"));
    gpt2_session_free(s);
}

/* The decoder draws from the sampler's stream: one seed, one reply; a
 * restored RNG state repeats a reply through regen; save/load keep the stream. */
static void test_draft_rng(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_error err;
    reply r[2];
    for (int i = 0; i < 2; i++) {
        gpt2_session *s = mk(&t, 64, 256, 12, hot(5, 1.0f), GPT2_SESSION_REFUSE);
        assert_int_equal(gpt2_session_set_draft(s, g_draft_lm, 3, &err), GPT2_OK);
        send_ok(s, "tell");
        uint64_t rng0 = gpt2_session_rng_state(s);
        dreply d = run_dreply(s, 20);
        r[i] = d.r;
        assert_true(gpt2_session_rng_state(s) != rng0); /* the iterations drew from it */
        if (i == 1) {
            gpt2_session_set_rng_state(s, rng0);
            assert_int_equal(gpt2_session_regen(s, NULL, NULL, &err), GPT2_OK);
            dreply again = run_dreply(s, 20);
            assert_same_reply(&r[0], &again.r);
            reply_free(&again.r);
            /* saved before a reply, loaded: the same reply again */
            const char *path = tmp_path("draft.json");
            assert_int_equal(gpt2_session_undo(s, &err), GPT2_OK);
            assert_int_equal(gpt2_session_save(s, path, &err), GPT2_OK);
            send_ok(s, "tell");
            dreply a = run_dreply(s, 20);
            assert_int_equal(gpt2_session_load(s, path, NULL, NULL, &err), GPT2_OK);
            assert_ptr_equal(gpt2_session_draft_model(s), g_draft_lm); /* draft settings kept */
            send_ok(s, "tell");
            dreply b = run_dreply(s, 20);
            assert_same_reply(&a.r, &b.r);
            reply_free(&a.r);
            reply_free(&b.r);
            unlink(path);
        }
        gpt2_session_free(s);
    }
    assert_same_reply(&r[0], &r[1]);
    reply_free(&r[0]);
    reply_free(&r[1]);
}

/* Plain mode's scenarios whose checks hold between any two steps in draft
 * mode too (<|endoftext|>, Esc and busy sends, a full context under refuse,
 * regen, undo/reset, template switches, save/load mid-reply, cancelled
 * prefills), with each draft. (The others compare evaluation counters, or
 * the cache mid-reply, which draft mode changes by design.) */
static void test_draft_plain_scenarios(void **state) {
    const gpt2_model *drafts[2] = {g_model, g_draft_lm};
    for (int d = 0; d < 2; d++) {
        g_draft = drafts[d];
        g_draft_k = d ? 3 : 4;
        test_eot_ends_reply(state);
        test_stop_and_busy(state);
        test_context_full_refuse(state);
        test_oversized_message(state);
        test_regen(state);
        test_undo_reset(state);
        test_set_template(state);
        test_save_load_held(state);
        test_cancel_prefill(state);
    }
    g_draft = NULL;
}

/* The model a session file names, read without loading it; a file far
 * larger than any conversation is refused from its size alone, before a
 * byte is read (a sparse 100 MB file: reading it would take seconds). */
static void test_file_model_and_size(void **state) {
    (void)state;
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 8, 4, greedy(), GPT2_SESSION_DROP_OLDEST);
    send_ok(s, "hello");
    char path[] = "/tmp/gptscope-sess-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    gpt2_error err;
    assert_int_equal(gpt2_session_save(s, path, &err), GPT2_OK);
    char name[64];
    int n_vocab = 0;
    assert_int_equal(gpt2_session_file_model(path, name, sizeof name, &n_vocab, &err), GPT2_OK);
    assert_string_equal(name, gpt2_model_name(g_model));
    assert_int_equal(n_vocab, gpt2_model_config(g_model)->n_vocab);
    assert_int_equal(truncate(path, 100 << 20), 0); /* sparse: no 100 MB written */
    assert_int_equal(gpt2_session_file_model(path, name, sizeof name, &n_vocab, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "104857600 bytes, more than the 16 MiB a session file may have"));
    int n_before;
    gpt2_session_tokens(s, &n_before);
    assert_int_equal(gpt2_session_load(s, path, NULL, NULL, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "16 MiB"));
    int n_after;
    gpt2_session_tokens(s, &n_after);
    assert_int_equal(n_after, n_before);
    unlink(path);
    gpt2_session_free(s);
}

/* Checks that every reply token of every turn still in the context sits at
 * its turn's pos + k in the session's tokens, and returns how many reply
 * tokens have candidates recorded. */
static int check_candidates(gpt2_session *s) {
    int n_tok, recorded = 0;
    const int32_t *toks = gpt2_session_tokens(s, &n_tok);
    for (int i = 0; i < gpt2_session_n_turns(s); i++) {
        gpt2_turn t;
        assert_true(gpt2_session_turn(s, i, &t));
        if (t.role == GPT2_ROLE_USER) {
            assert_int_equal(t.pos, -1);
            continue;
        }
        if (!t.in_context) assert_int_equal(t.pos, -1);
        else {
            assert_true(t.pos >= 0 && t.pos + t.n_ids <= n_tok);
            assert_memory_equal(toks + t.pos, t.ids, (size_t)t.n_ids * sizeof *t.ids);
        }
        for (int k = 0; k < t.n_ids; k++) {
            gpt2_token_candidates tc;
            assert_int_equal(gpt2_session_candidates(s, i, k, &tc), GPT2_OK);
            if (tc.n == 0) continue;
            recorded++;
            /* greedy: the sampled token is the most probable, the only one kept */
            assert_int_equal(tc.c[0].id, t.ids[k]);
            assert_int_equal(tc.c[0].removed_by, GPT2_STAGE_KEPT);
            for (int j = 1; j < tc.n; j++) {
                assert_int_equal(tc.c[j].removed_by, GPT2_STAGE_GREEDY);
                assert_true(tc.c[j].prob_temp <= tc.c[j - 1].prob_temp);
            }
            assert_true(tc.params.temperature == 0.0f);
        }
    }
    return recorded;
}

/* Each reply token's candidates are kept with its turn: through a context
 * drop (the turn's tokens move), a save and a load (to 6 digits); another
 * model's file, or a version-1 file, loads with none recorded. */
static void test_candidates_kept(void **state) {
    (void)state;
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 8, 6, greedy(), GPT2_SESSION_DROP_OLDEST);
    gpt2_error err;
    assert_int_equal(gpt2_session_candidates(s, 0, 0, &(gpt2_token_candidates){0}), GPT2_ERR_INVALID_ARG);
    unsigned notices = gpt2_session_get_stats(s).notices;
    int first_pos = -1, k;
    for (k = 0; k < 12 && gpt2_session_get_stats(s).notices == notices; k++) {
        char m[32];
        snprintf(m, sizeof m, "message number %d", k);
        send_ok(s, m);
        reply r = run_reply(s, 6);
        reply_free(&r);
        gpt2_turn t1;
        gpt2_session_turn(s, 1, &t1);
        if (k == 0) first_pos = t1.pos;
        assert_true(check_candidates(s) > 0);
    }
    assert_true(gpt2_session_get_stats(s).notices != notices); /* a drop happened */
    const int n_turns = gpt2_session_n_turns(s);
    gpt2_turn last;
    gpt2_session_turn(s, n_turns - 1, &last);
    assert_true(last.pos > 0 && first_pos > 0);
    const int before = check_candidates(s);
    assert_true(before >= last.n_ids);
    /* save and load: the same candidates, to 6 significant digits */
    char path[] = "/tmp/gptscope-cands-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gpt2_session_save(s, path, &err), GPT2_OK);
    gpt2_session *s2 = mk(&t, 64, 8, 6, greedy(), GPT2_SESSION_DROP_OLDEST);
    assert_int_equal(gpt2_session_load(s2, path, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(check_candidates(s2), before);
    for (int i = 1; i < n_turns; i += 2) {
        gpt2_turn ta;
        gpt2_session_turn(s, i, &ta);
        for (int j = 0; j < ta.n_ids; j++) {
            gpt2_token_candidates a, b;
            gpt2_session_candidates(s, i, j, &a);
            gpt2_session_candidates(s2, i, j, &b);
            assert_int_equal(a.n, b.n);
            for (int c = 0; c < a.n; c++) {
                assert_int_equal(a.c[c].id, b.c[c].id);
                assert_int_equal(a.c[c].removed_by, b.c[c].removed_by);
                /* 6 significant digits: within half a unit of the sixth */
                assert_true(fabsf(a.c[c].prob_temp - b.c[c].prob_temp) <= 6e-6f * a.c[c].prob_temp + 1e-12f);
            }
        }
    }
    /* a version-1 file (no candidates): loads, none recorded */
    size_t len;
    char *text = read_file(path, &len);
    cJSON *root = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(root, "version", cJSON_CreateNumber(1));
    cJSON *turn_o;
    cJSON_ArrayForEach(turn_o, cJSON_GetObjectItem(root, "turns")) cJSON_DeleteItemFromObject(turn_o, "candidates");
    char *v1 = cJSON_Print(root);
    FILE *f = fopen(path, "wb");
    fputs(v1, f);
    fclose(f);
    assert_int_equal(gpt2_session_load(s2, path, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(check_candidates(s2), 0);
    /* a malformed entry is refused, naming it */
    cJSON_ReplaceItemInObject(root, "version", cJSON_CreateNumber(2));
    cJSON *t1 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "turns"), 1);
    cJSON *bad = cJSON_CreateArray();
    cJSON_AddItemToArray(bad, cJSON_CreateString("x"));
    cJSON_AddItemToObject(t1, "candidates", bad);
    char *v2 = cJSON_Print(root);
    f = fopen(path, "wb");
    fputs(v2, f);
    fclose(f);
    assert_int_equal(gpt2_session_load(s2, path, NULL, NULL, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "turns[1].candidates"));
    free(v1), free(v2), free(text);
    cJSON_Delete(root);
    unlink(path);
    gpt2_session_free(s2);
    gpt2_session_free(s);
}

/* ---- ablation ---- */

typedef struct {
    float *out;
    int layer, pos;
} last_resid;

static void keep_resid(void *ud, int layer, int pos, const float *x, int n) {
    last_resid *r = ud;
    if (layer == r->layer && pos == r->pos) memcpy(r->out, x, (size_t)n * sizeof *x);
}

/* The logits a fresh context of the same model, under `mask`, gives after
 * the session's tokens. */
static float *fresh_logits(const gpt2_session *s, const unsigned char *mask) {
    int n, V = gpt2_model_config(g_model)->n_vocab;
    const int32_t *toks = gpt2_session_tokens(s, &n);
    gpt2_context *c;
    gpt2_error err;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 4; /* the session's batches, so the same kernels run */
    assert_int_equal(gpt2_context_new(g_model, cp, &c, &err), GPT2_OK);
    assert_int_equal(gpt2_context_set_ablation(c, mask, &err), GPT2_OK);
    assert_int_equal(gpt2_context_eval(c, toks, n, &err), GPT2_OK);
    float *z = malloc((size_t)V * sizeof *z);
    memcpy(z, gpt2_context_logits(c), (size_t)V * sizeof *z);
    gpt2_context_free(c);
    return z;
}

/* Mid-reply: the conversation is kept, the cache is the ablated model's (bit
 * for bit a fresh evaluation's), the reply goes on from the ablated logits;
 * lifting it gives the plain model back; a cancelled change keeps the old set. */
static void test_ablation(void **state) {
    gpt2_chat_template t = short_tmpl();
    gpt2_session *s = mk(&t, 64, 4, 30, greedy(), GPT2_SESSION_DROP_OLDEST);
    const gpt2_config *c = gpt2_model_config(g_model);
    const int V = c->n_vocab;
    unsigned char mask[64] = {0};
    mask[0 * c->n_head + 1] = mask[1 * c->n_head + 0] = 1;
    gpt2_session_token tk;
    gpt2_error err;
    send_ok(s, "go");
    for (int i = 0; i < 3; i++) assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    int n0;
    gpt2_session_tokens(s, &n0);
    float *plain = fresh_logits(s, NULL), *want = fresh_logits(s, mask);
    assert_memory_not_equal(plain, want, (size_t)V * sizeof(float));
    assert_int_equal(gpt2_session_set_ablation(s, mask, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_ablated(s, 0, 1), 1);
    assert_int_equal(gpt2_session_ablated(s, 0, 0), 0);
    int n1;
    gpt2_session_tokens(s, &n1);
    assert_int_equal(n1, n0);
    assert_int_equal(gpt2_context_n_past(gpt2_session_context(s)), n1);
    assert_memory_equal(gpt2_context_logits(gpt2_session_context(s)), want, (size_t)V * sizeof(float));
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK); /* greedy: the ablated model's argmax */
    assert_int_equal(tk.id, argmax(want, V));
    free(want), free(plain);
    want = fresh_logits(s, mask);
    assert_memory_equal(gpt2_context_logits(gpt2_session_context(s)), want, (size_t)V * sizeof(float));
    /* a cancelled lift: still ablated, conversation as it was */
    prog p = {.cancel_at = 1};
    assert_int_equal(gpt2_session_set_ablation(s, NULL, on_progress, &p, &err), GPT2_CANCELLED);
    assert_int_equal(gpt2_session_ablated(s, 0, 1), 1);
    assert_int_equal(gpt2_session_step(s, &tk, &err), GPT2_OK);
    assert_int_equal(tk.id, argmax(want, V));
    free(want);
    /* the lens of the last block's residual at the last position is the cache's own logits */
    float *resid = NULL;
    {
        int n;
        gpt2_session_tokens(s, &n);
        resid = calloc((size_t)c->n_embd, sizeof *resid);
        last_resid r = {resid, c->n_layer - 1, n - 1};
        gpt2_hooks h = {.user_data = &r, .on_residual = keep_resid};
        gpt2_session_set_hooks(s, &h);
        assert_int_equal(gpt2_session_set_ablation(s, NULL, NULL, NULL, &err), GPT2_OK); /* re-evaluates: the hook sees it */
        gpt2_session_set_hooks(s, NULL);
        float *z = malloc((size_t)V * sizeof *z);
        assert_int_equal(gpt2_session_unembed(s, resid, z, &err), GPT2_OK);
        assert_memory_equal(z, gpt2_context_logits(gpt2_session_context(s)), (size_t)V * sizeof(float));
        free(z), free(resid);
    }
    /* lifted: the plain model */
    assert_int_equal(gpt2_session_set_ablation(s, NULL, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_ablated(s, 0, 1), 0);
    plain = fresh_logits(s, NULL);
    assert_memory_equal(gpt2_context_logits(gpt2_session_context(s)), plain, (size_t)V * sizeof(float));
    free(plain);
    gpt2_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_transcript),
        cmocka_unit_test(test_render_dialogpt),
        cmocka_unit_test(test_render_raw),
        cmocka_unit_test(test_render_bos),
        cmocka_unit_test(test_render_jinja),
        cmocka_unit_test(test_turn_end_token),
        cmocka_unit_test(test_reply_space_prefix),
        cmocka_unit_test(test_system_message),
        cmocka_unit_test(test_template_needs_a_message),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_kv_reuse),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_stop_at_token_start),
        cmocka_unit_test(test_eot_ends_reply),
        cmocka_unit_test(test_params_mid_reply),
        cmocka_unit_test(test_stop_and_busy),
        cmocka_unit_test(test_context_full_drop),
        cmocka_unit_test(test_context_full_refuse),
        cmocka_unit_test(test_oversized_message),
        cmocka_unit_test(test_regen),
        cmocka_unit_test(test_undo_reset),
        cmocka_unit_test(test_set_template),
        cmocka_unit_test(test_template_files),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_save_load_held),
        cmocka_unit_test(test_save_load_odd_bytes),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_file_model_and_size),
        cmocka_unit_test(test_candidates_kept),
        cmocka_unit_test(test_ablation),
        cmocka_unit_test(test_cancel_prefill),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test_setup(test_draft_greedy_identical, no_draft),
        cmocka_unit_test_setup(test_draft_short_window, no_draft),
        cmocka_unit_test_setup(test_draft_stop_in_batch, no_draft),
        cmocka_unit_test_setup(test_draft_params_mid_reply, no_draft),
        cmocka_unit_test_setup(test_draft_setup, no_draft),
        cmocka_unit_test_setup(test_draft_rng, no_draft),
        cmocka_unit_test_setup(test_draft_plain_scenarios, no_draft),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
