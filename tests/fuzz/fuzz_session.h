/* fuzz_session.h — checks of a chat session from the outside (fuzz harnesses only).
 *
 * fz_check_session: the session's invariants, from the public API alone: turns
 * alternate user/assistant, dropped turns come first, only the last turn may be
 * replying, every reply's ids decode to its text, the token sequence is the
 * rendering of the turns in the context ("Rendering" in gpt2_session.h, redone
 * here with the tokenizer) and fits the context, and the cache holds a prefix of
 * it (all of it when `synced`).
 * fz_snap / fz_snap_same: the state a failed call must leave as it was.
 * fz_reply: steps a reply to its end (or stops it) and checks what came out.
 */
#ifndef GPTSCOPE_FUZZ_SESSION_H
#define GPTSCOPE_FUZZ_SESSION_H

#include "fuzz_common.h"

typedef struct {
    int32_t *v;
    int n, cap;
} fz_ids;

static void fz_ids_add(fz_ids *a, const int32_t *v, int n) {
    if (a->n + n > a->cap) {
        a->cap = (a->n + n) * 2 + 16;
        if (!(a->v = realloc(a->v, (size_t)a->cap * sizeof *a->v))) FUZZ_DIE("out of memory");
    }
    if (n) memcpy(a->v + a->n, v, (size_t)n * sizeof *v);
    a->n += n;
}

static void fz_encode(const gpt2_tokenizer *tok, fz_ids *a, const char *text, size_t len) {
    int32_t *ids = NULL;
    size_t n = 0;
    gpt2_error err;
    FUZZ_CHECK(gpt2_tokenizer_encode(tok, text, len, 0, &ids, &n, &err) == GPT2_OK, "encode: %s", err.msg);
    fz_ids_add(a, ids, (int)n);
    free(ids);
}

/* A byte buffer for the text between two <|endoftext|> ids. */
typedef struct {
    char *b;
    size_t n, cap;
} fz_buf;

static void fz_buf_add(fz_buf *x, const char *p, size_t n) {
    if (x->n + n + 1 > x->cap) {
        x->cap = (x->n + n + 1) * 2;
        if (!(x->b = realloc(x->b, x->cap))) FUZZ_DIE("out of memory");
    }
    if (n) memcpy(x->b + x->n, p, n);
    x->n += n;
}
static void fz_buf_adds(fz_buf *x, const char *s) { fz_buf_add(x, s, strlen(s)); }

static void fz_flush(const gpt2_tokenizer *tok, fz_ids *out, fz_buf *sb) {
    fz_encode(tok, out, sb->b, sb->n);
    sb->n = 0;
}

/* The token sequence the header says the session must hold. */
static fz_ids fz_render(gpt2_session *s) {
    const gpt2_chat_template *t = gpt2_session_template(s);
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(gpt2_session_model(s));
    const int32_t eot = gpt2_tokenizer_eot(tok);
    fz_ids out = {0};
    fz_buf sb = {0};
    const char *sys = gpt2_session_system(s); /* the system message, a blank line, then the preamble */
    if (*sys) fz_buf_adds(&sb, sys), fz_buf_adds(&sb, "\n\n"), fz_flush(tok, &out, &sb);
    fz_encode(tok, &out, t->preamble, strlen(t->preamble));
    int first = -1;
    for (int i = 0; i < gpt2_session_n_turns(s); i++) {
        gpt2_turn u;
        gpt2_session_turn(s, i, &u);
        if (!u.in_context) continue;
        if (u.role == GPT2_ROLE_ASSISTANT) {
            fz_ids_add(&out, u.ids, u.n_ids);
            continue;
        }
        if (first < 0) first = i;
        if (i > first) {
            fz_buf_adds(&sb, t->assistant_suffix);
            if (t->eot_after_turn) fz_flush(tok, &out, &sb), fz_ids_add(&out, &eot, 1);
        }
        fz_buf_adds(&sb, t->user_prefix);
        fz_buf_add(&sb, u.text, u.len);
        fz_buf_adds(&sb, t->user_suffix);
        if (t->eot_after_turn) fz_flush(tok, &out, &sb), fz_ids_add(&out, &eot, 1);
        fz_buf_adds(&sb, t->assistant_prefix);
        fz_flush(tok, &out, &sb);
    }
    free(sb.b);
    return out;
}

static void fz_check_no_stop(gpt2_session *s, const gpt2_turn *a, const char *what) {
    const gpt2_chat_template *tm = gpt2_session_template(s);
    for (int k = 0; k < tm->n_stop; k++) {
        size_t L = strlen(tm->stop[k]);
        for (size_t j = 0; j + L <= a->len; j++)
            FUZZ_CHECK(memcmp(a->text + j, tm->stop[k], L) != 0, "%s holds stop string %d at byte %zu", what, k, j);
    }
}

static void fz_check_session(gpt2_session *s, int synced) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(gpt2_session_model(s));
    const int nt = gpt2_session_n_turns(s);
    FUZZ_CHECK(nt % 2 == 0, "%d turns", nt);
    int seen_in = 0;
    for (int i = 0; i < nt; i++) {
        gpt2_turn u;
        FUZZ_CHECK(gpt2_session_turn(s, i, &u), "turn %d of %d missing", i, nt);
        FUZZ_CHECK(u.role == (i % 2 ? GPT2_ROLE_ASSISTANT : GPT2_ROLE_USER), "turn %d has role %d", i, u.role);
        FUZZ_CHECK(u.text && u.text[u.len] == '\0' && u.shown <= u.len, "turn %d: text/shown", i);
        FUZZ_CHECK(!(seen_in && !u.in_context), "turn %d dropped after a kept one", i);
        FUZZ_CHECK(seen_in || !u.in_context || i % 2 == 0, "the context starts at reply %d", i);
        seen_in |= u.in_context;
        FUZZ_CHECK(u.replying == (i == nt - 1 && gpt2_session_replying(s)), "turn %d replying %d", i, u.replying);
        if (u.role == GPT2_ROLE_USER) {
            FUZZ_CHECK(u.ids == NULL && u.n_ids == 0, "user turn %d has ids", i);
            continue;
        }
        FUZZ_CHECK(u.replying || u.shown == u.len, "finished turn %d shows %zu of %zu bytes", i, u.shown, u.len);
        size_t off = 0, l;
        for (int k = 0; k < u.n_ids; k++) {
            const char *b = gpt2_tokenizer_token_bytes(tok, u.ids[k], &l);
            FUZZ_CHECK(b && l <= u.len - off && memcmp(u.text + off, b, l) == 0,
                       "turn %d: ids[%d] = %d does not match the text at byte %zu", i, k, u.ids[k], off);
            off += l;
        }
        FUZZ_CHECK(off == u.len, "turn %d: ids decode to %zu of its %zu bytes", i, off, u.len);
        if (u.replying) fz_check_no_stop(s, &u, "the reply in progress"); /* it would have ended there */
    }
    FUZZ_CHECK(!gpt2_session_replying(s) || seen_in, "replying without an exchange in the context");
    int n = 0;
    const int32_t *toks = gpt2_session_tokens(s, &n);
    fz_ids want = fz_render(s);
    FUZZ_CHECK(n == want.n && (n == 0 || memcmp(toks, want.v, (size_t)n * sizeof *toks) == 0),
               "the session's %d tokens are not the rendering of its turns (%d tokens)", n, want.n);
    free(want.v);
    FUZZ_CHECK(n <= gpt2_session_n_ctx(s), "%d tokens in a context of %d", n, gpt2_session_n_ctx(s));
    const gpt2_context *ctx = gpt2_session_context(s);
    const int np = gpt2_context_n_past(ctx);
    const int32_t *ct = gpt2_context_tokens(ctx);
    FUZZ_CHECK(np <= n && (np == 0 || memcmp(ct, toks, (size_t)np * sizeof *ct) == 0),
               "the cache's %d tokens are not a prefix of the session's %d", np, n);
    FUZZ_CHECK(!synced || np == n, "the cache holds %d of the session's %d tokens", np, n);
}

/* What a failed call must not change. */
typedef struct {
    int n_turns, replying, n_toks, max_new, policy;
    fz_buf text;     /* every turn: role, in_context, len, bytes, n_ids, ids */
    int32_t *toks;
    uint64_t rng;
    gpt2_sampler_params sp;
    char tmpl_name[GPT2_TEMPLATE_MAX_NAME];
} fz_snap;

static fz_snap fz_snap_take(gpt2_session *s) {
    fz_snap z = {.n_turns = gpt2_session_n_turns(s), .replying = gpt2_session_replying(s),
                 .max_new = gpt2_session_max_new_tokens(s), .policy = (int)gpt2_session_context_policy(s),
                 .rng = gpt2_session_rng_state(s), .sp = gpt2_session_sampler_params(s)};
    snprintf(z.tmpl_name, sizeof z.tmpl_name, "%s", gpt2_session_template(s)->name);
    for (int i = 0; i < z.n_turns; i++) {
        gpt2_turn u;
        gpt2_session_turn(s, i, &u);
        int head[4] = {(int)u.role, u.in_context, (int)u.len, u.n_ids};
        fz_buf_add(&z.text, (const char *)head, sizeof head);
        fz_buf_add(&z.text, u.text, u.len);
        fz_buf_add(&z.text, (const char *)u.ids, (size_t)u.n_ids * sizeof *u.ids);
    }
    const int32_t *t = gpt2_session_tokens(s, &z.n_toks);
    if (!(z.toks = malloc((size_t)z.n_toks * sizeof *t + 1))) FUZZ_DIE("out of memory");
    if (z.n_toks) memcpy(z.toks, t, (size_t)z.n_toks * sizeof *t);
    return z;
}

static int fz_snap_same(const fz_snap *a, const fz_snap *b) {
    return a->n_turns == b->n_turns && a->replying == b->replying && a->n_toks == b->n_toks &&
           a->max_new == b->max_new && a->policy == b->policy && a->rng == b->rng &&
           memcmp(&a->sp, &b->sp, sizeof a->sp) == 0 && strcmp(a->tmpl_name, b->tmpl_name) == 0 &&
           a->text.n == b->text.n && (a->text.n == 0 || memcmp(a->text.b, b->text.b, a->text.n) == 0) &&
           (a->n_toks == 0 || memcmp(a->toks, b->toks, (size_t)a->n_toks * sizeof *a->toks) == 0);
}

static void fz_snap_free(fz_snap *z) {
    free(z->text.b);
    free(z->toks);
}

/* Steps the reply in progress, at most max_steps tokens, then stops it. Checks
 * that the text given out is the reply's (when valid UTF-8) and that a reply
 * that began in this session holds no stop string. */
static void fz_reply(gpt2_session *s, int max_steps, int fresh) {
    fz_buf got = {0};
    gpt2_session_token t = {0};
    gpt2_error err;
    for (int k = 0; k < max_steps && !t.done; k++) {
        gpt2_status st = gpt2_session_step(s, &t, &err);
        FUZZ_CHECK(st == GPT2_OK, "step %d failed: %s", k, err.msg);
        FUZZ_CHECK(t.text && t.text[t.len] == '\0', "step text");
        fz_buf_add(&got, t.text, t.len);
    }
    if (!t.done) {
        FUZZ_CHECK(gpt2_session_stop(s, &t, &err) == GPT2_OK, "stop: %s", err.msg);
        fz_buf_add(&got, t.text, t.len);
    }
    FUZZ_CHECK(!gpt2_session_replying(s), "still replying after stop");
    FUZZ_CHECK(fuzz_utf8_valid((const unsigned char *)got.b, got.n), "a step gave out invalid UTF-8");
    gpt2_turn a;
    gpt2_session_turn(s, gpt2_session_n_turns(s) - 1, &a);
    if (fresh && fuzz_utf8_valid((const unsigned char *)a.text, a.len))
        FUZZ_CHECK(got.n == a.len && memcmp(got.b, a.text, a.len) == 0,
                   "steps gave out %zu bytes, the reply holds %zu", got.n, a.len);
    if (fresh) fz_check_no_stop(s, &a, "the reply");
    free(got.b);
    fz_check_session(s, 1); /* a reply that ended leaves the cache in line */
}

#endif
