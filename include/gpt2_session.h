/* gpt2_session.h — a chat with a model: the conversation, its chat template,
 * the KV cache that holds it, and generation one token per call.
 *
 * A session owns a context (gpt2_context: the KV cache) and a sampler
 * (gpt2_sampler) for one model, a chat template that turns the conversation
 * into text, and the conversation itself: a list of turns (user, assistant,
 * user, assistant, ...) plus the exact token sequence that renders it. The
 * cache keeps that sequence between calls, so a new message evaluates only its
 * own tokens, never the history again. This is all of the chat app that is not
 * terminal code; the UI reads keys between calls and draws what comes back.
 *
 *     gpt2_chat_template *tmpl;           // the model's chat_template.json, else "transcript"
 *     gpt2_chat_template_for_model("models/shakespeare", &tmpl, &err);
 *     gpt2_session_params sp = gpt2_session_default_params();
 *     sp.chat_template = tmpl;            // copied
 *     gpt2_session *s;
 *     if (gpt2_session_new(model, sp, &s, &err) != GPT2_OK) ...
 *     gpt2_chat_template_free(tmpl);
 *
 *     gpt2_session_send(s, "Good morrow.", 12, on_progress, ui, &err);  // prefill (cancellable)
 *     gpt2_session_token t;
 *     do {
 *         if (gpt2_session_step(s, &t, &err) != GPT2_OK) break;  // one token
 *         fwrite(t.text, 1, t.len, stdout);                       // valid UTF-8
 *         // between calls: read keys; gpt2_session_set_sampler_params(s, p) takes
 *         // effect at the next token; Esc -> gpt2_session_stop(s, &t, &err)
 *     } while (!t.done);
 *     gpt2_session_save(s, "chat.json", &err);
 *     gpt2_session_free(s);
 *
 * Rendering. With template T the conversation is the token sequence
 *     encode(T.preamble)
 *     for each exchange k in the context (user turn u_k, assistant turn a_k):
 *       encode([k > first ? T.assistant_suffix (+ EOT) : ""]
 *              + T.user_prefix + u_k.text + T.user_suffix (+ EOT) + T.assistant_prefix)
 *       ++ the token ids of a_k's reply
 * where "(+ EOT)" is the <|endoftext|> id, present when T.eot_after_turn is
 * set; each stretch of text between two EOTs is encoded on its own. The
 * assistant suffix of a reply is thus evaluated when the next turn starts,
 * together with that turn. The preamble is encoded on its own, so its cached
 * tokens survive reset and turn dropping. Template strings and message text
 * are plain text: a literal "<|endoftext|>" in them is ordinary text. A reply's
 * ids are the tokens the model sampled (after a stop string, the tokens before
 * it plus the re-encoded text that preceded the stop within its token); they
 * decode to exactly the reply's text.
 *
 * The system message (gpt2_session_set_system), when there is one, comes
 * first and stays through turn drops and reset: a Jinja template gets it as
 * the first message, {"role": "system"}, as Hugging Face's apply_chat_template
 * does (a template that has no system turn may fold it into the first user
 * message, or refuse it with its own message); with a plain template it is
 * encoded, followed by a blank line ("\n\n"), after the BOS and before
 * T.preamble.
 *
 * The cache. Every operation computes the new token sequence, then brings the
 * cache in line with it: it keeps the longest common prefix of what the cache
 * holds and what is wanted, rewinds to it and evaluates only the rest. So send
 * evaluates the new message, undo only rewinds, regen re-evaluates one token,
 * and a template switch or a turn drop (positions shift) recomputes the lot.
 * Counters (gpt2_session_stats) show how many tokens each evaluated.
 *
 * Failure is atomic. Every call that fails (a cancelled prefill included)
 * leaves the conversation, the template, the parameters, the RNG and
 * gpt2_session_tokens() exactly as they were. The cache is rewound to the
 * longest prefix it shares with that sequence; after an ordinary cancelled send
 * that is the whole previous sequence (same n_past as before the send). Only
 * when the cancelled work had started a full recompute (a turn drop, a template
 * switch, a load) does the cache fall short, and the next call that evaluates
 * anything catches it up first (counted in that call's figures).
 *
 * Generation. gpt2_session_step samples one token from the logits of the last
 * position (history for the repetition penalty: every token in the context),
 * appends it to the reply and evaluates it, so the next call is ready. The text
 * it returns is complete UTF-8 (gpt2_utf8_stream); text that might be the start
 * of a stop string is held back until it is known not to be one. A reply ends
 * at: a stop string (the stop text is removed from the reply and the cache, the
 * text before it kept), <|endoftext|> (not kept), max_new_tokens sampled
 * tokens, a full context, or gpt2_session_stop. Stop strings are searched in the
 * reply only (not in the assistant prefix before it).
 *
 * Context full (policy in the params, changeable at any time):
 *   GPT2_SESSION_DROP_OLDEST (default): when a message does not fit (it must
 *     leave at least one position free for the reply), or a reply fills the
 *     context, whole exchanges (user turn + its reply) are dropped from the
 *     model's context, oldest first, never the preamble and never the last
 *     exchange, until the text plus room for R reply tokens fits,
 *     R = min(max_new_tokens (when set), n_ctx / 4), at least 1 — or until only
 *     the last exchange is left. The cache is then recomputed from the kept
 *     text and a notice is posted (gpt2_session_notice; stats.notices counts
 *     them, stats.dropped_turns says how many turns went). Dropped turns stay
 *     in the turn list (gpt2_turn.in_context = 0) for the UI's scrollback and
 *     are saved, but are never evaluated again.
 *   GPT2_SESSION_REFUSE: send fails with GPT2_ERR_CONTEXT_FULL (the session
 *     untouched) and a reply that fills the context ends with
 *     GPT2_REPLY_CONTEXT_FULL.
 * A message too long to fit even with every earlier exchange dropped fails
 * with GPT2_ERR_CONTEXT_FULL under either policy, the session untouched.
 *
 * Session file (gpt2_session_save / gpt2_session_load): JSON, version 2,
 * described field by field in docs/session-format.md. Load reads and checks
 * everything before it changes anything; on success the session is in the
 * saved state: same conversation, template, parameters, policy and RNG
 * state, the cache recomputed, a reply in progress continuing where it was,
 * so the same calls sample the same tokens. The file is written through
 * gpt2_fileio (a crash leaves the old file or the new one; see
 * gpt2_fileio.h).
 *
 * Hooks. gpt2_session_set_hooks sets the session's context's own hooks (the
 * bottom of its observer stack, see gpt2_context_push_hooks); a long call's
 * progress callback is pushed above them for the call. They fire for every token the
 * session evaluates (prefill, decode, recompute), with the positions of the
 * cache; in draft mode also for each verification pass's K + 1 positions,
 * drafts rejected afterwards included (a later pass evaluates those
 * positions again, with the tokens that were kept).
 *
 * Progress callbacks (send, regen, set_template, load) have the shape of
 * gpt2_hooks.progress: progress(user_data, n_done, n_total) is called after each
 * evaluated batch of the call's work but the last (so only when that work is
 * more than n_batch tokens); non-zero cancels, and the call then returns
 * GPT2_CANCELLED with the session as before. The hooks' own progress, if any,
 * is asked as well, after it.
 *
 * Draft mode (speculative sampling, gpt2_speculative.h). With a draft model
 * set (gpt2_session_set_draft; it must share the model's tokenizer) and draft
 * mode on, gpt2_session_step still returns ONE token per call: when nothing
 * is queued it runs one speculative iteration from the conversation's token
 * sequence (the draft proposes K tokens, the session's context checks them
 * in one batched pass, reusing its cached prefix), queues the 1..K+1 tokens
 * that come out and hands them out one per call through exactly the path of
 * a sampled token: stop strings (held back, removed), <|endoftext|>,
 * max_new_tokens, a full context and gpt2_session_stop end the reply at the
 * right token, and what is still queued then is discarded. The queue is also
 * discarded when the sampling parameters change (they apply at the very next
 * token, mid-reply included), when draft mode is switched off or the draft
 * replaced, and when a reply is regenerated, undone or loaded; K
 * (gpt2_session_set_draft_k) applies from the next iteration. The tokens
 * follow the target's own sampling distribution exactly (at temperature 0:
 * the reply is token for token the one of plain mode); each says how it came
 * about (gpt2_session_token.origin). gpt2_draft_stats gives the acceptance
 * rate r and the tokens per target pass, per reply and in total.
 *   Between the steps of a reply in draft mode the cache may run ahead of
 *   gpt2_session_tokens (queued tokens already evaluated) or one token behind
 *   it (the last one handed out is evaluated by the next pass), so
 *   gpt2_context_logits(gpt2_session_context(s)) is not the next position's;
 *   when the reply ends the cache is brought in line (as in plain mode: the
 *   sequence, with the logits of its last token). Counters (stats.last_reply,
 *   last_call, total) count the session's own (target) positions, each
 *   verification pass's K + 1 included, drafts rejected afterwards too; the
 *   draft model's evals are not counted there.
 *   RNG: the decoder draws from the session's sampler's stream (the state is
 *   copied into the decoder before an iteration and back after it), so one
 *   seed gives one reply in draft mode too, regen with a restored
 *   gpt2_sampler_rng_state repeats a reply, and save/load keep the stream.
 *   The draws differ from plain mode's (same distribution, not the same
 *   draws, except at temperature 0).
 *   Inspector: after a queued token, gpt2_sampler_report describes the
 *   target's distribution at that token's position (the session runs the
 *   sampler over the target's logits captured by the pass, and puts the RNG
 *   back); gpt2_sampler_last is then not the token handed out (out.id is).
 *   Save/load: the session file holds no draft state (format unchanged): the
 *   draft model, on/off and K stay as the session has them across a load. A
 *   reply saved in the middle of a queued batch continues after load with a
 *   new iteration from the saved RNG state, so from there it may differ from
 *   the one that was not saved and loaded (the queue is not saved).
 *
 * A session is not thread-safe: one thread uses it at a time, and hooks and
 * callbacks must not call back into it. Only send/regen/set_template/load and
 * step evaluate tokens; no call allocates per generated token except the
 * amortised growth of the reply's buffers.
 */
#ifndef GPT2_SESSION_H
#define GPT2_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_chat_template.h"
#include "gpt2_context.h"
#include "gpt2_model.h"
#include "gpt2_sampler.h"
#include "gpt2_speculative.h"
#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- session ----------------------------------------------------------- */

/* A turn's speaker. SYSTEM is the system message (gpt2_session_set_system),
 * never a turn of the conversation; gpt2_session_render takes it first. */
typedef enum { GPT2_ROLE_USER = 0, GPT2_ROLE_ASSISTANT, GPT2_ROLE_SYSTEM } gpt2_role;

typedef enum {
    GPT2_SESSION_DROP_OLDEST = 0, /* drop whole exchanges, oldest first, and post a notice */
    GPT2_SESSION_REFUSE           /* fail with GPT2_ERR_CONTEXT_FULL */
} gpt2_session_policy;

typedef struct {
    gpt2_context_params context;        /* n_ctx, n_batch, n_threads of the session's context */
    gpt2_sampler_params sampler;        /* initial sampling parameters */
    int max_new_tokens;                 /* sampled tokens per reply, >= 0; 0 = no limit but
                                           the context. Default 256 */
    gpt2_session_policy context_policy; /* default GPT2_SESSION_DROP_OLDEST */
    const gpt2_chat_template *chat_template; /* copied by new; NULL = "transcript" */
} gpt2_session_params;

/* Why a reply ended. */
typedef enum {
    GPT2_REPLY_NOT_DONE = 0,
    GPT2_REPLY_STOP_STRING,  /* the template's stop string (not kept) */
    GPT2_REPLY_EOT,          /* the model emitted <|endoftext|> (not kept) */
    GPT2_REPLY_MAX_TOKENS,   /* max_new_tokens tokens were sampled */
    GPT2_REPLY_CONTEXT_FULL, /* no room for another token (and nothing to drop, or REFUSE) */
    GPT2_REPLY_STOPPED       /* gpt2_session_stop */
} gpt2_reply_end;

/* A short name for the UI: "stop string", "end of text", "token limit",
 * "context full", "stopped", "" for NOT_DONE. */
const char *gpt2_reply_end_name(gpt2_reply_end end);

/* How a token came about (draft mode; see "Draft mode" above). */
typedef enum {
    GPT2_TOKEN_SAMPLED = 0, /* drawn by the session's sampler (plain mode), or by the
                               target alone where the draft had no room to propose */
    GPT2_TOKEN_ACCEPTED,    /* proposed by the draft model and accepted by the target */
    GPT2_TOKEN_CORRECTED,   /* the target's replacement for a rejected draft token */
    GPT2_TOKEN_BONUS        /* all K drafts accepted: one more from the target's last position */
} gpt2_token_origin;

/* What one gpt2_session_step (or gpt2_session_stop) returns. */
typedef struct {
    int32_t id;         /* the token sampled by this call, -1 if none was (the reply
                           ended before sampling: limit, full context, stop) */
    float prob;         /* the probability the model gave id: softmax of the raw
                           logits at temperature 1, before penalty and filters; 0
                           when id is -1 */
    int kept;           /* 1: id was appended to the reply and the cache; 0: it ended
                           the reply (<|endoftext|>, or it completed a stop string) or
                           none was sampled */
    const char *text;   /* what to show now: complete UTF-8 (bad bytes as U+FFFD),
                           len bytes, NUL-terminated (it may hold NUL itself). Owned
                           by the session, valid until its next call */
    size_t len;
    int done;           /* 1: the reply has ended; do not step again before the next
                           send or regen */
    gpt2_reply_end end; /* why, when done */
    gpt2_token_origin origin; /* how id came about; SAMPLED when id is -1 */
    int n_rejected;     /* CORRECTED: draft tokens the target discarded at this
                           position (the rejected one and those after it); else 0 */
} gpt2_session_token;

/* One turn of the conversation, as gpt2_session_turn returns it. */
typedef struct {
    gpt2_role role;
    const char *text;   /* raw bytes (the reply as the model wrote it, not
                           UTF-8-repaired), len of them, NUL-terminated. Valid until
                           the next call that changes the conversation */
    size_t len;
    size_t shown;       /* bytes of text given to the UI so far: len, except for a
                           reply in progress, whose last len - shown bytes are held
                           back as a possible stop string. Redraw text[start, shown) */
    size_t start;       /* bytes before the text a reader sees: 1 for a reply that
                           starts with the space a tokenizer's space prefix puts
                           before its first word (SentencePiece's '▁Hello', shown as
                           "Hello", as gpt2_tokenizer_decode gives it), else 0 */
    int in_context;     /* 0 once dropped from the model's context (context full) */
    int replying;       /* 1 for the reply still being written */
    const int32_t *ids; /* an assistant turn's reply tokens (n_ids); NULL for a user turn */
    int n_ids;
    int pos;            /* where ids[0] is in gpt2_session_tokens (and the cache): reply token k
                           is at pos + k; -1 for a user turn or a turn out of the context */
} gpt2_turn;

/* What the sampler saw when a reply token was sampled: its report
 * (gpt2_sampler_report, most probable first) and the knobs then. Kept with
 * the turn through context drops and in session files. n = 0: nothing was
 * recorded (a token a draft pass proposed, text re-encoded at a stop string
 * or from another model's session file, a file from before version 2). */
enum { GPT2_SESSION_CANDIDATES = 10 };
typedef struct {
    int n;
    gpt2_candidate c[GPT2_SESSION_CANDIDATES];
    gpt2_sampler_params params;
} gpt2_token_candidates;

/* Work counters: tokens the session evaluated (run through the model). */
typedef struct {
    int last_prefill;    /* by the last successful send: its new tokens, plus any
                            recompute it needed (a turn drop, a cache catching up) */
    int last_reply;      /* by the current or last reply: one per kept token, the
                            re-encoded text before a stop string, regen's re-evaluation,
                            any recompute during it */
    int last_call;       /* by the most recent call that could evaluate (send, step,
                            stop, regen, undo, reset, set_template, load), failed or not */
    long long total;     /* since gpt2_session_new, cancelled work included */
    unsigned notices;    /* notices posted so far */
    int dropped_turns;   /* turns dropped by the last context-full drop */
} gpt2_session_stats;

typedef struct gpt2_session gpt2_session;

/* Progress/cancel callback of long calls; see "Progress callbacks" above. */

/* Defaults: the context's and sampler's defaults, max_new_tokens 256,
 * GPT2_SESSION_DROP_OLDEST, chat_template NULL ("transcript"). */
gpt2_session_params gpt2_session_default_params(void);

/* Creates a session on model (which must have a tokenizer and outlive the
 * session). Nothing is evaluated yet: the first send evaluates the preamble
 * with its message. Fails with GPT2_ERR_INVALID_ARG for bad parameters or a
 * template that fails gpt2_chat_template_check or needs an <|endoftext|> the
 * vocabulary lacks, or with the context's own errors. */
gpt2_status gpt2_session_new(const gpt2_model *model, gpt2_session_params params, gpt2_session **out,
                             gpt2_error *err);
void gpt2_session_free(gpt2_session *s);

/* Appends a user turn with len bytes of text (any bytes; text may be NULL when
 * len is 0) and an empty assistant turn, and prefills the cache up to the
 * assistant prefix; the reply is then in progress (gpt2_session_step). Fails,
 * the session untouched, when a reply is still in progress (stop it first:
 * GPT2_ERR_INVALID_ARG), when the message does not fit (see "Context full"),
 * when the template and message render to no tokens at all (nothing to
 * condition on), or when progress cancels (GPT2_CANCELLED). progress may be NULL. */
gpt2_status gpt2_session_send(gpt2_session *s, const char *text, size_t len, gpt2_progress_fn progress,
                              void *user_data, gpt2_error *err);

/* Generates one token of the reply in progress; see "Generation" above and
 * gpt2_session_token. Without a reply in progress: GPT2_ERR_INVALID_ARG. A
 * failure (an evaluation error, or the hooks' cancel during a recompute) leaves
 * the reply in progress as it was. */
gpt2_status gpt2_session_step(gpt2_session *s, gpt2_session_token *out, gpt2_error *err);

/* Ends the reply in progress now (Esc), keeping all of it, held-back text
 * included: out (may be NULL) gets that text, done = 1, end =
 * GPT2_REPLY_STOPPED, id = -1. Without a reply in progress it does nothing
 * (out gets done = 1, len 0). */
gpt2_status gpt2_session_stop(gpt2_session *s, gpt2_session_token *out, gpt2_error *err);

/* 1 while a reply is in progress (after send or regen, until step or stop
 * ends it). */
int gpt2_session_replying(const gpt2_session *s);

/* Removes the last reply (finished or in progress), rewinds the cache to just
 * before it and starts it again (re-evaluating the last prompt token for its
 * logits). The sampler's RNG goes on where it was, so the new reply differs;
 * gpt2_session_set_rng_state(s, state) with the state
 * read before the original reply's first step gives the same reply again.
 * Fails (GPT2_ERR_INVALID_ARG) when the context holds no exchange. */
gpt2_status gpt2_session_regen(gpt2_session *s, gpt2_progress_fn progress, void *user_data, gpt2_error *err);

/* Removes the last exchange (user turn and reply, a reply in progress
 * included) and rewinds the cache to the tokens before it; evaluates nothing.
 * Fails (GPT2_ERR_INVALID_ARG) when the context holds no exchange (dropped
 * turns cannot be undone). */
gpt2_status gpt2_session_undo(gpt2_session *s, gpt2_error *err);

/* Empties the conversation (dropped turns too), keeping the template, the
 * parameters, the RNG and the cached preamble. */
gpt2_status gpt2_session_reset(gpt2_session *s, gpt2_error *err);

/* Sets the system message (len bytes of text, copied; len 0 removes it),
 * re-renders the conversation with it and recomputes the cache from where it
 * changes (the context policy applies if it no longer fits). Not while a reply
 * is in progress (GPT2_ERR_INVALID_ARG), nor with a NUL byte in it; a template
 * that refuses a system message fails with its message (GPT2_ERR_TEMPLATE). */
gpt2_status gpt2_session_set_system(gpt2_session *s, const char *text, size_t len, gpt2_progress_fn progress,
                                    void *user_data, gpt2_error *err);
/* The system message, "" when none. Valid until it changes. */
const char *gpt2_session_system(const gpt2_session *s);

/* Switches to template t (copied), re-renders the conversation with it and
 * recomputes the cache (the context policy applies if it no longer fits). Not
 * while a reply is in progress (GPT2_ERR_INVALID_ARG). */
gpt2_status gpt2_session_set_template(gpt2_session *s, const gpt2_chat_template *t, gpt2_progress_fn progress,
                                      void *user_data, gpt2_error *err);

/* The session's own copy of its template; valid until the next set_template
 * or load. */
const gpt2_chat_template *gpt2_session_template(const gpt2_session *s);

/* Sampling parameters: replaced at any time, mid-reply included; they apply
 * from the next token (gpt2_sampler_set_params: a new seed reseeds). */
void gpt2_session_set_sampler_params(gpt2_session *s, gpt2_sampler_params p);
gpt2_sampler_params gpt2_session_sampler_params(const gpt2_session *s);

/* max_new_tokens (>= 0, 0 = no limit; negative counts as 0), at any time: a
 * reply in progress that already has that many ends at the next step. */
void gpt2_session_set_max_new_tokens(gpt2_session *s, int n);
int gpt2_session_max_new_tokens(const gpt2_session *s);

void gpt2_session_set_context_policy(gpt2_session *s, gpt2_session_policy policy);
gpt2_session_policy gpt2_session_context_policy(const gpt2_session *s);

/* The session's sampler, read-only: for gpt2_sampler_report after each step
 * (the inspector's candidate list) and gpt2_sampler_last. Owned by the
 * session; change its knobs with gpt2_session_set_sampler_params. */
const gpt2_sampler *gpt2_session_sampler(const gpt2_session *s);

/* The sampler's RNG state (gpt2_sampler_rng_state), to repeat a reply:
 * restoring the state read before a reply's first step and regenerating
 * gives the same reply again. */
uint64_t gpt2_session_rng_state(const gpt2_session *s);
void gpt2_session_set_rng_state(gpt2_session *s, uint64_t state);

/* Zero-ablates attention heads (gpt2_context_set_ablation): heads is
 * (n_layer, n_head), non-zero for a head whose output is zeroed; NULL lifts
 * every ablation. The conversation is kept and its cache evaluated again
 * under the new set (every position: an ablation changes every later
 * layer's keys and values), with progress as for send; the hooks see the
 * recomputation. It may be called mid-reply: the reply goes on under the
 * new set from its next token (queued draft tokens are discarded). The
 * same set again costs nothing. On failure or cancel the old set is back
 * and the session unchanged (its cache is caught up by the next call). */
gpt2_status gpt2_session_set_ablation(gpt2_session *s, const unsigned char *heads, gpt2_progress_fn progress,
                                      void *user_data, gpt2_error *err);
int gpt2_session_ablated(const gpt2_session *s, int layer, int head);

/* The logit lens on the session's model (gpt2_context_unembed): logits
 * (n_vocab) of a residual vector x (n_embd), e.g. one the hooks' on_residual
 * delivered. Between calls that evaluate, never from a hook. */
gpt2_status gpt2_session_unembed(gpt2_session *s, const float *x, float *logits, gpt2_error *err);

/* ---- draft mode (see "Draft mode" above) ---- */

/* Sets the draft model (which must outlive the session or the next
 * set_draft) with K draft tokens per iteration (1..GPT2_SPEC_MAX_K), and
 * turns draft mode on; NULL removes the draft (draft mode off). Creates the
 * draft's context (window: the smaller of the session's and the draft's
 * n_positions; near a smaller window's end the session samples plainly) and
 * evaluates nothing: the draft's cache catches up with the conversation at
 * the next step that drafts. Allowed at any time, mid-reply included (the
 * queue is discarded). Fails with the session unchanged: GPT2_ERR_TOKENIZER
 * with gpt2_speculative_new's message when the draft does not share the
 * model's tokenizer, GPT2_ERR_INVALID_ARG for K out of range, or the
 * context's own errors. */
gpt2_status gpt2_session_set_draft(gpt2_session *s, const gpt2_model *draft, int k, gpt2_error *err);
const gpt2_model *gpt2_session_draft_model(const gpt2_session *s); /* NULL: none */

/* Draft mode on or off at any time (off discards the queue); turning it on
 * without a draft model is GPT2_ERR_INVALID_ARG. enabled: 1 when on with a
 * draft set. */
gpt2_status gpt2_session_set_draft_enabled(gpt2_session *s, int on, gpt2_error *err);
int gpt2_session_draft_enabled(const gpt2_session *s);

/* K at any time, from the next iteration on (queued tokens are kept);
 * GPT2_ERR_INVALID_ARG outside 1..GPT2_SPEC_MAX_K. Default 4. */
gpt2_status gpt2_session_set_draft_k(gpt2_session *s, int k, gpt2_error *err);
int gpt2_session_draft_k(const gpt2_session *s);

typedef struct {
    long iterations;        /* speculative iterations = batched target passes */
    long drafted;           /* draft tokens proposed (K each, fewer at the window's end) */
    long accepted;          /* of which the target accepted */
    long produced;          /* tokens the iterations produced, 1..K+1 each (queued
                               ones discarded later included) */
    double r;               /* the acceptance rate of DeepMind's post: tokens per
                               iteration / (K + 1), here produced / (drafted +
                               iterations) so that a K changed midway counts each
                               iteration with its own K; 0 before any iteration */
    double tokens_per_pass; /* produced / iterations; 0 before any */
} gpt2_draft_stats;

/* The figures of the current (or last) reply's iterations, and of all since
 * the draft was set. Either pointer may be NULL. */
void gpt2_session_draft_stats(const gpt2_session *s, gpt2_draft_stats *reply, gpt2_draft_stats *total);

/* Sets the context hooks (copied; NULL removes them); see "Hooks" above. */
void gpt2_session_set_hooks(gpt2_session *s, const gpt2_hooks *hooks);

/* Branches: the conversation as a tree. gpt2_session_fork(s, turn, k, id)
 * replaces reply token k of assistant turn `turn` by id (another candidate:
 * gpt2_session_candidates lists what the sampler saw there) and goes on from
 * it: the turns after it and the reply's tokens after k stay in the branch the
 * conversation was, and a new branch becomes the active one — the turns up to
 * that reply, its first k tokens, id, and a reply in progress that
 * gpt2_session_step continues. The cache keeps everything before token k
 * (nothing before it is evaluated again). Not while a reply is in progress;
 * not a token that ends a reply, nor the one already there; a turn dropped from
 * the context cannot be forked. Branches are numbered 0, 1, ... in the order
 * they were made; gpt2_session_switch_branch makes another the active one (its
 * conversation rendered, the cache kept up to where they part). Every other
 * call works on the active branch; reset and load end the tree. */
gpt2_status gpt2_session_fork(gpt2_session *s, int turn, int k, int32_t id, gpt2_progress_fn progress,
                              void *user_data, gpt2_error *err);
/* How many branches (1 before any fork), and which is active. */
int gpt2_session_n_branches(const gpt2_session *s);
int gpt2_session_branch(const gpt2_session *s);
gpt2_status gpt2_session_switch_branch(gpt2_session *s, int i, gpt2_progress_fn progress, void *user_data,
                                       gpt2_error *err);
/* Where branch i parts from the active one: the first turn that differs
 * (*at_turn), and within it the first reply token that differs (*token; -1
 * when the turns differ otherwise, or one branch ends there). 0 for the active
 * branch or an i out of range. */
int gpt2_session_branch_diverges(const gpt2_session *s, int i, int *at_turn, int *token);

/* The conversation: turns 0 .. n_turns - 1, oldest first; dropped turns
 * (in_context 0) come first. gpt2_session_turn returns 0 for i out of range. */
int gpt2_session_n_turns(const gpt2_session *s);
int gpt2_session_turn(const gpt2_session *s, int i, gpt2_turn *out);

/* The tokens a session with template t would give the model for messages
 * roles[i], texts[i] (i < n; a reply's tokens being its text encoded; a
 * GPT2_ROLE_SYSTEM message only first, as the system message), as
 * "Rendering" says: what `gptscope template` prints. *ids malloc'd (*n_ids of them). */
gpt2_status gpt2_session_render(const gpt2_model *m, const gpt2_chat_template *t, const gpt2_role *roles,
                                const char *const *texts, int n, int32_t **ids, int *n_ids, gpt2_error *err);

/* The token sequence of the conversation as rendered (see "Rendering"), which
 * the cache holds: *n tokens, oldest first, at most gpt2_session_n_ctx. Valid
 * until the next call that changes the conversation. */
const int32_t *gpt2_session_tokens(const gpt2_session *s, int *n);

/* Reply token k of assistant turn `turn`'s candidates; GPT2_ERR_INVALID_ARG
 * for a user turn or k outside [0, n_ids). */
gpt2_status gpt2_session_candidates(const gpt2_session *s, int turn, int k, gpt2_token_candidates *out);
int gpt2_session_n_ctx(const gpt2_session *s);

/* The session's context (for its logits, n_past and the inspector's reads)
 * and model. Do not evaluate, rewind or set hooks on the context directly. */
const gpt2_context *gpt2_session_context(const gpt2_session *s);
const gpt2_model *gpt2_session_model(const gpt2_session *s);

gpt2_session_stats gpt2_session_get_stats(const gpt2_session *s);

/* The latest notice for the UI (one line, e.g. "context full: dropped the 2
 * oldest turns (1 exchange) from the model's context; re-evaluated 40
 * tokens"), or "" if none yet. stats.notices tells when a new one arrives. */
const char *gpt2_session_notice(const gpt2_session *s);

/* Writes the session to path atomically (see "Session file"). GPT2_ERR_IO
 * naming the path on failure; an existing file at path is then untouched. */
gpt2_status gpt2_session_save(const gpt2_session *s, const char *path, gpt2_error *err);

/* Replaces the session's state with the file's (see "Session file"). A
 * missing file (GPT2_ERR_IO), malformed JSON, a missing or extra field, a
 * wrong type or an out-of-range value (GPT2_ERR_FORMAT, naming the file and
 * the field, what was expected and what was found), a conversation that does
 * not fit under the policy (GPT2_ERR_CONTEXT_FULL) or a cancel leave the
 * session untouched. The file's context policy applies to the loaded state. */
gpt2_status gpt2_session_load(gpt2_session *s, const char *path, gpt2_progress_fn progress, void *user_data,
                              gpt2_error *err);

/* The model a session file names ("model", at most cap - 1 bytes of it, and
 * "n_vocab"), read without loading the conversation: a UI asks before
 * continuing another model's conversation (load re-encodes its text and
 * takes its template and sampling settings). Errors as for load. A session
 * file larger than 16 MiB is refused before it is read (GPT2_ERR_FORMAT). */
gpt2_status gpt2_session_file_model(const char *path, char *name, size_t cap, int *n_vocab, gpt2_error *err);

#ifdef __cplusplus
}
#endif
#endif
