/* session.c — a chat session: the conversation and its rendering into tokens,
 * the KV cache kept in line with it, one-token generation with stop strings,
 * the context-full policy, regen/undo/reset, template switching, save/load,
 * and draft mode (speculative sampling through gpt2_speculative, its tokens
 * queued and handed out one per step). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jinja.h"
#include "gpt2_fileio.h"
#include "json.h"
#include "chat_template_internal.h"
#include "textio.h"

/* One turn. text always points at a NUL-terminated buffer. */
typedef struct {
    gpt2_role role;
    char *text;    /* (cap) bytes, text[len] = 0 */
    size_t len, cap;
    int32_t *ids;  /* (cap_ids) an assistant turn's reply tokens, n_ids of them */
    gpt2_token_candidates *cands; /* (cap_ids) what the sampler saw at each; .n = 0: nothing recorded */
    int n_ids, cap_ids;
} turn;

typedef struct {
    turn *t;   /* (cap) turns, n in use: user, assistant, user, ... */
    int n, cap;
    int first; /* the first turn in the context (even: a user turn) */
    char *system; /* the system message, rendered before every turn (never dropped); NULL: none */
} convo;

typedef struct {
    int32_t *v; /* (cap) */
    int n, cap;
    int *pos;   /* (pos_cap) where render put turn i's reply tokens; -1: a user turn, or not rendered */
    int n_pos, pos_cap;
} tokvec;

struct gpt2_session {
    const gpt2_model *model;
    const gpt2_tokenizer *tok;
    gpt2_context *ctx;
    gpt2_sampler *smp;
    gpt2_chat_template *tmpl; /* own copy */
    int n_ctx, n_vocab;
    int32_t eot;              /* -1 if the vocabulary has none */
    int32_t turn_end;         /* the special token a Jinja template puts after a reply, or -1 */
    int max_new;
    gpt2_session_policy policy;

    convo cv;
    /* Branches (gpt2_session_fork): br[i] for each branch but the active one,
     * br[cur], whose conversation is cv; n_br 0 until the first fork. */
    convo *br;
    int n_br, cur;
    tokvec toks; /* the rendered conversation: what the cache should hold */
    tokvec next; /* a new rendering being built; the old one after a swap */
    char *sb;    /* text builder for rendering, (sb_cap) bytes */
    size_t sb_len, sb_cap;
    /* the last Jinja template parsed, and its source: a conversation is
       rendered many times (each reply's place, each fit), the source rarely changes */
    jinja_template *jt;
    char *jt_src;

    /* The reply in progress: the last turn. */
    int replying;
    size_t held;   /* bytes of its text given out; text[held, len) is held back */
    int n_sampled; /* tokens sampled into it, for max_new_tokens */
    gpt2_utf8_stream utf8;

    char *out; /* step's text, (out_cap) bytes */
    size_t out_cap;


    gpt2_session_stats stats;
    char notice[GPT2_ERROR_MSG_MAX];

    gpt2_context_params cparams; /* the context's, for the draft's */

    /* Draft mode. The decoder's target is ctx itself, so its verification
     * passes fill the session's cache (and fire the user's hooks). */
    const gpt2_model *draft;
    gpt2_context *dctx;         /* the draft's context, window <= n_ctx */
    gpt2_speculative *spec;
    int draft_on, draft_k;
    gpt2_spec_token q[GPT2_SPEC_MAX_K + 1]; /* the last iteration's tokens */
    int q_pos, q_len;           /* q[q_pos, q_len) not handed out yet */
    int q_drafted;              /* drafts the last iteration proposed */
    int reply_drafted;          /* the reply in progress ran an iteration */
    gpt2_draft_stats d_reply, d_total;
};

/* ---- small containers ---- */

static int tv_reserve(tokvec *t, int need) {
    if (need <= t->cap) return 1;
    if (need > INT_MAX / 2) return 0;
    int cap = t->cap ? t->cap : 64;
    while (cap < need) cap *= 2;
    int32_t *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (!v) return 0;
    t->v = v;
    t->cap = cap;
    return 1;
}

static void tv_swap(tokvec *a, tokvec *b) {
    tokvec t = *a;
    *a = *b;
    *b = t;
}

static int text_reserve(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) return 0;
        c *= 2;
    }
    char *p = realloc(*buf, c);
    if (!p) return 0;
    *buf = p;
    *cap = c;
    return 1;
}

static int ids_reserve(turn *u, int need) {
    if (need <= u->cap_ids) return 1;
    if (need > INT_MAX / 2) return 0;
    int c = u->cap_ids ? u->cap_ids : 16;
    while (c < need) c *= 2;
    int32_t *p = realloc(u->ids, (size_t)c * sizeof *p);
    if (!p) return 0;
    u->ids = p;
    gpt2_token_candidates *q = realloc(u->cands, (size_t)c * sizeof *q);
    if (!q) return 0;
    memset(q + u->cap_ids, 0, (size_t)(c - u->cap_ids) * sizeof *q); /* nothing recorded */
    u->cands = q;
    u->cap_ids = c;
    return 1;
}

static void turn_free(turn *u) {
    free(u->text);
    free(u->ids);
    free(u->cands);
    memset(u, 0, sizeof *u);
}

static void cv_clear(convo *c) {
    for (int i = 0; i < c->n; i++) turn_free(&c->t[i]);
    free(c->t);
    free(c->system);
    memset(c, 0, sizeof *c);
}

/* Appends a turn holding a copy of text; 0 on allocation failure. */
static int cv_push(convo *c, gpt2_role role, const char *text, size_t len) {
    if (c->n == c->cap) {
        if (c->cap > INT_MAX / 4) return 0;
        int cap = c->cap ? c->cap * 2 : 16;
        turn *t = realloc(c->t, (size_t)cap * sizeof *t);
        if (!t) return 0;
        c->t = t;
        c->cap = cap;
    }
    turn u = {.role = role};
    if (len == SIZE_MAX || !text_reserve(&u.text, &u.cap, len + 1)) return 0;
    if (len) memcpy(u.text, text, len);
    u.text[len] = '\0';
    u.len = len;
    c->t[c->n++] = u;
    return 1;
}

/* ---- hooks: the user's are the context's own; a long call's progress is
 * pushed above them for its duration (gpt2_context_push_hooks) ---- */

typedef struct {
    gpt2_progress_fn fn;
    void *ud;
} progress_hook;

static int progress_cancel(void *ud, int done, int total) {
    const progress_hook *p = ud;
    return p->fn(p->ud, done, total);
}

void gpt2_session_set_hooks(gpt2_session *s, const gpt2_hooks *hooks) {
    if (!s) return;
    gpt2_context_set_hooks(s->ctx, hooks);
}

/* ---- rendering ---- */

static int sb_add(gpt2_session *s, const char *p, size_t n) {
    if (n > SIZE_MAX - s->sb_len - 1 || !text_reserve(&s->sb, &s->sb_cap, s->sb_len + n + 1)) return 0;
    if (n) memcpy(s->sb + s->sb_len, p, n);
    s->sb_len += n;
    return 1;
}

/* Appends the encoding of len bytes of text to out. */
static gpt2_status tv_encode(gpt2_session *s, tokvec *out, const char *text, size_t len, gpt2_error *err) {
    if (len == 0) return GPT2_OK;
    int32_t *ids = NULL;
    size_t n = 0;
    gpt2_status st = gpt2_tokenizer_encode(s->tok, text, len, 0, &ids, &n, err);
    if (st != GPT2_OK) return st;
    if (n > (size_t)(INT_MAX / 4) - (size_t)out->n) {
        free(ids);
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL, "text of %zu tokens is far too long for any context", n);
    }
    if (!tv_reserve(out, out->n + (int)n)) {
        free(ids);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for %zu tokens", n);
    }
    if (n) memcpy(out->v + out->n, ids, n * sizeof *ids);
    out->n += (int)n;
    free(ids);
    return GPT2_OK;
}

static gpt2_status push_id(tokvec *out, int32_t id, gpt2_error *err) {
    if (!tv_reserve(out, out->n + 1)) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for tokens");
    out->v[out->n++] = id;
    return GPT2_OK;
}

static gpt2_status sb_flush(gpt2_session *s, tokvec *out, gpt2_error *err) {
    gpt2_status st = tv_encode(s, out, s->sb, s->sb_len, err);
    s->sb_len = 0;
    return st;
}

#define TRY(expr)                                                                                                  \
    do {                                                                                                           \
        gpt2_status st_ = (expr);                                                                                  \
        if (st_ != GPT2_OK) return st_;                                                                            \
    } while (0)

static gpt2_status sb_text(gpt2_session *s, const char *p, size_t n, gpt2_error *err) {
    if (!sb_add(s, p, n)) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory rendering the conversation");
    return GPT2_OK;
}

/* Bytes at the start of turn u that a reader does not see: the space a
 * tokenizer with a space prefix (SentencePiece's '▁') puts before a reply's
 * first word, which its decode drops (gpt2_tokenizer_decode), so that the
 * reply reads as Hugging Face and llama.cpp show it and as a template gets it. */
static size_t reply_lead(const gpt2_tokenizer *tok, const turn *u) {
    return u->role == GPT2_ROLE_ASSISTANT && u->len > 0 && u->text[0] == ' ' && gpt2_tokenizer_space_prefix(tok);
}

/* A user turn's block: [assistant_suffix (+EOT)] user_prefix text user_suffix
 * (+EOT) assistant_prefix; the previous reply's close only after_reply. */
static gpt2_status render_user(gpt2_session *s, const gpt2_chat_template *t, const turn *u, int after_reply,
                               tokvec *out, gpt2_error *err) {
    s->sb_len = 0;
    if (after_reply) {
        TRY(sb_text(s, t->assistant_suffix, strlen(t->assistant_suffix), err));
        if (t->eot_after_turn) {
            TRY(sb_flush(s, out, err));
            TRY(push_id(out, s->eot, err));
        }
    }
    TRY(sb_text(s, t->user_prefix, strlen(t->user_prefix), err));
    TRY(sb_text(s, u->text, u->len, err));
    TRY(sb_text(s, t->user_suffix, strlen(t->user_suffix), err));
    if (t->eot_after_turn) {
        TRY(sb_flush(s, out, err));
        TRY(push_id(out, s->eot, err));
    }
    TRY(sb_text(s, t->assistant_prefix, strlen(t->assistant_prefix), err));
    return sb_flush(s, out, err);
}

/* The text the Jinja template t makes of turns [first, n) of c (as
 * apply_chat_template: {role, content} messages, add_generation_prompt when
 * the last is the user's); *text malloc'd. */
static gpt2_status jinja_text(const gpt2_tokenizer *tok, const jinja_template *jt, const gpt2_chat_template *t,
                              const convo *c, int first, int n, char **text, size_t *len, gpt2_error *err) {
    const int k = n > first ? n - first : 0, sys = c->system != NULL;
    if (k + sys == 0) { /* nothing to render: apply_chat_template is never given no messages, and
                           templates that read messages[0] (Qwen2.5's) fail on none */
        *text = calloc(1, 1), *len = 0;
        return *text ? GPT2_OK : gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory rendering the conversation");
    }
    const char **roles = malloc((size_t)(k + 2) * sizeof *roles), **contents = malloc((size_t)(k + 2) * sizeof *contents);
    if (!roles || !contents) {
        free(roles), free(contents);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory rendering the conversation");
    }
    if (sys) roles[0] = "system", contents[0] = c->system;
    for (int i = 0; i < k; i++) {
        roles[sys + i] = c->t[first + i].role == GPT2_ROLE_USER ? "user" : "assistant";
        contents[sys + i] = c->t[first + i].text ? c->t[first + i].text + reply_lead(tok, &c->t[first + i]) : "";
    }
    const int gen = k > 0 && c->t[n - 1].role == GPT2_ROLE_USER;
    const char *bos = t->bos_token && t->bos_token[0] ? t->bos_token : NULL;
    const char *eos = t->eos_token && t->eos_token[0] ? t->eos_token : NULL;
    gpt2_status st = jinja_render_chat(jt, roles, contents, sys + k, gen, bos, eos, NULL, text, len, err);
    free(roles), free(contents);
    return st;
}

/* t's Jinja parsed: the cached parse when t's source is the one parsed last. */
static gpt2_status parsed(gpt2_session *s, const gpt2_chat_template *t, jinja_template **out, gpt2_error *err) {
    if (!s->jt || strcmp(s->jt_src, t->jinja) != 0) {
        jinja_template *jt;
        char *src = strdup(t->jinja);
        if (!src) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for the chat template");
        gpt2_status st = jinja_parse(t->name, t->jinja, strlen(t->jinja), &jt, err);
        if (st) {
            free(src);
            return st;
        }
        jinja_free(s->jt), free(s->jt_src);
        s->jt = jt, s->jt_src = src;
    }
    *out = s->jt;
    return GPT2_OK;
}

/* out = turns [first, n_turns) as the model's Jinja template renders them,
 * encoded with its special tokens (the template writes them, BOS included).
 * The last reply is the one the cache continues: the turns before it with the
 * generation prompt, then its tokens as sampled; an earlier reply is a message
 * of the text, closed as the template closes it, and its position is where
 * the template's text for the turns before it, with the generation prompt,
 * ends, when those tokens begin out's (else -1). */
static gpt2_status render_jinja(gpt2_session *s, const gpt2_chat_template *t, const convo *c, int first, int n_turns,
                                tokvec *out, gpt2_error *err) {
    jinja_template *jt;
    gpt2_status st = parsed(s, t, &jt, err);
    const int open = n_turns > first && c->t[n_turns - 1].role == GPT2_ROLE_ASSISTANT; /* the last reply */
    const int n_msg = n_turns - open;
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!st) st = jinja_text(s->tok, jt, t, c, first, n_msg, &text, &len, err);
    if (!st) st = gpt2_tokenizer_encode(s->tok, text, len, GPT2_ENCODE_SPECIAL, &ids, &n, err);
    free(text);
    const int n_reply = open ? c->t[n_turns - 1].n_ids : 0;
    if (!st && n > (size_t)INT_MAX / 4) st = gpt2_fail(err, GPT2_ERR_CONTEXT_FULL, "a conversation of %zu tokens", n);
    if (!st && !tv_reserve(out, (int)n + n_reply)) st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for tokens");
    if (!st) {
        if (n) memcpy(out->v, ids, n * sizeof *ids);
        if (n_reply) memcpy(out->v + n, c->t[n_turns - 1].ids, (size_t)n_reply * sizeof *ids);
        out->n = (int)n + n_reply;
        if (open) out->pos[n_turns - 1] = (int)n;
    }
    for (int i = first; i < n_msg && !st; i++) {
        if (c->t[i].role != GPT2_ROLE_ASSISTANT) continue;
        int32_t *p = NULL;
        size_t k = 0;
        if (!(st = jinja_text(s->tok, jt, t, c, first, i, &text, &len, err)) &&
            !(st = gpt2_tokenizer_encode(s->tok, text, len, GPT2_ENCODE_SPECIAL, &p, &k, err)))
            out->pos[i] = k <= n && (!k || !memcmp(p, ids, k * sizeof *p)) ? (int)k : -1;
        free(text), free(p);
    }
    free(ids);
    return st;
}

/* The special token a Jinja template writes right after a reply (ChatML's
 * <|im_end|>, Llama 3's <|eot_id|>, Gemma's <end_of_turn>): what ends a turn
 * when the model emits it; -1 for a template without (it raises, or plain
 * text follows). */
static int32_t turn_end_of(gpt2_session *s, const gpt2_chat_template *t) {
    if (!t->jinja || !t->jinja[0]) return -1;
    static const char mark[] = "gptscope-reply-mark";
    jinja_template *jt;
    if (parsed(s, t, &jt, NULL) != GPT2_OK) return -1;
    const char *roles[] = {"user", "assistant"}, *contents[] = {"Hello", mark};
    char *text = NULL;
    size_t len = 0;
    int32_t end = -1, *sp = NULL, *plain = NULL;
    size_t n_sp = 0, n_plain = 0;
    const char *bos = t->bos_token && t->bos_token[0] ? t->bos_token : NULL;
    const char *eos = t->eos_token && t->eos_token[0] ? t->eos_token : NULL;
    if (jinja_render_chat(jt, roles, contents, 2, 0, bos, eos, NULL, &text, &len, NULL) == GPT2_OK) {
        const char *at = strstr(text, mark);
        if (at) {
            at += sizeof mark - 1;
            const size_t rest = len - (size_t)(at - text);
            if (gpt2_tokenizer_encode(s->tok, at, rest, GPT2_ENCODE_SPECIAL, &sp, &n_sp, NULL) == GPT2_OK &&
                gpt2_tokenizer_encode(s->tok, at, rest, 0, &plain, &n_plain, NULL) == GPT2_OK && n_sp &&
                (!n_plain || sp[0] != plain[0]))
                end = sp[0]; /* a special token there, not text */
        }
    }
    free(text), free(sp), free(plain);
    return end;
}

/* out = the tokenizer's BOS if it adds one, the preamble, then turns [first,
 * n_turns) of c, rendered with t (its Jinja, when it has one);
 * out->pos says where each reply's tokens went. */
static gpt2_status render(gpt2_session *s, const gpt2_chat_template *t, const convo *c, int first, int n_turns,
                          tokvec *out, gpt2_error *err) {
    out->n = 0;
    if (c->n > out->pos_cap) {
        int *p = realloc(out->pos, (size_t)c->n * 2 * sizeof *p);
        if (!p) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for tokens");
        out->pos = p, out->pos_cap = c->n * 2;
    }
    out->n_pos = c->n;
    for (int i = 0; i < c->n; i++) out->pos[i] = -1;
    if (t->jinja && t->jinja[0]) return render_jinja(s, t, c, first, n_turns, out, err);
    if (gpt2_tokenizer_bos(s->tok) >= 0) TRY(push_id(out, gpt2_tokenizer_bos(s->tok), err)); /* Llama 3's */
    if (c->system) { /* a plain template has no system turn: the text, a blank line, then the preamble */
        s->sb_len = 0;
        TRY(sb_text(s, c->system, strlen(c->system), err));
        TRY(sb_text(s, "\n\n", 2, err));
        TRY(sb_flush(s, out, err));
    }
    TRY(tv_encode(s, out, t->preamble, strlen(t->preamble), err));
    for (int i = first; i < n_turns; i++) {
        const turn *u = &c->t[i];
        if (u->role == GPT2_ROLE_USER) {
            TRY(render_user(s, t, u, i > first, out, err));
        } else {
            out->pos[i] = out->n;
            if (!tv_reserve(out, out->n + u->n_ids)) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for tokens");
            if (u->n_ids) memcpy(out->v + out->n, u->ids, (size_t)u->n_ids * sizeof *u->ids);
            out->n += u->n_ids;
        }
    }
    return GPT2_OK;
}

gpt2_status gpt2_session_render(const gpt2_model *m, const gpt2_chat_template *t, const gpt2_role *roles,
                                const char *const *texts, int n, int32_t **ids, int *n_ids, gpt2_error *err) {
    *ids = NULL, *n_ids = 0;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    if (!tok) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "render: model '%s' has no tokenizer", gpt2_model_name(m));
    gpt2_status st = gpt2_chat_template_check(t, err);
    if (st) return st;
    gpt2_session s = {.model = m, .tok = tok, .eot = gpt2_tokenizer_eot(tok), .turn_end = -1};
    if (t->eot_after_turn && s.eot < 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "render: template '%s' ends turns with <|endoftext|>, which "
                         "model '%s' does not have", t->name, gpt2_model_name(m));
    convo c = {0};
    tokvec out = {0};
    for (int i = 0; i < n; i++)
        if (roles[i] == GPT2_ROLE_SYSTEM && i > 0)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "render: message %d is a system message, which only the "
                             "first may be", i + 1);
    const int sys = n > 0 && roles[0] == GPT2_ROLE_SYSTEM;
    if (sys && texts[0][0] && !(c.system = strdup(texts[0]))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    for (int i = sys; i < n && !st; i++) { /* a reply's tokens: its text encoded, as a loaded chat has them */
        if (!cv_push(&c, roles[i], texts[i], strlen(texts[i]))) st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
        turn *u = &c.t[c.n - 1];
        size_t k = 0;
        if (!st && roles[i] == GPT2_ROLE_ASSISTANT &&
            !(st = gpt2_tokenizer_encode(tok, u->text, u->len, 0, &u->ids, &k, err)))
            u->n_ids = u->cap_ids = (int)k;
    }
    if (!st) st = render(&s, t, &c, 0, c.n, &out, err);
    if (!st) *ids = out.v, *n_ids = out.n, out.v = NULL;
    free(out.v), free(out.pos), free(s.sb);
    jinja_free(s.jt), free(s.jt_src);
    cv_clear(&c);
    return st;
}

/* ---- the cache ---- */

static void note_eval(gpt2_session *s, int k, int *counter) {
    s->stats.total += k;
    s->stats.last_call += k;
    if (counter) *counter += k;
}

/* Length of the common prefix of the cache and s->toks. */
static int cache_lcp(const gpt2_session *s) {
    const int32_t *ct = gpt2_context_tokens(s->ctx);
    int n = gpt2_context_n_past(s->ctx);
    if (n > s->toks.n) n = s->toks.n;
    int i = 0;
    while (i < n && ct[i] == s->toks.v[i]) i++;
    return i;
}

/* Brings the cache in line with s->toks: keeps the common prefix, evaluates
 * the rest (with progress), and with need_logits makes sure the logits are
 * those after the last token. Counts evaluated tokens into *counter. */
static gpt2_status sync_cache(gpt2_session *s, int need_logits, gpt2_progress_fn progress, void *ud, int *counter,
                              gpt2_error *err) {
    int n = s->toks.n, np = gpt2_context_n_past(s->ctx), common = cache_lcp(s);
    if (common == n && np == n && (!need_logits || gpt2_context_logits(s->ctx))) return GPT2_OK;
    if (common == n && need_logits) {
        if (n == 0)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                             "nothing to condition on: the template '%s' and the conversation render to no tokens",
                             s->tmpl->name);
        common = n - 1; /* evaluate the last token again for its logits */
    }
    gpt2_context_rewind(s->ctx, common, NULL);
    if (common == n) return GPT2_OK;
    progress_hook ph = {progress, ud};
    const int pushed = progress && gpt2_context_push_hooks(s->ctx, &(gpt2_hooks){.user_data = &ph, .progress = progress_cancel},
                                                           NULL) == GPT2_OK;
    gpt2_status st = gpt2_context_eval(s->ctx, s->toks.v + common, n - common, err);
    if (pushed) gpt2_context_pop_hooks(s->ctx);
    note_eval(s, gpt2_context_n_past(s->ctx) - common, counter);
    return st;
}

/* After a failure has restored s->toks: keep only what the cache shares with it. */
static void settle(gpt2_session *s) { gpt2_context_rewind(s->ctx, cache_lcp(s), NULL); }

/* ---- fitting the context ---- */

/* Room to leave for a reply once turns have to be dropped. */
static int reserve_for(const gpt2_session *s, int max_new, int need) {
    int r = s->n_ctx / 4;
    if (max_new > 0 && max_new < r) r = max_new;
    if (r < need) r = need;
    return r < 1 ? 1 : r;
}

/* Renders c with t into s->next, leaving need positions free. If it does not
 * fit and allow_drop, drops whole exchanges from the front (never the last
 * one) until the reserve is free, or only the last exchange is left.
 * *first_out = the first turn kept. GPT2_ERR_CONTEXT_FULL when it cannot fit;
 * `what` names the text that must fit on its own (the last exchange). */
static gpt2_status fit(gpt2_session *s, const gpt2_chat_template *t, const convo *c, int need, int allow_drop,
                       int max_new, const char *what, int *first_out, gpt2_error *err) {
    int first = c->first, max_first = c->n - 2 > first ? c->n - 2 : first;
    TRY(render(s, t, c, first, c->n, &s->next, err));
    if (s->next.n + need <= s->n_ctx) {
        *first_out = first;
        return GPT2_OK;
    }
    int whole = s->next.n;
    if (max_first != first) TRY(render(s, t, c, max_first, c->n, &s->next, err));
    if (s->next.n + need > s->n_ctx)
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL,
                         "%s does not fit the context even on its own: %d tokens with template '%s' (preamble "
                         "included)%s, and the context window holds %d",
                         what, s->next.n, t->name, need ? " plus one position for the reply" : "", s->n_ctx);
    if (!allow_drop)
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL,
                         "context full: the conversation would take %d tokens%s, and the context window holds %d "
                         "(policy refuse: undo or reset to make room, or drop the oldest turns)",
                         whole, need ? " plus one position for the reply" : "", s->n_ctx);
    /* The fewest exchanges to drop: dropping more never adds tokens, so a
     * binary search over the first kept exchange finds it in log(turns)
     * renders (a linear scan took seconds for a file of thousands of turns
     * with first_in_context 0). */
    int reserve = reserve_for(s, max_new, need);
    int lo = 1, hi = (max_first - first) / 2; /* exchanges dropped; hi always fits (checked above, or the last resort) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        TRY(render(s, t, c, first + 2 * mid, c->n, &s->next, err));
        if (s->next.n + reserve <= s->n_ctx) hi = mid;
        else lo = mid + 1;
    }
    *first_out = first + 2 * hi;
    return render(s, t, c, *first_out, c->n, &s->next, err);
}

static void post_drop_notice(gpt2_session *s, int dropped, int evaluated) {
    s->stats.dropped_turns = dropped;
    s->stats.notices++;
    snprintf(s->notice, sizeof s->notice,
             "context full: dropped the %d oldest turn%s (%d exchange%s) from the model's context; re-evaluated %d "
             "token%s",
             dropped, dropped == 1 ? "" : "s", dropped / 2, dropped / 2 == 1 ? "" : "s", evaluated,
             evaluated == 1 ? "" : "s");
}

static gpt2_status check_for_model(const gpt2_session *s, const gpt2_chat_template *t, gpt2_error *err) {
    TRY(gpt2_chat_template_check(t, err));
    if (t->eot_after_turn && s->eot < 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "chat template '%s' ends every turn with <|endoftext|>, but model '%s' has no such token",
                         t->name, gpt2_model_name(s->model));
    return GPT2_OK;
}

/* ---- lifecycle ---- */

gpt2_session_params gpt2_session_default_params(void) {
    return (gpt2_session_params){.context = gpt2_context_default_params(),
                                 .sampler = gpt2_sampler_default_params(),
                                 .max_new_tokens = 256,
                                 .context_policy = GPT2_SESSION_DROP_OLDEST,
                                 .chat_template = NULL};
}

static int out_reserve(gpt2_session *s, size_t need) { return text_reserve(&s->out, &s->out_cap, need); }

gpt2_status gpt2_session_new(const gpt2_model *model, gpt2_session_params p, gpt2_session **out, gpt2_error *err) {
    *out = NULL;
    if (!model) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "session: no model");
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(model);
    if (!tok)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "session: model '%s' has no tokenizer", gpt2_model_name(model));
    if (p.max_new_tokens < 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "session: max_new_tokens %d is negative", p.max_new_tokens);
    if (p.context_policy != GPT2_SESSION_DROP_OLDEST && p.context_policy != GPT2_SESSION_REFUSE)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "session: unknown context policy %d", (int)p.context_policy);
    gpt2_session *s = calloc(1, sizeof *s);
    if (!s) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a session");
    s->model = model;
    s->tok = tok;
    s->n_vocab = gpt2_model_config(model)->n_vocab;
    s->eot = gpt2_tokenizer_eot(tok);
    if (s->eot >= s->n_vocab) s->eot = -1;
    s->max_new = p.max_new_tokens;
    s->policy = p.context_policy;
    s->cparams = p.context;
    s->draft_k = 4;
    const gpt2_chat_template *t = p.chat_template ? p.chat_template : gpt2_chat_template_builtin("transcript");
    gpt2_status st = check_for_model(s, t, err);
    if (st == GPT2_OK) st = gpt2_chat_template_copy(t, &s->tmpl, err);
    if (st == GPT2_OK) s->turn_end = turn_end_of(s, s->tmpl);
    if (st == GPT2_OK) st = gpt2_context_new(model, p.context, &s->ctx, err);
    if (st == GPT2_OK) st = gpt2_sampler_new(p.sampler, s->n_vocab, &s->smp, err);
    if (st == GPT2_OK) {
        s->n_ctx = gpt2_context_n_ctx(s->ctx);
        /* The most a step can give out: the held-back text plus one token, each
         * byte at most 3 bytes of UTF-8 (a lone bad byte becomes U+FFFD). */
        size_t max_tok = 0, l;
        for (int32_t id = 0; id < gpt2_tokenizer_n_vocab(tok); id++)
            if (gpt2_tokenizer_token_bytes(tok, id, &l) && l > max_tok) max_tok = l;
        if (!tv_reserve(&s->toks, s->n_ctx + 1) || !tv_reserve(&s->next, s->n_ctx + 1) ||
            !out_reserve(s, 3 * (max_tok + GPT2_TEMPLATE_MAX_STOP_LEN + 8) + 16))
            st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a session");
    }
    int first;
    if (st == GPT2_OK)
        st = fit(s, s->tmpl, &s->cv, 1, 0, s->max_new, "the template's preamble", &first, err);
    if (st != GPT2_OK) {
        gpt2_session_free(s);
        return st;
    }
    tv_swap(&s->toks, &s->next);
    s->out[0] = '\0';
    *out = s;
    return GPT2_OK;
}

static void branches_clear(gpt2_session *s) {
    for (int i = 0; i < s->n_br; i++) cv_clear(&s->br[i]);
    free(s->br);
    s->br = NULL;
    s->n_br = s->cur = 0;
}

void gpt2_session_free(gpt2_session *s) {
    if (!s) return;
    cv_clear(&s->cv);
    branches_clear(s);
    gpt2_speculative_free(s->spec);
    gpt2_context_free(s->dctx);
    gpt2_context_free(s->ctx);
    gpt2_sampler_free(s->smp);
    gpt2_chat_template_free(s->tmpl);
    free(s->toks.v);
    free(s->next.v);
    free(s->toks.pos);
    free(s->next.pos);
    free(s->sb);
    free(s->out);
    jinja_free(s->jt), free(s->jt_src);
    free(s);
}

/* ---- the reply ---- */

static turn *last_turn(gpt2_session *s) { return &s->cv.t[s->cv.n - 1]; }

/* Forgets the tokens queued by the last draft iteration. The target's cache
 * may then hold some of them past the sequence: the next sync_cache or
 * iteration keeps only the common prefix. */
static void drop_queue(gpt2_session *s) { s->q_pos = s->q_len = 0; }

static void start_reply(gpt2_session *s) {
    drop_queue(s);
    s->reply_drafted = 0;
    memset(&s->d_reply, 0, sizeof s->d_reply);
    s->replying = 1;
    s->held = 0;
    s->n_sampled = 0;
    memset(&s->utf8, 0, sizeof s->utf8);
    turn *a = last_turn(s);
    /* Best effort, so that steps do not reallocate. */
    ids_reserve(a, a->n_ids + (s->n_ctx - s->toks.n) + 1);
}

/* Gives out bytes [from, to) of the reply through the UTF-8 stream, appended
 * to out->text (less its lead). */
static void emit(gpt2_session *s, gpt2_session_token *out, size_t from, size_t to) {
    const turn *a = &s->cv.t[s->cv.n - 1];
    const size_t lead = reply_lead(s->tok, a);
    if (from < lead) from = lead;
    const size_t n = to > from ? to - from : 0;
    if (n && out_reserve(s, out->len + 3 * (n + 4) + 16)) {
        out->len += gpt2_utf8_stream_push(&s->utf8, a->text + from, n, s->out + out->len);
        s->out[out->len] = '\0';
    }
    out->text = s->out;
}

/* Ends the reply: gives out the held-back text and whatever the UTF-8 stream holds. */
static gpt2_status finish(gpt2_session *s, gpt2_session_token *out, gpt2_reply_end end) {
    if (s->replying) {
        turn *a = last_turn(s);
        if (a->len > s->held) emit(s, out, s->held, a->len);
        s->held = a->len;
        if (out_reserve(s, out->len + 16)) {
            out->len += gpt2_utf8_stream_flush(&s->utf8, s->out + out->len);
            s->out[out->len] = '\0';
        }
        out->text = s->out;
    }
    s->replying = 0;
    drop_queue(s);
    if (s->reply_drafted) {
        /* Draft mode leaves the cache ahead of the sequence (queued tokens
         * evaluated) or behind it (the last token not yet): bring it in line,
         * logits included, as a plain reply leaves it. Best effort: should it
         * fail, the next call that evaluates catches up. */
        s->reply_drafted = 0;
        if (sync_cache(s, 1, NULL, NULL, &s->stats.last_reply, NULL) != GPT2_OK) settle(s);
    }
    out->done = 1;
    out->end = end;
    return GPT2_OK;
}

/* The earliest start >= held of a whole stop string in the reply, or -1. */
static long find_stop(const gpt2_session *s, const turn *a) {
    size_t best = SIZE_MAX;
    for (int k = 0; k < s->tmpl->n_stop; k++) {
        const char *stop = s->tmpl->stop[k];
        size_t L = strlen(stop);
        for (size_t j = s->held; j + L <= a->len && j < best; j++)
            if (memcmp(a->text + j, stop, L) == 0) {
                best = j;
                break;
            }
    }
    return best == SIZE_MAX ? -1 : (long)best;
}

/* The earliest j >= from where the reply's end text[j, len) could still grow
 * into a stop string (a proper prefix of one); len if none. */
static size_t hold_point(const gpt2_session *s, const turn *a, size_t from) {
    for (size_t j = from; j < a->len; j++) {
        size_t rem = a->len - j;
        for (int k = 0; k < s->tmpl->n_stop; k++) {
            const char *stop = s->tmpl->stop[k];
            if (strlen(stop) > rem && memcmp(a->text + j, stop, rem) == 0) return j;
        }
    }
    return a->len;
}

/* softmax(logits)[id] at temperature 1, in double. NaN counts as -inf and
 * +inf as FLT_MAX, as in the sampler. */
static float token_prob(const float *z, int n, int32_t id) {
    if (id < 0 || id >= n) return 0.0f;
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        float v = z[i] > FLT_MAX ? FLT_MAX : z[i];
        if (v > mx) mx = v;
    }
    if (!(mx > -INFINITY)) return 0.0f;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float v = z[i] > FLT_MAX ? FLT_MAX : z[i];
        if (v > -INFINITY) sum += exp((double)v - mx);
    }
    float v = z[id] > FLT_MAX ? FLT_MAX : z[id];
    if (!(v > -INFINITY)) return 0.0f;
    return (float)(exp((double)v - mx) / sum);
}

/* The sampled token completed a stop string starting at byte m of the reply:
 * keep the reply's tokens that end by m, re-encode the text of the one that
 * straddles m up to m, and bring the cache in line. */
static gpt2_status finish_stop(gpt2_session *s, gpt2_session_token *out, size_t m) {
    turn *a = last_turn(s);
    size_t off = 0, l;
    int k = 0;
    for (; k < a->n_ids; k++) {
        if (!gpt2_tokenizer_token_bytes(s->tok, a->ids[k], &l)) l = 0;
        if (off + l > m) break;
        off += l;
    }
    int reply_start = s->toks.n - a->n_ids;
    int32_t *tail = NULL;
    size_t nt = 0;
    if (m > off && gpt2_tokenizer_encode(s->tok, a->text + off, m - off, 0, &tail, &nt, NULL) != GPT2_OK) {
        tail = NULL;
        nt = (size_t)-1;
    }
    if (nt == (size_t)-1 || (size_t)(reply_start + k) + nt > (size_t)s->n_ctx || !ids_reserve(a, k + (int)nt) ||
        !tv_reserve(&s->toks, reply_start + k + (int)nt)) {
        /* Rare: the re-encoded text would not fit (or no memory): the reply
         * ends with its last whole token before the stop. */
        if (m > off) {
            s->stats.notices++;
            snprintf(s->notice, sizeof s->notice,
                     "the reply's last %zu bytes before the stop string did not fit the context and were cut",
                     m - off);
        }
        free(tail);
        tail = NULL;
        nt = 0;
        m = off;
    }
    if (m > s->held) emit(s, out, s->held, m);
    if (nt) memcpy(a->ids + k, tail, nt * sizeof *tail);
    if (nt) memset(a->cands + k, 0, nt * sizeof *a->cands); /* re-encoded, never sampled */
    free(tail);
    a->n_ids = k + (int)nt;
    s->toks.n = reply_start + k;
    if (nt) memcpy(s->toks.v + s->toks.n, a->ids + k, nt * sizeof *a->ids);
    s->toks.n += (int)nt;
    a->len = m;
    a->text[m] = '\0';
    s->held = m;
    finish(s, out, GPT2_REPLY_STOP_STRING);
    /* Evaluate the re-encoded tail now, so that the next send evaluates only
     * its own tokens. Should that fail, the next call catches the cache up. */
    if (sync_cache(s, 0, NULL, NULL, &s->stats.last_reply, NULL) != GPT2_OK) settle(s);
    return GPT2_OK;
}

static int can_drop_mid_reply(const gpt2_session *s) {
    return s->policy == GPT2_SESSION_DROP_OLDEST && s->cv.first < s->cv.n - 2;
}

/* The reply filled the context: drop the oldest exchanges and recompute. */
static gpt2_status drop_mid_reply(gpt2_session *s, gpt2_error *err) {
    int old_first = s->cv.first, f;
    drop_queue(s); /* drawn from a context that is about to change */
    TRY(fit(s, s->tmpl, &s->cv, 1, 1, s->max_new, "the reply in progress", &f, err));
    tv_swap(&s->toks, &s->next);
    s->cv.first = f;
    int before = s->stats.last_call;
    gpt2_status st = sync_cache(s, 1, NULL, NULL, &s->stats.last_reply, err);
    if (st != GPT2_OK) {
        tv_swap(&s->toks, &s->next);
        s->cv.first = old_first;
        settle(s);
        return st;
    }
    post_drop_notice(s, f - old_first, s->stats.last_call - before);
    return GPT2_OK;
}

/* ---- draft mode ---- */

static void add_draft_stats(gpt2_draft_stats *d, const gpt2_speculative_stats *st) {
    d->iterations += st->iterations;
    d->drafted += st->drafted;
    d->accepted += st->accepted;
    d->produced += st->produced;
    d->r = d->iterations ? (double)d->produced / (double)(d->drafted + d->iterations) : 0.0;
    d->tokens_per_pass = d->iterations ? (double)d->produced / (double)d->iterations : 0.0;
}

/* Whether this step's token comes from draft iterations: queued tokens first;
 * a new iteration only while the draft's window has room (it may be smaller
 * than the session's: plain sampling takes over at its end). */
static int drafting(const gpt2_session *s) {
    if (!s->spec || !s->draft_on) return 0;
    return s->q_pos < s->q_len || s->toks.n < gpt2_context_n_ctx(s->dctx);
}

/* One speculative iteration from the sequence as it is: queues its 1..K+1
 * tokens. The decoder draws from the sampler's RNG stream (state copied in,
 * and back on success only: a failure leaves the RNG as it was). */
static gpt2_status draft_iteration(gpt2_session *s, gpt2_error *err) {
    const int n = s->toks.n;
    if (n == 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "nothing to condition on: the template '%s' and the conversation render to no tokens",
                         s->tmpl->name);
    gpt2_speculative_params p = gpt2_speculative_get_params(s->spec);
    p.k = s->draft_k;
    p.sampling = gpt2_sampler_get_params(s->smp);
    TRY(gpt2_speculative_set_params(s->spec, p, err));
    gpt2_speculative_set_rng_state(s->spec, gpt2_sampler_rng_state(s->smp));
    /* start keeps the target's matching prefix and evaluates up to n - 1 */
    int have = cache_lcp(s);
    if (have > n - 1) have = n - 1;
    TRY(gpt2_speculative_start(s->spec, s->toks.v, n, err));
    note_eval(s, n - 1 - have, &s->stats.last_reply);
    int m = 0;
    TRY(gpt2_speculative_step(s->spec, s->q, &m, err));
    gpt2_speculative_stats st = gpt2_speculative_get_stats(s->spec); /* this iteration's: start reset them */
    note_eval(s, (int)st.drafted + 1, &s->stats.last_reply);         /* the verification pass */
    gpt2_sampler_set_rng_state(s->smp, gpt2_speculative_rng_state(s->spec));
    s->q_pos = 0;
    s->q_len = m;
    s->q_drafted = (int)st.drafted;
    s->reply_drafted = 1;
    add_draft_stats(&s->d_reply, &st);
    add_draft_stats(&s->d_total, &st);
    return GPT2_OK;
}

/* The next queued token: its origin, its probability under the target, and
 * the sampler's report of its position (gpt2_sampler_report for the
 * inspector): the sampler run over the target's logits there, the RNG put
 * back, so the report describes the distribution the token came from. */
static int32_t take_queued(gpt2_session *s, gpt2_session_token *out) {
    int i = s->q_pos++;
    const gpt2_spec_token *t = &s->q[i];
    const float *z = gpt2_speculative_target_logits(s->spec, i); /* (n_vocab) */
    if (s->q_drafted == 0) out->origin = GPT2_TOKEN_SAMPLED; /* K' = 0 at the window's end */
    else if (t->kind == GPT2_SPEC_ACCEPTED) out->origin = GPT2_TOKEN_ACCEPTED;
    else if (t->kind == GPT2_SPEC_CORRECTED) {
        out->origin = GPT2_TOKEN_CORRECTED;
        out->n_rejected = s->q_drafted - i; /* the rejected draft and those after it */
    } else out->origin = GPT2_TOKEN_BONUS;
    out->prob = token_prob(z, s->n_vocab, t->id);
    uint64_t r = gpt2_sampler_rng_state(s->smp);
    gpt2_sampler_sample(s->smp, z, s->toks.v, (size_t)s->toks.n);
    gpt2_sampler_set_rng_state(s->smp, r);
    return t->id;
}

/* Before a token: the limits that end the reply, and a drop of old turns
 * when the context is full. *ended: the reply ended (out filled by finish). */
static gpt2_status check_room(gpt2_session *s, gpt2_session_token *out, int *ended, gpt2_error *err) {
    *ended = 1;
    if (s->max_new > 0 && s->n_sampled >= s->max_new) return finish(s, out, GPT2_REPLY_MAX_TOKENS);
    if (s->toks.n >= s->n_ctx) {
        if (!can_drop_mid_reply(s)) return finish(s, out, GPT2_REPLY_CONTEXT_FULL);
        gpt2_status st = drop_mid_reply(s, err);
        if (st == GPT2_ERR_CONTEXT_FULL) { /* the reply alone fills the context */
            gpt2_error_clear(err);
            return finish(s, out, GPT2_REPLY_CONTEXT_FULL);
        }
        if (st != GPT2_OK) return st;
    }
    *ended = 0;
    return GPT2_OK;
}

/* The next token: from the draft queue (an iteration first when it is
 * empty), or sampled from the cache's last logits. */
static gpt2_status next_id(gpt2_session *s, gpt2_session_token *out, int draft, int32_t *id, gpt2_error *err) {
    gpt2_status st;
    if (draft) {
        if (s->q_pos == s->q_len && (st = draft_iteration(s, err)) != GPT2_OK) {
            settle(s);
            return st;
        }
        *id = take_queued(s, out);
        return GPT2_OK;
    }
    if ((st = sync_cache(s, 1, NULL, NULL, &s->stats.last_reply, err)) != GPT2_OK) {
        settle(s);
        return st;
    }
    const float *logits = gpt2_context_logits(s->ctx); /* (n_vocab) */
    *id = gpt2_sampler_sample(s->smp, logits, s->toks.v, (size_t)s->toks.n);
    out->prob = token_prob(logits, s->n_vocab, *id);
    return GPT2_OK;
}

/* Records a kept token (its text already appended to a): the ids, the
 * sequence, its candidates, and the text now safe to hand out. */
static void commit_token(gpt2_session *s, turn *a, gpt2_session_token *out, int32_t id, int draft) {
    gpt2_token_candidates *tc = &a->cands[a->n_ids];
    memset(tc, 0, sizeof *tc);
    if (!draft) { /* the sampler's view of this token (a drafted one's came from the decoder: none) */
        tc->n = (int)gpt2_sampler_report(s->smp, tc->c, GPT2_SESSION_CANDIDATES);
        tc->params = gpt2_session_sampler_params(s);
    }
    a->ids[a->n_ids++] = id;
    s->toks.v[s->toks.n++] = id;
    s->n_sampled++;
    out->kept = 1;
    size_t h = hold_point(s, a, s->held);
    if (h > s->held) emit(s, out, s->held, h);
    s->held = h;
}

gpt2_status gpt2_session_step(gpt2_session *s, gpt2_session_token *out, gpt2_error *err) {
    if (!s || !out) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "step: NULL argument");
    *out = (gpt2_session_token){.id = -1, .text = s->out, .len = 0};
    s->out[0] = '\0';
    s->stats.last_call = 0;
    if (!s->replying)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "step: no reply in progress (send a message or regenerate first)");
    int ended;
    gpt2_status st = check_room(s, out, &ended, err);
    if (st != GPT2_OK || ended) return st;
    int32_t id;
    const int draft = drafting(s);
    if ((st = next_id(s, out, draft, &id, err)) != GPT2_OK) return st;
    out->id = id;
    if (id == s->eot || id == s->turn_end || gpt2_model_is_end(s->model, id)) return finish(s, out, GPT2_REPLY_EOT);
    turn *a = last_turn(s);
    size_t bl = 0;
    const char *b = gpt2_tokenizer_token_bytes(s->tok, id, &bl);
    if (!text_reserve(&a->text, &a->cap, a->len + bl + 1) || !ids_reserve(a, a->n_ids + 1) ||
        !tv_reserve(&s->toks, s->toks.n + 1))
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for the reply");
    size_t old_len = a->len;
    if (bl) memcpy(a->text + a->len, b, bl);
    a->len += bl;
    a->text[a->len] = '\0';
    long m = find_stop(s, a);
    if (m >= 0) return finish_stop(s, out, (size_t)m);
    if (!draft) { /* a queued token needs no eval: the verification pass ran it, or the next one will */
        st = gpt2_context_eval(s->ctx, &id, 1, err);
        if (st != GPT2_OK) {
            a->len = old_len;
            a->text[old_len] = '\0';
            settle(s);
            return st;
        }
        note_eval(s, 1, &s->stats.last_reply);
    }
    commit_token(s, a, out, id, draft);
    if (s->max_new > 0 && s->n_sampled >= s->max_new) return finish(s, out, GPT2_REPLY_MAX_TOKENS);
    if (s->toks.n >= s->n_ctx && !can_drop_mid_reply(s)) return finish(s, out, GPT2_REPLY_CONTEXT_FULL);
    return GPT2_OK;
}

gpt2_status gpt2_session_stop(gpt2_session *s, gpt2_session_token *out, gpt2_error *err) {
    gpt2_session_token tmp;
    if (!out) out = &tmp;
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "stop: no session");
    *out = (gpt2_session_token){.id = -1, .text = s->out, .len = 0};
    s->out[0] = '\0';
    s->stats.last_call = 0;
    return finish(s, out, GPT2_REPLY_STOPPED);
}

int gpt2_session_replying(const gpt2_session *s) { return s ? s->replying : 0; }

const char *gpt2_reply_end_name(gpt2_reply_end end) {
    switch (end) {
    case GPT2_REPLY_NOT_DONE: return "";
    case GPT2_REPLY_STOP_STRING: return "stop string";
    case GPT2_REPLY_EOT: return "end of text";
    case GPT2_REPLY_MAX_TOKENS: return "token limit";
    case GPT2_REPLY_CONTEXT_FULL: return "context full";
    case GPT2_REPLY_STOPPED: return "stopped";
    }
    return "";
}

/* ---- send and editing ---- */

gpt2_status gpt2_session_send(gpt2_session *s, const char *text, size_t len, gpt2_progress_fn progress,
                              void *user_data, gpt2_error *err) {
    if (!s || (!text && len)) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "send: NULL argument");
    s->stats.last_call = 0;
    if (s->replying)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "send: the assistant is still replying; stop the reply (gpt2_session_stop) first");
    int old_n = s->cv.n, old_first = s->cv.first, f = old_first, evaluated = 0;
    gpt2_status st = GPT2_OK;
    if (!cv_push(&s->cv, GPT2_ROLE_USER, text, len) || !cv_push(&s->cv, GPT2_ROLE_ASSISTANT, "", 0)) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a %zu-byte message", len);
        goto fail;
    }
    st = fit(s, s->tmpl, &s->cv, 1, s->policy == GPT2_SESSION_DROP_OLDEST, s->max_new, "this message", &f, err);
    if (st != GPT2_OK) goto fail;
    tv_swap(&s->toks, &s->next);
    s->cv.first = f;
    st = sync_cache(s, 1, progress, user_data, &evaluated, err);
    if (st != GPT2_OK) {
        tv_swap(&s->toks, &s->next);
        s->cv.first = old_first;
        goto fail;
    }
    s->stats.last_prefill = evaluated;
    s->stats.last_reply = 0;
    if (f != old_first) post_drop_notice(s, f - old_first, evaluated);
    start_reply(s);
    return GPT2_OK;
fail:
    while (s->cv.n > old_n) turn_free(&s->cv.t[--s->cv.n]);
    settle(s);
    return st;
}

gpt2_status gpt2_session_regen(gpt2_session *s, gpt2_progress_fn progress, void *user_data, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "regen: no session");
    s->stats.last_call = 0;
    if (s->cv.n - s->cv.first < 2)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "regen: no reply in the context to regenerate");
    turn *a = last_turn(s);
    turn saved = *a, fresh = {.role = GPT2_ROLE_ASSISTANT};
    if (!text_reserve(&fresh.text, &fresh.cap, 64) || !tv_reserve(&s->next, s->toks.n)) {
        free(fresh.text);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory to regenerate");
    }
    fresh.text[0] = '\0';
    memcpy(s->next.v, s->toks.v, (size_t)s->toks.n * sizeof *s->toks.v);
    s->next.n = s->toks.n;
    *a = fresh;
    s->toks.n -= saved.n_ids;
    int evaluated = 0;
    gpt2_status st = sync_cache(s, 1, progress, user_data, &evaluated, err);
    if (st != GPT2_OK) {
        turn_free(a);
        *a = saved;
        tv_swap(&s->toks, &s->next);
        settle(s);
        return st;
    }
    turn_free(&saved);
    s->stats.last_reply = evaluated;
    start_reply(s);
    return GPT2_OK;
}

gpt2_status gpt2_session_undo(gpt2_session *s, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "undo: no session");
    s->stats.last_call = 0;
    if (s->cv.n - s->cv.first < 2)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "undo: no exchange in the context to undo");
    TRY(render(s, s->tmpl, &s->cv, s->cv.first, s->cv.n - 2, &s->next, err));
    tv_swap(&s->toks, &s->next);
    turn_free(&s->cv.t[--s->cv.n]);
    turn_free(&s->cv.t[--s->cv.n]);
    s->replying = 0;
    s->reply_drafted = 0;
    drop_queue(s);
    settle(s);
    return GPT2_OK;
}

gpt2_status gpt2_session_reset(gpt2_session *s, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "reset: no session");
    s->stats.last_call = 0;
    TRY(render(s, s->tmpl, &s->cv, 0, 0, &s->next, err));
    tv_swap(&s->toks, &s->next);
    char *system = s->cv.system; /* a new conversation keeps its instructions */
    s->cv.system = NULL;
    cv_clear(&s->cv);
    branches_clear(s);
    s->cv.system = system;
    s->replying = 0;
    s->reply_drafted = 0;
    drop_queue(s);
    settle(s);
    return GPT2_OK;
}

/* Renders the conversation again as it now stands (s->tmpl, s->cv), dropping
 * the oldest exchanges under the drop-oldest policy, and brings the cache in
 * line; on failure the tokens and cache are as before (the caller restores
 * what it changed). */
static gpt2_status rerender(gpt2_session *s, gpt2_progress_fn progress, void *user_data, gpt2_error *err) {
    int old_first = s->cv.first, f = old_first, evaluated = 0;
    TRY(fit(s, s->tmpl, &s->cv, 0, s->policy == GPT2_SESSION_DROP_OLDEST, s->max_new, "the last exchange", &f, err));
    tv_swap(&s->toks, &s->next);
    s->cv.first = f;
    gpt2_status st = sync_cache(s, 0, progress, user_data, &evaluated, err);
    if (st != GPT2_OK) {
        tv_swap(&s->toks, &s->next);
        s->cv.first = old_first;
        settle(s);
        return st;
    }
    if (f != old_first) post_drop_notice(s, f - old_first, evaluated);
    return GPT2_OK;
}

gpt2_status gpt2_session_set_template(gpt2_session *s, const gpt2_chat_template *t, gpt2_progress_fn progress,
                                      void *user_data, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_template: no session");
    s->stats.last_call = 0;
    if (s->replying)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "set_template: the assistant is still replying; stop the reply first");
    TRY(check_for_model(s, t, err));
    gpt2_chat_template *nt;
    TRY(gpt2_chat_template_copy(t, &nt, err));
    gpt2_chat_template *old = s->tmpl;
    const int32_t old_end = s->turn_end;
    s->tmpl = nt;
    s->turn_end = turn_end_of(s, nt);
    gpt2_status st = rerender(s, progress, user_data, err);
    if (st != GPT2_OK) {
        s->tmpl = old;
        s->turn_end = old_end;
        gpt2_chat_template_free(nt);
        return st;
    }
    gpt2_chat_template_free(old);
    return GPT2_OK;
}

gpt2_status gpt2_session_set_system(gpt2_session *s, const char *text, size_t len, gpt2_progress_fn progress,
                                    void *user_data, gpt2_error *err) {
    if (!s || (!text && len)) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_system: NULL argument");
    s->stats.last_call = 0;
    if (s->replying)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_system: the assistant is still replying; stop the reply first");
    if (len && memchr(text, '\0', len))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_system: the system message holds a NUL byte");
    char *nsys = NULL;
    if (len && !(nsys = malloc(len + 1))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for the system message");
    if (nsys) memcpy(nsys, text, len), nsys[len] = '\0';
    char *old = s->cv.system;
    s->cv.system = nsys;
    gpt2_status st = rerender(s, progress, user_data, err);
    if (st != GPT2_OK) {
        s->cv.system = old;
        free(nsys);
        return st;
    }
    free(old);
    return GPT2_OK;
}

const char *gpt2_session_system(const gpt2_session *s) { return s && s->cv.system ? s->cv.system : ""; }

/* ---- branches ---- */

/* dst = a deep copy of src's first n turns, its system message and first. 0: out of memory. */
static int cv_copy(convo *dst, const convo *src, int n) {
    *dst = (convo){.first = src->first < n ? src->first : n};
    if (src->system && !(dst->system = strdup(src->system))) return 0;
    for (int i = 0; i < n; i++) {
        const turn *u = &src->t[i];
        if (!cv_push(dst, u->role, u->text, u->len)) goto fail;
        turn *d = &dst->t[dst->n - 1];
        if (u->n_ids && !ids_reserve(d, u->n_ids)) goto fail;
        if (u->n_ids) {
            memcpy(d->ids, u->ids, (size_t)u->n_ids * sizeof *u->ids);
            memcpy(d->cands, u->cands, (size_t)u->n_ids * sizeof *u->cands);
        }
        d->n_ids = u->n_ids;
    }
    return 1;
fail:
    cv_clear(dst);
    return 0;
}

/* Where a and b first differ: *turn, and *token within an assistant turn whose
 * reply tokens differ (-1 when the turns differ otherwise); *turn = the
 * shorter's length (*token -1) when one continues the other. */
static void cv_diverge(const convo *a, const convo *b, int *at_turn, int *token) {
    int n = a->n < b->n ? a->n : b->n, i = 0;
    *token = -1;
    for (; i < n; i++) {
        const turn *u = &a->t[i], *v = &b->t[i];
        if (u->role == GPT2_ROLE_ASSISTANT && v->role == GPT2_ROLE_ASSISTANT) {
            int k = 0, m = u->n_ids < v->n_ids ? u->n_ids : v->n_ids;
            while (k < m && u->ids[k] == v->ids[k]) k++;
            if (k < u->n_ids || k < v->n_ids) {
                *token = k;
                break;
            }
        } else if (u->role != v->role || u->len != v->len || memcmp(u->text, v->text, u->len)) {
            break;
        }
    }
    *at_turn = i;
}

/* Makes the reply in progress the last turn, as after a load mid-reply:
 * what was given out is the text up to where a stop string could begin. */
static void resume_reply(gpt2_session *s) {
    start_reply(s);
    turn *a = last_turn(s);
    s->n_sampled = a->n_ids;
    s->held = hold_point(s, a, 0);
    for (size_t i = 0; i < s->held; i += 256) {
        size_t n = s->held - i < 256 ? s->held - i : 256;
        if (out_reserve(s, 3 * (n + 4) + 16)) gpt2_utf8_stream_push(&s->utf8, s->cv.t[s->cv.n - 1].text + i, n, s->out);
    }
    s->out[0] = '\0';
}

gpt2_status gpt2_session_fork(gpt2_session *s, int turn_i, int k, int32_t id, gpt2_progress_fn progress,
                              void *user_data, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: no session");
    s->stats.last_call = 0;
    if (s->replying)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: the assistant is still replying; stop the reply first");
    if (turn_i < 0 || turn_i >= s->cv.n || s->cv.t[turn_i].role != GPT2_ROLE_ASSISTANT)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: turn %d is not a reply", turn_i);
    const turn *a = &s->cv.t[turn_i];
    if (turn_i < s->cv.first)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: turn %d was dropped from the context", turn_i);
    if (k < 0 || k >= a->n_ids)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: the reply has tokens 0..%d, not %d", a->n_ids - 1, k);
    size_t bl;
    if (id < 0 || id >= s->n_vocab || !gpt2_tokenizer_token_bytes(s->tok, id, &bl))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: token id %d is not in the vocabulary (0..%d)", id,
                         s->n_vocab - 1);
    if (id == a->ids[k]) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: token %d is already %d there", k, id);
    if (id == s->eot || id == s->turn_end || gpt2_model_is_end(s->model, id))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fork: token %d ends the reply; /undo or a shorter reply instead",
                         id);
    /* the new branch: the turns up to this reply, its first k tokens, then id */
    convo nc;
    convo *grown = s->n_br ? s->br : NULL;
    if (!cv_copy(&nc, &s->cv, turn_i + 1)) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a branch");
    turn *b = &nc.t[turn_i];
    size_t off = 0, l;
    for (int j = 0; j < k; j++) off += gpt2_tokenizer_token_bytes(s->tok, b->ids[j], &l) ? l : 0;
    const char *bytes = gpt2_tokenizer_token_bytes(s->tok, id, &bl);
    int n_br = s->n_br ? s->n_br + 1 : 2;
    if (!text_reserve(&b->text, &b->cap, off + bl + 1) ||
        !(grown = realloc(grown, (size_t)n_br * sizeof *grown))) {
        cv_clear(&nc);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a branch");
    }
    s->br = grown;
    memcpy(b->text + off, bytes, bl);
    b->len = off + bl;
    b->text[b->len] = '\0';
    b->ids[k] = id; /* its candidates stay: the distribution at k is the same */
    b->n_ids = k + 1;
    int f;
    /* need 0: the new token fits where the old one was; a branch that fills the context ends its reply there */
    gpt2_status st = fit(s, s->tmpl, &nc, 0, s->policy == GPT2_SESSION_DROP_OLDEST, s->max_new, "the branch", &f, err);
    if (st != GPT2_OK) {
        cv_clear(&nc);
        return st;
    }
    /* the old conversation becomes a branch, the new one the active: the cache keeps the prefix */
    const int old_cur = s->cur, was_tree = s->n_br > 0;
    convo old = s->cv;
    tv_swap(&s->toks, &s->next);
    nc.first = f;
    s->cv = nc;
    s->br[was_tree ? old_cur : 0] = old;
    s->br[n_br - 1] = (convo){0};
    s->cur = n_br - 1;
    s->n_br = n_br;
    int evaluated = 0;
    st = sync_cache(s, 1, progress, user_data, &evaluated, err);
    if (st != GPT2_OK) {
        tv_swap(&s->toks, &s->next);
        s->cv = old;
        cv_clear(&nc);
        s->cur = old_cur;
        s->n_br = was_tree ? n_br - 1 : 0;
        if (was_tree) s->br[old_cur] = (convo){0};
        else s->br[0] = (convo){0};
        settle(s);
        return st;
    }
    resume_reply(s);
    return GPT2_OK;
}

int gpt2_session_n_branches(const gpt2_session *s) { return s ? (s->n_br ? s->n_br : 1) : 0; }
int gpt2_session_branch(const gpt2_session *s) { return s ? s->cur : 0; }

int gpt2_session_branch_diverges(const gpt2_session *s, int i, int *at_turn, int *token) {
    if (!s || i < 0 || i >= gpt2_session_n_branches(s) || i == s->cur) return 0;
    cv_diverge(&s->cv, &s->br[i], at_turn, token);
    return 1;
}

gpt2_status gpt2_session_switch_branch(gpt2_session *s, int i, gpt2_progress_fn progress, void *user_data,
                                       gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "branch: no session");
    s->stats.last_call = 0;
    if (s->replying)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "branch: the assistant is still replying; stop the reply first");
    if (i < 0 || i >= gpt2_session_n_branches(s))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "branch: there are branches 0..%d, not %d",
                         gpt2_session_n_branches(s) - 1, i);
    if (i == s->cur) return GPT2_OK;
    convo mine = s->cv;
    const int old = s->cur;
    s->cv = s->br[i];
    s->br[old] = mine, s->br[i] = (convo){0};
    s->cur = i;
    gpt2_status st = rerender(s, progress, user_data, err);
    if (st != GPT2_OK) {
        s->br[i] = s->cv, s->cv = mine, s->br[old] = (convo){0};
        s->cur = old;
    }
    return st;
}

/* ---- interventions ---- */

gpt2_status gpt2_session_set_ablation(gpt2_session *s, const unsigned char *heads, gpt2_progress_fn progress,
                                      void *user_data, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_ablation: no session");
    s->stats.last_call = 0;
    const gpt2_config *c = gpt2_model_config(s->model);
    const int n = c->n_layer * c->n_head;
    unsigned char *old = malloc((size_t)n);
    if (!old) return gpt2_fail(err, GPT2_ERR_NOMEM, "set_ablation: out of memory");
    int changed = 0;
    for (int i = 0; i < n; i++) {
        old[i] = (unsigned char)gpt2_context_ablated(s->ctx, i / c->n_head, i % c->n_head);
        changed |= old[i] != (heads && heads[i] ? 1 : 0);
    }
    gpt2_status st = GPT2_OK;
    if (changed) {
        drop_queue(s); /* drafted and checked without this set */
        st = gpt2_context_set_ablation(s->ctx, heads, err);
        int evaluated = 0;
        if (st == GPT2_OK) st = sync_cache(s, s->toks.n > 0, progress, user_data, &evaluated, err);
        if (st != GPT2_OK) { /* as before: the old set, the cache caught up by the next call */
            gpt2_context_set_ablation(s->ctx, old, NULL);
            settle(s);
        }
    }
    free(old);
    return st;
}

gpt2_status gpt2_session_unembed(gpt2_session *s, const float *x, float *logits, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "unembed: no session");
    return gpt2_context_unembed(s->ctx, x, logits, err);
}

int gpt2_session_ablated(const gpt2_session *s, int layer, int head) {
    return s ? gpt2_context_ablated(s->ctx, layer, head) : 0;
}

/* ---- accessors ---- */

const gpt2_chat_template *gpt2_session_template(const gpt2_session *s) { return s ? s->tmpl : NULL; }

static int same_params(const gpt2_sampler_params *a, const gpt2_sampler_params *b) {
    return a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p &&
           a->min_p == b->min_p && a->repeat_penalty == b->repeat_penalty &&
           a->repeat_last_n == b->repeat_last_n && a->seed == b->seed;
}

void gpt2_session_set_sampler_params(gpt2_session *s, gpt2_sampler_params p) {
    if (!s) return;
    gpt2_sampler_params before = gpt2_sampler_get_params(s->smp);
    gpt2_sampler_set_params(s->smp, p);
    gpt2_sampler_params after = gpt2_sampler_get_params(s->smp);
    /* queued tokens were drawn with the old knobs: the new ones apply at the very next token */
    if (!same_params(&before, &after)) drop_queue(s);
}

/* ---- draft mode: setup ---- */

static gpt2_status check_draft_k(int k, gpt2_error *err) {
    if (k >= 1 && k <= GPT2_SPEC_MAX_K) return GPT2_OK;
    return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "draft: K = %d draft tokens per iteration is outside [1, %d]", k,
                     GPT2_SPEC_MAX_K);
}

/* Replaces the draft model, its context and decoder (all NULL: none). */
static void swap_draft(gpt2_session *s, const gpt2_model *draft, gpt2_context *dctx, gpt2_speculative *spec) {
    gpt2_speculative_free(s->spec);
    gpt2_context_free(s->dctx);
    s->draft = draft;
    s->dctx = dctx;
    s->spec = spec;
    s->draft_on = draft != NULL;
    drop_queue(s);
}

gpt2_status gpt2_session_set_draft(gpt2_session *s, const gpt2_model *draft, int k, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_draft: no session");
    if (!draft) {
        swap_draft(s, NULL, NULL, NULL);
        return GPT2_OK;
    }
    TRY(check_draft_k(k, err));
    gpt2_context_params cp = s->cparams;
    int dpos = gpt2_model_config(draft)->n_ctx;
    cp.n_ctx = s->n_ctx < dpos ? s->n_ctx : dpos;
    /* One thread: a small draft gains little from more, and a second pool's
     * spinning workers would take the cores from the target's pool. */
    cp.n_threads = 1;
    gpt2_context *dctx;
    TRY(gpt2_context_new(draft, cp, &dctx, err));
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    sp.k = k;
    sp.sampling = gpt2_sampler_get_params(s->smp);
    gpt2_speculative *spec;
    gpt2_status st = gpt2_speculative_new(s->ctx, dctx, sp, &spec, err);
    if (st != GPT2_OK) { /* a tokenizer mismatch: the decoder's message as it is */
        gpt2_context_free(dctx);
        return st;
    }
    swap_draft(s, draft, dctx, spec);
    s->draft_k = k;
    memset(&s->d_total, 0, sizeof s->d_total);
    return GPT2_OK;
}

gpt2_status gpt2_session_set_draft_enabled(gpt2_session *s, int on, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "draft: no session");
    if (on && !s->spec)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "draft: no draft model is set (load one first)");
    if (!!on != s->draft_on) drop_queue(s);
    s->draft_on = !!on;
    return GPT2_OK;
}

int gpt2_session_draft_enabled(const gpt2_session *s) { return s && s->spec && s->draft_on; }

gpt2_status gpt2_session_set_draft_k(gpt2_session *s, int k, gpt2_error *err) {
    if (!s) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "draft: no session");
    TRY(check_draft_k(k, err));
    s->draft_k = k;
    return GPT2_OK;
}

int gpt2_session_draft_k(const gpt2_session *s) { return s ? s->draft_k : 0; }

const gpt2_model *gpt2_session_draft_model(const gpt2_session *s) { return s ? s->draft : NULL; }

void gpt2_session_draft_stats(const gpt2_session *s, gpt2_draft_stats *reply, gpt2_draft_stats *total) {
    gpt2_draft_stats z = {0};
    if (reply) *reply = s ? s->d_reply : z;
    if (total) *total = s ? s->d_total : z;
}

gpt2_sampler_params gpt2_session_sampler_params(const gpt2_session *s) { return gpt2_sampler_get_params(s->smp); }

void gpt2_session_set_max_new_tokens(gpt2_session *s, int n) {
    if (s) s->max_new = n < 0 ? 0 : n;
}

int gpt2_session_max_new_tokens(const gpt2_session *s) { return s ? s->max_new : 0; }

void gpt2_session_set_context_policy(gpt2_session *s, gpt2_session_policy policy) {
    if (s && (policy == GPT2_SESSION_DROP_OLDEST || policy == GPT2_SESSION_REFUSE)) s->policy = policy;
}

gpt2_session_policy gpt2_session_context_policy(const gpt2_session *s) {
    return s ? s->policy : GPT2_SESSION_DROP_OLDEST;
}

const gpt2_sampler *gpt2_session_sampler(const gpt2_session *s) { return s ? s->smp : NULL; }

uint64_t gpt2_session_rng_state(const gpt2_session *s) { return s ? gpt2_sampler_rng_state(s->smp) : 0; }

void gpt2_session_set_rng_state(gpt2_session *s, uint64_t state) {
    if (s) gpt2_sampler_set_rng_state(s->smp, state);
}

int gpt2_session_n_turns(const gpt2_session *s) { return s ? s->cv.n : 0; }

/* Where turn i's reply tokens are in the cache's sequence, or -1: checked
 * against the tokens themselves, so a rendering that has moved on since
 * (a reply growing is fine: its start stays) never gives a wrong place. */
static int reply_pos(const gpt2_session *s, int i) {
    const turn *u = &s->cv.t[i];
    if (u->role != GPT2_ROLE_ASSISTANT || i < s->cv.first || i >= s->toks.n_pos) return -1;
    int p = s->toks.pos[i];
    if (p < 0 || p + u->n_ids > s->toks.n) return -1;
    if (u->n_ids && memcmp(s->toks.v + p, u->ids, (size_t)u->n_ids * sizeof *u->ids)) return -1;
    return p;
}

int gpt2_session_turn(const gpt2_session *s, int i, gpt2_turn *out) {
    if (!s || !out || i < 0 || i >= s->cv.n) return 0;
    const turn *u = &s->cv.t[i];
    int live = s->replying && i == s->cv.n - 1;
    *out = (gpt2_turn){.role = u->role,
                       .text = u->text,
                       .len = u->len,
                       .shown = live ? s->held : u->len,
                       .start = reply_lead(s->tok, u),
                       .in_context = i >= s->cv.first,
                       .replying = live,
                       .ids = u->role == GPT2_ROLE_ASSISTANT ? u->ids : NULL,
                       .n_ids = u->role == GPT2_ROLE_ASSISTANT ? u->n_ids : 0,
                       .pos = reply_pos(s, i)};
    return 1;
}

gpt2_status gpt2_session_candidates(const gpt2_session *s, int turn_i, int k, gpt2_token_candidates *out) {
    if (!s || !out || turn_i < 0 || turn_i >= s->cv.n || s->cv.t[turn_i].role != GPT2_ROLE_ASSISTANT ||
        k < 0 || k >= s->cv.t[turn_i].n_ids)
        return GPT2_ERR_INVALID_ARG;
    *out = s->cv.t[turn_i].cands[k];
    return GPT2_OK;
}

const int32_t *gpt2_session_tokens(const gpt2_session *s, int *n) {
    if (n) *n = s ? s->toks.n : 0;
    return s ? s->toks.v : NULL;
}

int gpt2_session_n_ctx(const gpt2_session *s) { return s ? s->n_ctx : 0; }
const gpt2_context *gpt2_session_context(const gpt2_session *s) { return s ? s->ctx : NULL; }
const gpt2_model *gpt2_session_model(const gpt2_session *s) { return s ? s->model : NULL; }

gpt2_session_stats gpt2_session_get_stats(const gpt2_session *s) {
    gpt2_session_stats z = {0};
    return s ? s->stats : z;
}

const char *gpt2_session_notice(const gpt2_session *s) { return s ? s->notice : ""; }

/* ---- save ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *base64_encode(const unsigned char *p, size_t n) {
    char *o = malloc((n + 2) / 3 * 4 + 1), *w = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *w++ = b64[v >> 18 & 63];
        *w++ = b64[v >> 12 & 63];
        *w++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *w++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *w = '\0';
    return o;
}

/* Decodes strict base64 (padding required); -1 on a bad string. */
static long base64_decode(const char *s, unsigned char **out) {
    size_t n = strlen(s);
    *out = NULL;
    if (n % 4) return -1;
    unsigned char *o = malloc(n / 4 * 3 + 1);
    if (!o) return -1;
    size_t w = 0;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            const char *q = c ? strchr(b64, c) : NULL;
            if (c == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                pad++;
                v <<= 6;
            } else if (q && !pad) {
                v = v << 6 | (unsigned)(q - b64);
            } else {
                free(o);
                return -1;
            }
        }
        o[w++] = (unsigned char)(v >> 16);
        if (pad < 2) o[w++] = (unsigned char)(v >> 8);
        if (pad < 1) o[w++] = (unsigned char)v;
    }
    *out = o;
    return (long)w;
}

/* The text as valid UTF-8 without NUL (bad bytes and NUL as U+FFFD), malloc'd;
 * *exact says whether that equals the input. */
static char *display_text(const char *t, size_t n, int *exact) {
    char *o = malloc(3 * (n + 4) + 16);
    if (!o) return NULL;
    gpt2_utf8_stream u = {0};
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && t[j]) j++;
        w += gpt2_utf8_stream_push(&u, t + i, j - i, o + w);
        if (j < n) { /* NUL: ends any held sequence, shows as U+FFFD */
            w += gpt2_utf8_stream_flush(&u, o + w);
            memcpy(o + w, "\xEF\xBF\xBD", 3);
            w += 3;
            j++;
        }
        i = j;
    }
    w += gpt2_utf8_stream_flush(&u, o + w);
    o[w] = '\0';
    *exact = w == n && memcmp(o, t, n) == 0;
    return o;
}


static int add_u64(cJSON *obj, const char *key, uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return cJSON_AddStringToObject(obj, key, buf) != NULL;
}

/* ---- candidates in session files ----
 * An assistant turn's "candidates": one entry per reply token, null when
 * nothing was recorded, else [[temperature, top_k, top_p, min_p,
 * repeat_penalty, repeat_last_n], [[id, prob, prob_temp, prob_final, stage],
 * ...]]; probabilities to 6 significant digits (the panel shows 3). */

static double digits6(double v) {
    char b[32];
    snprintf(b, sizeof b, "%.6g", v);
    return strtod(b, NULL);
}

static cJSON *num_array(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *x = cJSON_CreateNumber(v[i]);
        if (!x) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, x);
    }
    return a;
}

static cJSON *candidates_json(const gpt2_token_candidates *tc) {
    if (tc->n == 0) return cJSON_CreateNull();
    const gpt2_sampler_params *p = &tc->params;
    const double pv[6] = {digits6(p->temperature), p->top_k, digits6(p->top_p), digits6(p->min_p),
                          digits6(p->repeat_penalty), p->repeat_last_n};
    cJSON *e = cJSON_CreateArray(), *pa = num_array(pv, 6), *ca = cJSON_CreateArray();
    int ok = e && pa && ca;
    for (int i = 0; ok && i < tc->n; i++) {
        const gpt2_candidate *c = &tc->c[i];
        const double cv[5] = {c->id, digits6(c->prob), digits6(c->prob_temp), digits6(c->prob_final), c->removed_by};
        cJSON *x = num_array(cv, 5);
        if (!x) ok = 0;
        else cJSON_AddItemToArray(ca, x);
    }
    if (!ok) {
        cJSON_Delete(e), cJSON_Delete(pa), cJSON_Delete(ca);
        return NULL;
    }
    cJSON_AddItemToArray(e, pa);
    cJSON_AddItemToArray(e, ca);
    return e;
}

/* Adds u's "candidates" to o, when any token has some. 1 on success. */
static int add_candidates(cJSON *o, const turn *u) {
    int any = 0;
    for (int k = 0; k < u->n_ids; k++) any |= u->cands[k].n > 0;
    if (!any) return 1;
    cJSON *arr = cJSON_AddArrayToObject(o, "candidates");
    for (int k = 0; arr && k < u->n_ids; k++) {
        cJSON *e = candidates_json(&u->cands[k]);
        if (!e) return 0;
        cJSON_AddItemToArray(arr, e);
    }
    return arr != NULL;
}

/* The "sampler" object: the knobs, floats to their shortest exact form. */
static int add_sampler(cJSON *root, gpt2_sampler_params p) {
    cJSON *sp = cJSON_AddObjectToObject(root, "sampler");
    return sp && cJSON_AddNumberToObject(sp, "temperature", json_short_float(p.temperature)) &&
           cJSON_AddNumberToObject(sp, "top_k", p.top_k) && cJSON_AddNumberToObject(sp, "top_p", json_short_float(p.top_p)) &&
           cJSON_AddNumberToObject(sp, "min_p", json_short_float(p.min_p)) &&
           cJSON_AddNumberToObject(sp, "repeat_penalty", json_short_float(p.repeat_penalty)) &&
           cJSON_AddNumberToObject(sp, "repeat_last_n", p.repeat_last_n) && add_u64(sp, "seed", p.seed);
}

/* One turn: role, text (and its exact bytes when the text is not valid
 * UTF-8), and for a reply its ids and their candidates. */
static int add_turn(cJSON *turns, const turn *u) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return 0;
    cJSON_AddItemToArray(turns, o);
    int exact;
    char *shown = display_text(u->text, u->len, &exact);
    int ok = shown && cJSON_AddStringToObject(o, "role", u->role == GPT2_ROLE_USER ? "user" : "assistant") &&
             cJSON_AddStringToObject(o, "text", shown);
    free(shown);
    if (ok && !exact) {
        char *enc = base64_encode((const unsigned char *)u->text, u->len);
        ok = enc && cJSON_AddStringToObject(o, "text_base64", enc);
        free(enc);
    }
    if (!ok || u->role != GPT2_ROLE_ASSISTANT) return ok;
    cJSON *ids = cJSON_AddArrayToObject(o, "ids");
    for (int k = 0; ids && k < u->n_ids; k++) {
        cJSON *v = cJSON_CreateNumber(u->ids[k]);
        if (!v) return 0;
        cJSON_AddItemToArray(ids, v);
    }
    return ids && add_candidates(o, u);
}

/* "branch" and "branches": each branch's conversation but the active one's (null there). 0: out of memory. */
static int add_branches(cJSON *root, const gpt2_session *s) {
    cJSON *arr = cJSON_AddArrayToObject(root, "branches");
    if (!arr || !cJSON_AddNumberToObject(root, "branch", s->cur)) return 0;
    for (int b = 0; b < s->n_br; b++) {
        const convo *c = &s->br[b];
        cJSON *o = b == s->cur ? cJSON_CreateNull() : cJSON_CreateObject(), *turns;
        if (!o) return 0;
        cJSON_AddItemToArray(arr, o);
        if (b == s->cur) continue;
        if (!cJSON_AddNumberToObject(o, "first_in_context", c->first) ||
            (c->system && !cJSON_AddStringToObject(o, "system", c->system)) || !(turns = cJSON_AddArrayToObject(o, "turns")))
            return 0;
        for (int i = 0; i < c->n; i++)
            if (!add_turn(turns, &c->t[i])) return 0;
    }
    return 1;
}

/* The session file's JSON (docs/session-format.md); NULL when out of memory. */
static cJSON *session_json(const gpt2_session *s) {
    cJSON *root = cJSON_CreateObject(), *tm, *turns;
    if (!root) return NULL;
    int ok = cJSON_AddStringToObject(root, "format", "gptscope-session") &&
             cJSON_AddNumberToObject(root, "version", s->n_br ? 4 : s->cv.system ? 3 : 2) &&
             cJSON_AddStringToObject(root, "model", gpt2_model_name(s->model)) &&
             cJSON_AddNumberToObject(root, "n_vocab", s->n_vocab) && (tm = cJSON_AddObjectToObject(root, "template")) &&
             chat_template_to_json(s->tmpl, tm) && add_sampler(root, gpt2_sampler_get_params(s->smp)) &&
             add_u64(root, "rng_state", gpt2_sampler_rng_state(s->smp)) &&
             cJSON_AddNumberToObject(root, "max_new_tokens", s->max_new) &&
             cJSON_AddStringToObject(root, "context_policy",
                                     s->policy == GPT2_SESSION_REFUSE ? "refuse" : "drop-oldest") &&
             cJSON_AddNumberToObject(root, "first_in_context", s->cv.first) &&
             cJSON_AddBoolToObject(root, "replying", s->replying) &&
             (!s->cv.system || cJSON_AddStringToObject(root, "system", s->cv.system)) &&
             (turns = cJSON_AddArrayToObject(root, "turns"));
    for (int i = 0; ok && i < s->cv.n; i++) ok = add_turn(turns, &s->cv.t[i]);
    if (ok && s->n_br) ok = add_branches(root, s);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

gpt2_status gpt2_session_save(const gpt2_session *s, const char *path, gpt2_error *err) {
    if (!s || !path) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: NULL argument");
    cJSON *root = session_json(s);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory building the session file", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON_Print's buffer ends with a NUL we may overwrite */
    gpt2_status st = gpt2_fileio_write_bytes(path, text, n + 1, err);
    free(text);
    return st;
}

/* ---- load ---- */

/* Everything a session file sets, checked, before it replaces anything. */
typedef struct {
    gpt2_chat_template *tmpl;
    convo cv;
    gpt2_sampler_params sp;
    uint64_t rng;
    int max_new;
    gpt2_session_policy policy;
    int replying;
    convo *br; /* the other branches (br[cur] empty: cv), n_br of them; none before version 4 */
    int n_br, cur;
} staged;

static void staged_clear(staged *g) {
    gpt2_chat_template_free(g->tmpl);
    cv_clear(&g->cv);
    for (int i = 0; i < g->n_br; i++) cv_clear(&g->br[i]);
    free(g->br);
    memset(g, 0, sizeof *g);
}

/* Does ids decode to exactly text? */
static int ids_match(const gpt2_session *s, const turn *u) {
    size_t off = 0, l;
    for (int k = 0; k < u->n_ids; k++) {
        const char *b = gpt2_tokenizer_token_bytes(s->tok, u->ids[k], &l);
        if (!b) l = 0;
        if (l > u->len - off || (l && memcmp(u->text + off, b, l) != 0)) return 0;
        off += l;
    }
    return off == u->len;
}

/* A number in [lo, hi] (an integer when integral), else a message naming field. */
static gpt2_status cand_num(const json_src *L, const cJSON *v, const char *field, double lo, double hi, int integral,
                            double *out) {
    char want[96];
    snprintf(want, sizeof want, "%s in [%g, %g]", integral ? "an integer" : "a number", lo, hi);
    if (!cJSON_IsNumber(v)) return json_bad(L, field, want, json_type_name(v));
    double x = v->valuedouble;
    if (!(x >= lo && x <= hi) || (integral && x != floor(x))) return json_bad(L, field, want, "another number");
    *out = x;
    return GPT2_OK;
}

/* turns[i].candidates (see add_candidates): n_ids entries, checked whole;
 * kept in u only when n_vocab > 0 (the file's model is the session's: the
 * ids mean the same tokens), else left unrecorded. */
static gpt2_status parse_candidates(const json_src *L, const cJSON *jc, int i, turn *u, int n_vocab, int n_ids) {
    char field[96];
    snprintf(field, sizeof field, "turns[%d].candidates", i);
    if (!cJSON_IsArray(jc) || cJSON_GetArraySize(jc) != n_ids) {
        char want[64];
        snprintf(want, sizeof want, "an array of %d entries, one per id", n_ids);
        return json_bad(L, field, want, cJSON_IsArray(jc) ? "another length" : json_type_name(jc));
    }
    static const double plo[6] = {0, 0, 1e-9, 0, 1e-9, 0}, phi[6] = {1e6, INT_MAX, 1, 1, 1e6, INT_MAX};
    static const double clo[5] = {0, 0, 0, 0, 0}, chi[5] = {INT32_MAX, 1, 1, 1, GPT2_STAGE_MIN_P};
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, jc) {
        gpt2_token_candidates tc = {0};
        snprintf(field, sizeof field, "turns[%d].candidates[%d]", i, k);
        if (!cJSON_IsNull(e)) {
            const cJSON *pa = cJSON_GetArrayItem(e, 0), *ca = cJSON_GetArrayItem(e, 1);
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsArray(pa) || cJSON_GetArraySize(pa) != 6 ||
                !cJSON_IsArray(ca) || cJSON_GetArraySize(ca) > GPT2_SESSION_CANDIDATES)
                return json_bad(L, field, "null or [[6 sampler settings], [up to 10 candidates]]", json_type_name(e));
            double pv[6], cv[5];
            for (int j = 0; j < 6; j++) TRY(cand_num(L, cJSON_GetArrayItem(pa, j), field, plo[j], phi[j], j == 1 || j == 5, &pv[j]));
            tc.params = gpt2_sampler_default_params();
            tc.params.temperature = (float)pv[0], tc.params.top_k = (int)pv[1], tc.params.top_p = (float)pv[2];
            tc.params.min_p = (float)pv[3], tc.params.repeat_penalty = (float)pv[4], tc.params.repeat_last_n = (int)pv[5];
            const cJSON *c;
            cJSON_ArrayForEach(c, ca) {
                if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) != 5)
                    return json_bad(L, field, "candidates as [id, prob, prob_temp, prob_final, stage]", json_type_name(c));
                for (int j = 0; j < 5; j++)
                    TRY(cand_num(L, cJSON_GetArrayItem(c, j), field, clo[j], chi[j], j == 0 || j == 4, &cv[j]));
                if (n_vocab && cv[0] >= n_vocab) return json_bad(L, field, "token ids of this model's vocabulary", "another id");
                tc.c[tc.n++] = (gpt2_candidate){.id = (int32_t)cv[0], .logit = NAN, .prob = (float)cv[1],
                                                .prob_temp = (float)cv[2], .prob_final = (float)cv[3],
                                                .removed_by = (gpt2_sampler_stage)cv[4]};
            }
        }
        if (n_vocab && k < u->n_ids) u->cands[k] = tc;
        k++;
    }
    return GPT2_OK;
}

/* A turn's text: "text", or the exact bytes of "text_base64" when present;
 * appended to the staged conversation as role `want`. */
static gpt2_status parse_turn_text(const json_src *T, const cJSON *o, gpt2_role want, staged *g) {
    const char *text;
    gpt2_status st = json_get_str(T, o, "text", &text);
    if (st != GPT2_OK) return st;
    size_t len = strlen(text);
    unsigned char *raw = NULL;
    const cJSON *jb = cJSON_GetObjectItemCaseSensitive(o, "text_base64");
    if (jb) {
        if (!cJSON_IsString(jb)) return json_bad(T, "text_base64", "a base64 string", json_type_name(jb));
        long n = base64_decode(jb->valuestring, &raw);
        if (n < 0) return json_bad(T, "text_base64", "a base64 string", "other text");
        text = (const char *)raw;
        len = (size_t)n;
    }
    int pushed = cv_push(&g->cv, want, text, len);
    free(raw);
    return pushed ? GPT2_OK : gpt2_fail(T->err, GPT2_ERR_NOMEM, "%s: out of memory", T->path);
}

/* turns[i].ids into u: integers, and when the file's model is the
 * session's, ids of its vocabulary that decode to the turn's text;
 * otherwise dropped (the text is encoded instead). */
static gpt2_status parse_turn_ids(gpt2_session *s, const json_src *L, const cJSON *ji, int i, int same_model,
                                  turn *u) {
    char field[64], found[32], want_ids[96];
    snprintf(field, sizeof field, "turns[%d].ids", i);
    snprintf(want_ids, sizeof want_ids, "an array of token ids in [0, %d)", s->n_vocab);
    if (!cJSON_IsArray(ji)) return json_bad(L, field, want_ids, json_type_name(ji));
    int n = cJSON_GetArraySize(ji);
    if (!ids_reserve(u, n)) return gpt2_fail(L->err, GPT2_ERR_NOMEM, "%s: out of memory", L->path);
    const cJSON *v;
    cJSON_ArrayForEach(v, ji) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble > INT32_MAX) {
            snprintf(field, sizeof field, "turns[%d].ids[%d]", i, u->n_ids);
            return json_bad(L, field, "a non-negative integer", cJSON_IsNumber(v) ? "another number" : json_type_name(v));
        }
        u->ids[u->n_ids++] = (int32_t)v->valuedouble;
    }
    if (!same_model) {
        u->n_ids = 0; /* another model's tokens: encode the text instead */
        return GPT2_OK;
    }
    for (int k = 0; k < u->n_ids; k++)
        if (u->ids[k] >= s->n_vocab) {
            snprintf(field, sizeof field, "turns[%d].ids[%d]", i, k);
            snprintf(found, sizeof found, "%d", u->ids[k]);
            return json_bad(L, field, want_ids, found);
        }
    if (!ids_match(s, u))
        return gpt2_fail(L->err, GPT2_ERR_FORMAT, "%s: turns[%d].ids: do not decode to turns[%d].text", L->path, i, i);
    return GPT2_OK;
}

/* A reply's ids when the file gave none usable: the text, encoded. */
static gpt2_status encode_reply(gpt2_session *s, const json_src *L, turn *u) {
    int32_t *ids = NULL;
    size_t n = 0;
    gpt2_status st = gpt2_tokenizer_encode(s->tok, u->text, u->len, 0, &ids, &n, L->err);
    if (st != GPT2_OK) return st;
    if (n > (size_t)INT_MAX / 4 || !ids_reserve(u, (int)n)) {
        free(ids);
        return gpt2_fail(L->err, GPT2_ERR_NOMEM, "%s: out of memory", L->path);
    }
    if (n) memcpy(u->ids, ids, n * sizeof *ids);
    u->n_ids = (int)n;
    free(ids);
    return GPT2_OK;
}

/* The turns in arr into g->cv; where: "" or the branch they belong to ("branches[2].") */
static gpt2_status parse_turns(gpt2_session *s, const json_src *L, const cJSON *arr, int same_model, staged *g,
                               const char *where) {
    static const char *const keys[] = {"role", "text", "text_base64", "ids", "candidates"};
    char prefix[80], field[80], shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 2];
    int i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        snprintf(prefix, sizeof prefix, "%sturns[%d].", where, i);
        snprintf(field, sizeof field, "%sturns[%d]", where, i);
        if (!cJSON_IsObject(o)) return json_bad(L, field, "an object", json_type_name(o));
        json_src T = *L;
        T.prefix = prefix;
        TRY(json_only_keys(&T, o, keys, 5));
        const char *role;
        TRY(json_get_str(&T, o, "role", &role));
        gpt2_role want = i % 2 ? GPT2_ROLE_ASSISTANT : GPT2_ROLE_USER;
        if (strcmp(role, want == GPT2_ROLE_USER ? "user" : "assistant") != 0) {
            snprintf(found, sizeof found, "\"%s\"", text_show(role, strlen(role), shown));
            return json_bad(&T, "role",
                            want == GPT2_ROLE_USER ? "\"user\" (turns alternate, a user turn first)"
                                                   : "\"assistant\" (turns alternate, a user turn first)",
                            found);
        }
        TRY(parse_turn_text(&T, o, want, g));
        turn *u = &g->cv.t[g->cv.n - 1];
        const cJSON *ji = cJSON_GetObjectItemCaseSensitive(o, "ids");
        if (ji && want == GPT2_ROLE_USER) return json_bad(&T, "ids", "no ids on a user turn", "an ids field");
        if (ji) TRY(parse_turn_ids(s, L, ji, i, same_model, u));
        const cJSON *jc = cJSON_GetObjectItemCaseSensitive(o, "candidates");
        if (jc && (!ji || want == GPT2_ROLE_USER))
            return json_bad(&T, "candidates", "candidates only beside a reply's ids", "candidates without ids");
        if (jc) TRY(parse_candidates(L, jc, i, u, same_model ? s->n_vocab : 0, cJSON_GetArraySize(ji)));
        if (want == GPT2_ROLE_ASSISTANT && (!ji || !same_model)) TRY(encode_reply(s, L, u));
        i++;
    }
    return GPT2_OK;
}

/* A reply in progress never holds a whole stop string: it would have ended
 * there, and loaded so, it could never end at it. */
static gpt2_status check_reply_in_progress(const json_src *L, const staged *g) {
    const turn *a = &g->cv.t[g->cv.n - 1];
    char shown[TEXT_SHOW_BUF];
    for (int k = 0; k < g->tmpl->n_stop; k++) {
        const char *stop = g->tmpl->stop[k];
        size_t n = strlen(stop);
        for (size_t j = 0; j + n <= a->len; j++)
            if (memcmp(a->text + j, stop, n) == 0)
                return gpt2_fail(L->err, GPT2_ERR_FORMAT,
                                 "%s: turns[%d].text: holds the stop string \"%s\" at byte %zu, but \"replying\" is "
                                 "true (the reply would have ended there)",
                                 L->path, g->cv.n - 1, text_show(stop, n, shown), j);
    }
    return GPT2_OK;
}

/* "branches" (a list of 2 or more, null at "branch", the active one, which is the
 * file's "turns") into g->br. */
static gpt2_status parse_branches(gpt2_session *s, const json_src *L, const cJSON *root, int same_model, staged *g) {
    static const char *const keys[] = {"first_in_context", "system", "turns"};
    char found[64], where[48];
    const cJSON *jb, *o;
    TRY(json_get_array(L, root, "branches", NULL, &jb));
    int n = cJSON_GetArraySize(jb), cur, i = 0;
    if (n < 2 || n > 100000) {
        snprintf(found, sizeof found, "%d", n);
        return json_bad(L, "branches", "a list of 2 to 100000 branches", found);
    }
    TRY(json_get_int(L, root, "branch", 0, n - 1, &cur));
    if (!(g->br = calloc((size_t)n, sizeof *g->br))) return gpt2_fail(L->err, GPT2_ERR_NOMEM, "out of memory");
    g->n_br = n, g->cur = cur;
    cJSON_ArrayForEach(o, jb) {
        snprintf(where, sizeof where, "branches[%d]", i);
        if (i == cur) {
            if (!cJSON_IsNull(o)) return json_bad(L, where, "null (the active branch is the file's turns)", json_type_name(o));
            i++;
            continue;
        }
        if (!cJSON_IsObject(o)) return json_bad(L, where, "an object", json_type_name(o));
        snprintf(where, sizeof where, "branches[%d].", i);
        json_src B = *L;
        B.prefix = where;
        const cJSON *jt;
        int first;
        TRY(json_only_keys(&B, o, keys, 3));
        TRY(json_get_array(&B, o, "turns", NULL, &jt));
        const int nt = cJSON_GetArraySize(jt);
        if (nt % 2) {
            snprintf(found, sizeof found, "%d turns", nt);
            return json_bad(&B, "turns", "an even number of turns (each user turn followed by its reply)", found);
        }
        TRY(json_get_int(&B, o, "first_in_context", 0, nt, &first));
        if (first % 2) {
            snprintf(found, sizeof found, "%d", first);
            return json_bad(&B, "first_in_context", "an even turn index (a user turn)", found);
        }
        staged one = {0};
        gpt2_status st = parse_turns(s, L, jt, same_model, &one, where);
        const char *sys = NULL;
        if (!st && json_has(o, "system") && !(st = json_get_str(&B, o, "system", &sys)) && *sys &&
            !(one.cv.system = strdup(sys)))
            st = gpt2_fail(L->err, GPT2_ERR_NOMEM, "out of memory");
        one.cv.first = first;
        g->br[i++] = one.cv;
        if (st) return st;
    }
    return GPT2_OK;
}

static gpt2_status parse_session(gpt2_session *s, const json_src *L, const cJSON *root, staged *g) {
    static const char *const top[] = {"format",        "version",        "model",          "n_vocab",
                                      "template",      "sampler",        "rng_state",      "max_new_tokens",
                                      "context_policy", "first_in_context", "replying",     "turns",
                                      "system",         "branch",         "branches"};
    static const char *const skeys[] = {"temperature",    "top_k",         "top_p", "min_p",
                                        "repeat_penalty", "repeat_last_n", "seed"};
    char shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 32];
    const char *fmt, *model, *pol;
    TRY(json_get_str(L, root, "format", &fmt));
    if (strcmp(fmt, "gptscope-session") != 0) {
        snprintf(found, sizeof found, "\"%s\"", text_show(fmt, strlen(fmt), shown));
        return json_bad(L, "format", "\"gptscope-session\"", found);
    }
    int version, n_vocab;
    TRY(json_get_int(L, root, "version", 0, INT_MAX, &version));
    if (version < 1 || version > 4) { /* 2 added the turns' candidates, 3 the system message, 4 branches */
        snprintf(found, sizeof found, "%d (written by a newer gptscope?)", version);
        return json_bad(L, "version", "1, 2, 3 or 4", found);
    }
    TRY(json_get_str(L, root, "model", &model));
    TRY(json_get_int(L, root, "n_vocab", 1, INT_MAX, &n_vocab));
    const cJSON *jt, *js, *jturns;
    TRY(json_get_object(L, root, "template", &jt));
    json_src T = *L;
    T.prefix = "template.";
    TRY(chat_template_from_json(jt, &T, &g->tmpl));
    if (g->tmpl->eot_after_turn && s->eot < 0)
        return gpt2_fail(L->err, GPT2_ERR_FORMAT,
                         "%s: template.eot_after_turn: true, but model '%s' has no <|endoftext|> token", L->path,
                         gpt2_model_name(s->model));
    TRY(json_get_object(L, root, "sampler", &js));
    json_src S = *L;
    S.prefix = "sampler.";
    g->sp = gpt2_sampler_default_params();
    TRY(json_get_float(&S, js, "temperature", 0, 0, FLT_MAX, &g->sp.temperature));
    TRY(json_get_int(&S, js, "top_k", 0, INT_MAX, &g->sp.top_k));
    TRY(json_get_float(&S, js, "top_p", 0, 1, 1, &g->sp.top_p));
    TRY(json_get_float(&S, js, "min_p", 0, 0, 1, &g->sp.min_p));
    TRY(json_get_float(&S, js, "repeat_penalty", 0, 1, FLT_MAX, &g->sp.repeat_penalty));
    TRY(json_get_int(&S, js, "repeat_last_n", 0, INT_MAX, &g->sp.repeat_last_n));
    TRY(json_get_u64(&S, js, "seed", &g->sp.seed));
    TRY(json_only_keys(&S, js, skeys, 7));
    TRY(json_get_u64(L, root, "rng_state", &g->rng));
    TRY(json_get_int(L, root, "max_new_tokens", 0, INT_MAX, &g->max_new));
    TRY(json_get_str(L, root, "context_policy", &pol));
    if (strcmp(pol, "drop-oldest") == 0) g->policy = GPT2_SESSION_DROP_OLDEST;
    else if (strcmp(pol, "refuse") == 0) g->policy = GPT2_SESSION_REFUSE;
    else {
        snprintf(found, sizeof found, "\"%s\"", text_show(pol, strlen(pol), shown));
        return json_bad(L, "context_policy", "\"drop-oldest\" or \"refuse\"", found);
    }
    TRY(json_get_array(L, root, "turns", NULL, &jturns));
    int n_turns = cJSON_GetArraySize(jturns), first;
    if (n_turns % 2) {
        snprintf(found, sizeof found, "%d turns", n_turns);
        return json_bad(L, "turns", "an even number of turns (each user turn followed by its reply)", found);
    }
    TRY(json_get_int(L, root, "first_in_context", 0, n_turns, &first));
    if (first % 2) {
        snprintf(found, sizeof found, "%d", first);
        return json_bad(L, "first_in_context", "an even turn index (a user turn)", found);
    }
    TRY(json_get_bool(L, root, "replying", &g->replying));
    if (version >= 3 && json_has(root, "system")) {
        const char *sys;
        TRY(json_get_str(L, root, "system", &sys));
        if (*sys && !(g->cv.system = strdup(sys))) return gpt2_fail(L->err, GPT2_ERR_NOMEM, "out of memory");
    }
    if (g->replying && first >= n_turns)
        return json_bad(L, "replying", "false when the context holds no exchange", "true");
    int same_model = strcmp(model, gpt2_model_name(s->model)) == 0 && n_vocab == s->n_vocab;
    TRY(parse_turns(s, L, jturns, same_model, g, ""));
    if (g->replying) TRY(check_reply_in_progress(L, g));
    g->cv.first = first;
    /* Unknown fields last: a misspelt required field is reported as missing. */
    if (version >= 4 && json_has(root, "branches")) TRY(parse_branches(s, L, root, same_model, g));
    return json_only_keys(L, root, top, version >= 4 ? 15 : version >= 3 ? 13 : 12);
}

/* A conversation's file is far smaller: the size is checked before anything
 * is read, so a huge file is refused at once (a 100 MB one took 2.6 s and
 * 2.3 GB to refuse when the limit was 256 MiB). */
#define SESSION_FILE_MAX ((size_t)16 << 20)

gpt2_status gpt2_session_file_model(const char *path, char *name, size_t cap, int *n_vocab, gpt2_error *err) {
    if (!path || !name || cap == 0 || !n_vocab) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "file_model: bad argument");
    cJSON *root;
    TRY(json_read_file(path, SESSION_FILE_MAX, GPT2_ERR_FORMAT, "session file", &root, err));
    json_src L = {path, NULL, GPT2_ERR_FORMAT, err};
    const char *model = NULL;
    gpt2_status st = json_get_str(&L, root, "model", &model);
    if (st == GPT2_OK) st = json_get_int(&L, root, "n_vocab", 1, INT_MAX, n_vocab);
    if (st == GPT2_OK) snprintf(name, cap, "%s", model);
    cJSON_Delete(root);
    return st;
}

gpt2_status gpt2_session_load(gpt2_session *s, const char *path, gpt2_progress_fn progress, void *user_data,
                              gpt2_error *err) {
    if (!s || !path) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "load: NULL argument");
    s->stats.last_call = 0;
    cJSON *root;
    TRY(json_read_file(path, SESSION_FILE_MAX, GPT2_ERR_FORMAT, "session file", &root, err));
    staged g = {0};
    json_src L = {path, NULL, GPT2_ERR_FORMAT, err};
    gpt2_status st = parse_session(s, &L, root, &g);
    cJSON_Delete(root);
    int f = 0, evaluated = 0;
    if (st == GPT2_OK)
        st = fit(s, g.tmpl, &g.cv, 0, g.policy == GPT2_SESSION_DROP_OLDEST, g.max_new,
                 "the saved conversation's last exchange", &f, err);
    if (st != GPT2_OK) {
        staged_clear(&g);
        return st;
    }
    /* Swap in, evaluate, and swap back on failure. */
    int loaded_first = g.cv.first;
    convo old_cv = s->cv;
    gpt2_chat_template *old_tmpl = s->tmpl;
    tv_swap(&s->toks, &s->next);
    s->cv = g.cv;
    s->cv.first = f;
    s->tmpl = g.tmpl;
    const int32_t old_end = s->turn_end;
    s->turn_end = turn_end_of(s, g.tmpl);
    st = sync_cache(s, g.replying, progress, user_data, &evaluated, err);
    if (st != GPT2_OK) {
        tv_swap(&s->toks, &s->next);
        s->cv = old_cv;
        s->tmpl = old_tmpl;
        s->turn_end = old_end;
        staged_clear(&g);
        settle(s);
        return st;
    }
    cv_clear(&old_cv);
    branches_clear(s); /* the file's conversation replaces the tree, and brings its own */
    s->br = g.br, s->n_br = g.n_br, s->cur = g.cur;
    gpt2_chat_template_free(old_tmpl);
    s->max_new = g.max_new;
    s->policy = g.policy;
    gpt2_sampler_set_params(s->smp, g.sp);
    gpt2_sampler_set_rng_state(s->smp, g.rng);
    s->stats.last_reply = 0;
    s->replying = 0;
    s->reply_drafted = 0;
    drop_queue(s);
    if (g.replying) resume_reply(s); /* the reply goes on where it was */
    if (f != loaded_first) post_drop_notice(s, f - loaded_first, evaluated);
    return GPT2_OK;
}
