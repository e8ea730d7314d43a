/* seed_maker.c — real files for the seed corpora that only the library can write.
 *
 *     seed_maker FIXTURES OUT
 *
 * OUT/session/: sessions on FIXTURES/models/tiny-f32 saved by gpt2_session_save
 * (empty, finished and mid-reply exchanges, turns dropped from the context,
 * bytes that are not UTF-8, each built-in template, other parameters).
 * OUT/checkpoint/: checkpoints of a few tiny training steps (gpt2_trainer_save),
 * small enough (< 4 KB) for the fuzzer's input size limit.
 * gen_seeds.py runs it; it is not a test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt2.h"

static gpt2_error err;

#define OK(call)                                                              \
    do {                                                                      \
        if ((call) != GPT2_OK) {                                              \
            fprintf(stderr, "seed_maker: %s: %s\n", #call, err.msg);          \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static char out_dir[1024];

static gpt2_session *session(const gpt2_model *m, const char *tmpl, gpt2_session_policy pol, int max_new) {
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_threads = 1;
    p.sampler.seed = 3;
    p.max_new_tokens = max_new;
    p.context_policy = pol;
    p.chat_template = tmpl ? gpt2_chat_template_builtin(tmpl) : NULL;
    gpt2_session *s;
    OK(gpt2_session_new(m, p, &s, &err));
    return s;
}

/* Sends text (len bytes) and steps the reply: to its end, or `steps` tokens. */
static void exchange(gpt2_session *s, const char *text, size_t len, int steps) {
    OK(gpt2_session_send(s, text, len, NULL, NULL, &err));
    gpt2_session_token t = {0};
    for (int k = 0; (steps < 0 || k < steps) && !t.done; k++) OK(gpt2_session_step(s, &t, &err));
}

/* Steps a reply in progress to its end. */
static void exchange_rest(gpt2_session *s) {
    gpt2_session_token t = {0};
    while (!t.done) OK(gpt2_session_step(s, &t, &err));
}

static void save(gpt2_session *s, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/session/%s", out_dir, name);
    OK(gpt2_session_save(s, path, &err));
    gpt2_session_free(s);
}

static void sessions(const gpt2_model *m) {
    save(session(m, NULL, GPT2_SESSION_DROP_OLDEST, 8), "empty");
    gpt2_session *s = session(m, NULL, GPT2_SESSION_DROP_OLDEST, 8);
    exchange(s, "Good morrow", 11, -1);
    save(s, "one-exchange");
    s = session(m, NULL, GPT2_SESSION_DROP_OLDEST, 8);
    exchange(s, "Hello there", 11, 3);
    save(s, "mid-reply");
    s = session(m, "raw", GPT2_SESSION_DROP_OLDEST, 12);
    for (int i = 0; i < 4; i++) exchange(s, "the light in the lamp", 21, -1); /* n_ctx 64: turns drop */
    exchange(s, "and the boat", 12, 2);
    save(s, "dropped-mid-reply");
    s = session(m, "dialogpt", GPT2_SESSION_REFUSE, 5);
    exchange(s, "Hi", 2, -1);
    exchange(s, "ok", 2, -1);
    save(s, "dialogpt-refuse");
    s = session(m, "raw", GPT2_SESSION_DROP_OLDEST, 0);
    exchange(s, "caf\xc3\xa9 \xff\xfe\0x", 10, 4); /* not UTF-8, a NUL: text_base64 */
    gpt2_session_stop(s, NULL, &err);
    save(s, "bytes-base64");
    s = session(m, NULL, GPT2_SESSION_REFUSE, 3);
    gpt2_sampler_params sp = gpt2_session_sampler_params(s);
    sp.temperature = 0, sp.top_k = 5, sp.top_p = 0.5f, sp.min_p = 0.25f, sp.repeat_penalty = 1.3f;
    sp.repeat_last_n = 16, sp.seed = 18446744073709551615ull;
    gpt2_session_set_sampler_params(s, sp);
    exchange(s, "<|endoftext|>", 13, -1);
    save(s, "greedy-params");
    s = session(m, NULL, GPT2_SESSION_DROP_OLDEST, 8);
    gpt2_chat_template play = {.name = "play", .description = "ROMEO and JULIET", .user_prefix = "ROMEO:\n",
                               .user_suffix = "\n\n", .assistant_prefix = "JULIET:\n", .assistant_suffix = "\n\n",
                               .stop = (const char *const[]){"\n\n", "ROMEO:"}, .n_stop = 2};
    OK(gpt2_session_set_template(s, &play, NULL, NULL, &err));
    exchange(s, "What light", 10, -1);
    save(s, "play-template");
    s = session(m, "raw", GPT2_SESSION_DROP_OLDEST, 4); /* version 4: a system message and branches */
    OK(gpt2_session_set_system(s, "Verse.", 6, NULL, NULL, &err));
    exchange(s, "Hi", 2, -1);
    exchange(s, "And", 3, -1);
    gpt2_turn a;
    gpt2_session_turn(s, 1, &a);
    const int32_t other = a.ids[1] == 0 ? 1 : 0; /* any other token */
    OK(gpt2_session_fork(s, 1, 1, other, NULL, NULL, &err));
    exchange_rest(s);
    save(s, "system-branches");
}

/* n_layer, n_head, n_embd, block, vocab, batch, steps planned, dropout */
static gpt2_train_params tiny(int L, int H, int C, int T, int V, int B, int steps, float drop) {
    gpt2_train_params p = gpt2_train_default_params();
    p.n_layer = L, p.n_head = H, p.n_embd = C, p.block_size = T, p.n_vocab = V, p.batch_size = B;
    p.steps = steps, p.warmup_steps = steps / 2, p.dropout = drop, p.n_threads = 1, p.seed = 5;
    return p;
}

/* a checkpoint of run after "run" steps */
static void checkpoint(const char *name, gpt2_train_params p, int run) {
    const int V = p.n_vocab;
    gpt2_trainer *tr;
    OK(gpt2_trainer_new(p, &tr, &err));
    int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (i * 7 + i / 5) % V;
    gpt2_train_data d = {tok, 64, 0};
    for (int i = 0; i < run; i++) {
        float loss;
        OK(gpt2_trainer_step(tr, &d, &loss, &err));
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/checkpoint/%s", out_dir, name);
    OK(gpt2_trainer_save(tr, path, gpt2_tokens_hash(tok, 64), &err));
    gpt2_trainer_free(tr);
}

static void checkpoints(void) {
    checkpoint("c1-fresh", tiny(1, 1, 1, 4, 4, 2, 10, 0), 0);
    checkpoint("c1-steps", tiny(1, 1, 1, 4, 4, 2, 10, 0.1f), 3);
    checkpoint("c2-l2-finished", tiny(2, 1, 2, 3, 5, 1, 4, 0), 4);
    checkpoint("c4-h2", tiny(1, 2, 4, 4, 8, 2, 6, 0.2f), 2);
    /* mid-warmup, half the windows at random rows; gen_seeds.py also writes it as version 3 */
    gpt2_train_params w = tiny(1, 1, 2, 4, 4, 2, 10, 0.1f);
    w.short_block = 2, w.short_steps = 5, w.short_offsets = 0.5f, w.attn_dropout = 0.1f;
    checkpoint("c2-warmup-offsets", w, 3);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: seed_maker FIXTURES OUT\n");
        return 2;
    }
    snprintf(out_dir, sizeof out_dir, "%s", argv[2]);
    char path[1200];
    mkdir(out_dir, 0777);
    snprintf(path, sizeof path, "%s/session", out_dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/checkpoint", out_dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/models/tiny-f32", argv[1]);
    gpt2_model *m;
    OK(gpt2_model_load(path, &m, &err));
    sessions(m);
    gpt2_model_free(m);
    checkpoints();
    return 0;
}
