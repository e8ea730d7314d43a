/* chat.c — `gptscope chat`: the full-screen app's entry point. Owns the
 * session and what the inspector records from it (attention rows, candidate
 * snapshots, token probabilities), routes keys (focused pane first, then the
 * global keys, then the input line: input.c) and runs the commands. Layout and
 * drawing: screen.c; panes: panes.c; colours: term.c.
 *
 * The loop: while a reply is being written, each iteration reads every key
 * that is waiting (non-blocking), then runs one gpt2_session_step and redraws;
 * otherwise it waits for a key (100 ms timeout, to notice signals). Signals
 * only set flags; every exit path ends curses. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ui/app.h"

enum { ATT_BUDGET = 256 << 20 }; /* bytes of attention rows kept for all layers */

static volatile sig_atomic_t g_signal; /* SIGTERM/SIGINT/SIGHUP: quit */
static int g_step_delay_ms;            /* tests only: GPTSCOPE_TEST_STEP_DELAY_MS */

static void on_signal(int sig) { g_signal = sig; }

/* A fatal signal's last words (cli_on_fatal_signal): the terminal back, and
 * where the conversation was saved if it was (before a /draft load). */
static char g_autosave[4096];
static void emergency(void) {
    term_emergency_restore();
    if (!g_autosave[0]) return;
    cli_say("gptscope: the conversation was saved to ");
    cli_say(g_autosave);
    cli_say("\n");
}

static void log_flush(app *a);

void app_message(app *a, ui_role role, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    va_end(ap);
    a->msg_role = role;
    if (a->log) fprintf(a->log, "message: %s\n", a->msg), log_flush(a);
}

/* Pushes the log's line out; a failed write (disk full, device gone) is told
 * once on the message line, stops the log and makes the exit status 1. */
static void log_flush(app *a) {
    if (fflush(a->log) == 0 && !ferror(a->log)) return;
    int e = errno ? errno : EIO;
    fclose(a->log); /* its unwritten bytes fail again: nothing more to learn */
    a->log = NULL;
    snprintf(a->log_error, sizeof a->log_error, "log %s: cannot write: %s; logging stopped", a->log_path,
             strerror(e));
    app_message(a, UI_ROLE_ERROR, "%s", a->log_error);
}

static void logf_(app *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void logf_(app *a, const char *fmt, ...) {
    if (!a->log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(a->log, fmt, ap);
    va_end(ap);
    fputc('\n', a->log);
    log_flush(a);
}

void app_token_label(const app *a, int32_t id, char *buf, size_t cap) {
    size_t bl;
    const char *b = gpt2_tokenizer_token_bytes(a->tok, id, &bl);
    size_t o = 0;
    if (!b) {
        snprintf(buf, cap, "<%d>", id);
        return;
    }
    if (id == gpt2_tokenizer_eot(a->tok)) {
        snprintf(buf, cap, "<eot>");
        return;
    }
    for (size_t i = 0; i < bl && o + 8 < cap;) {
        uint32_t cp;
        int nb = ui_utf8_decode(b + i, bl - i, &cp);
        if (cp == '\n') o += (size_t)snprintf(buf + o, cap - o, "\u21B5");
        else if (cp == ' ') o += (size_t)snprintf(buf + o, cap - o, "\u00B7");
        else if (cp == '\t') o += (size_t)snprintf(buf + o, cap - o, "\u2192");
        else if (cp < 0x20 || cp == 0xFFFD) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", (unsigned char)b[i]);
        else memcpy(buf + o, b + i, (size_t)nb), o += (size_t)nb;
        i += (size_t)nb;
    }
    buf[o] = '\0';
}

/* ---- attention store (hooks) ---- */

static size_t att_index(const app *a, int layer, int head, int pos) {
    int li = a->all_layers ? layer : 0;
    return (((size_t)li * (size_t)a->cfg->n_head + (size_t)head) * (size_t)a->n_ctx + (size_t)pos) * (size_t)a->n_ctx;
}

const float *app_att_row(const app *a, int layer, int head, int pos) {
    if (!a->att || pos < 0 || pos >= a->n_ctx || head < 0 || head >= a->cfg->n_head) return NULL;
    if (!a->all_layers && a->att_row_layer[pos] != layer) return NULL;
    return a->att + att_index(a, layer, head, pos);
}

static int hook_want_attention(void *ud, int layer, int head) {
    app *a = ud;
    return a->att && (a->all_layers || layer == a->layer);
}

static void hook_on_attention(void *ud, int layer, int head, int pos, const float *probs, int n_keys) {
    app *a = ud;
    if (pos >= a->n_ctx || n_keys > a->n_ctx) return;
    memcpy(a->att + att_index(a, layer, head, pos), probs, (size_t)n_keys * sizeof *probs);
    if (!a->all_layers && head == a->cfg->n_head - 1) a->att_row_layer[pos] = layer;
}

/* ---- confidence and snapshots ---- */

static void notes_sync_turns(app *a) {
    int n = gpt2_session_n_turns(a->s);
    if (n > a->turns_cap) {
        int cap = a->turns_cap ? a->turns_cap : 16;
        while (cap < n) cap *= 2;
        tok_note **tp = realloc(a->turn_notes, (size_t)cap * sizeof *tp);
        if (!tp) return;
        a->turn_notes = tp;
        int *np = realloc(a->turn_nnotes, (size_t)cap * sizeof *np);
        if (!np) return;
        a->turn_nnotes = np;
        int *cp = realloc(a->turn_capnotes, (size_t)cap * sizeof *cp);
        if (!cp) return;
        a->turn_capnotes = cp;
        for (int i = a->turns_cap; i < cap; i++) a->turn_notes[i] = NULL, a->turn_nnotes[i] = 0, a->turn_capnotes[i] = 0;
        a->turns_cap = cap;
    }
    for (int i = n; i < a->turns_cap; i++) a->turn_nnotes[i] = 0; /* turns removed (undo, reset) */
}

static void notes_push(app *a, int turn, float p, gpt2_token_origin origin) {
    notes_sync_turns(a);
    if (turn < 0 || turn >= a->turns_cap) return;
    if (a->turn_nnotes[turn] == a->turn_capnotes[turn]) {
        int cap = a->turn_capnotes[turn] ? 2 * a->turn_capnotes[turn] : 64;
        tok_note *np = realloc(a->turn_notes[turn], (size_t)cap * sizeof *np);
        if (!np) return;
        a->turn_notes[turn] = np;
        a->turn_capnotes[turn] = cap;
    }
    a->turn_notes[turn][a->turn_nnotes[turn]++] = (tok_note){p, (unsigned char)origin};
}

/* The candidates of earlier tokens live in the session (they survive drops
 * and /load); the latest one, and the cursor, start afresh. */
static void snaps_clear(app *a) {
    a->last_snap.valid = 0;
    a->heat_cursor = -1;
}

static void notes_clear_all(app *a) {
    for (int i = 0; i < a->turns_cap; i++) a->turn_nnotes[i] = 0;
}

/* ---- sampling knobs ---- */

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

void app_apply_sampling(app *a, int item, int dir, int big) {
    gpt2_sampler_params p = gpt2_session_sampler_params(a->s);
    float f = big ? 10.0f : 1.0f;
    switch (item) {
    case SP_TEMP: p.temperature = clampf(roundf((p.temperature + dir * 0.05f * f) * 100) / 100, 0, 5); break;
    case SP_TOPK: p.top_k = p.top_k + dir * (big ? 10 : 1); if (p.top_k < 0) p.top_k = 0; break;
    case SP_TOPP: p.top_p = clampf(roundf((p.top_p + dir * 0.01f * f) * 100) / 100, 0.01f, 1); break;
    case SP_MINP: p.min_p = clampf(roundf((p.min_p + dir * 0.01f * f) * 100) / 100, 0, 1); break;
    case SP_REP: p.repeat_penalty = clampf(roundf((p.repeat_penalty + dir * 0.05f * f) * 100) / 100, 0.05f, 5); break;
    case SP_MAXNEW: {
        int m = gpt2_session_max_new_tokens(a->s) + dir * (big ? 64 : 8);
        gpt2_session_set_max_new_tokens(a->s, m < 0 ? 0 : m);
        logf_(a, "set max-new %d", gpt2_session_max_new_tokens(a->s));
        return;
    }
    case SP_SEED: p.seed = p.seed + (uint64_t)(int64_t)(dir * (big ? 10 : 1)); break;
    case SP_DRAFTK: {
        int k = gpt2_session_draft_k(a->s) + dir * (big ? 4 : 1);
        k = k < 1 ? 1 : k > GPT2_SPEC_MAX_K ? GPT2_SPEC_MAX_K : k;
        gpt2_session_set_draft_k(a->s, k, NULL);
        logf_(a, "set draft-k %d", gpt2_session_draft_k(a->s));
        return;
    }
    default: return;
    }
    gpt2_session_set_sampler_params(a->s, p);
    logf_(a, "set temperature %.2f top-k %d top-p %.2f min-p %.2f repeat %.2f seed %llu", (double)p.temperature,
          p.top_k, (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty, (unsigned long long)p.seed);
}

void app_set_layer(app *a, int layer) {
    int n = a->cfg->n_layer;
    a->layer = ((layer % n) + n) % n;
}

void app_set_head(app *a, int head) {
    int n = a->cfg->n_head; /* heads 0..n-1, then n = the average */
    if (head < 0) head = head == -1 && a->head == 0 ? n : head; /* 0 - 1 -> average */
    int h = ((head % (n + 1)) + (n + 1)) % (n + 1);
    a->head = h == n ? -1 : h;
}

/* ---- session operations ---- */

static int progress_cb(void *ud, int done, int total) {
    app *a = ud;
    snprintf(a->prefill_msg, sizeof a->prefill_msg, "prefill %d/%d tokens  (Esc cancels)", done, total);
    if (!a->too_small) {
        pane *in = &a->panes[PANE_INPUT];
        if (in->win) in->ops->draw(in), wnoutrefresh(in->win), doupdate();
    }
    if (g_signal) return 1;
    wint_t ch;
    int r, cancel = 0;
    if (g_step_delay_ms > 0) { /* tests: slow prefill down too, still listening */
        wtimeout(stdscr, g_step_delay_ms);
        if (term_get_key(&ch) == OK && (ch == 27 || ch == 3)) cancel = 1;
    }
    nodelay(stdscr, TRUE);
    while ((r = term_get_key(&ch)) != ERR) {
        if (r == OK && (ch == 27 || ch == 3)) cancel = 1;
    }
    return cancel;
}

static void after_change(app *a) {
    notes_sync_turns(a);
    gpt2_session_stats st = gpt2_session_get_stats(a->s);
    if (st.notices != a->seen_notices) {
        a->seen_notices = st.notices;
        app_message(a, UI_ROLE_NOTICE, "%s", gpt2_session_notice(a->s));
        snaps_clear(a); /* positions moved */
    }
}

static const char *origin_name(gpt2_token_origin o) {
    switch (o) {
    case GPT2_TOKEN_ACCEPTED: return "accepted";
    case GPT2_TOKEN_CORRECTED: return "corrected";
    case GPT2_TOKEN_BONUS: return "bonus";
    default: return "sampled";
    }
}

static void finish_reply(app *a, const gpt2_session_token *t) {
    double dt = cli_now() - a->reply_t0;
    a->generating = 0;
    a->last_tps = dt > 0 && a->reply_tokens > 0 ? a->reply_tokens / dt : 0;
    gpt2_session_stats s = gpt2_session_get_stats(a->s);
    int n;
    gpt2_session_tokens(a->s, &n);
    int nt = gpt2_session_n_turns(a->s);
    gpt2_turn tr = {0};
    if (nt > 0) gpt2_session_turn(a->s, nt - 1, &tr);
    gpt2_draft_stats ds;
    gpt2_session_draft_stats(a->s, &ds, NULL);
    char draft[96] = "";
    if (ds.iterations > 0)
        snprintf(draft, sizeof draft, ", draft k%d r %.2f %.2f tok/pass", gpt2_session_draft_k(a->s), ds.r,
                 ds.tokens_per_pass);
    logf_(a, "reply: %d tokens (%s), %.1f tok/s, evaluated %d, context %d/%d%s", a->reply_tokens,
          gpt2_reply_end_name(t->end), a->last_tps, s.last_reply, n, a->n_ctx, draft);
    if (t->end == GPT2_REPLY_CONTEXT_FULL)
        app_message(a, UI_ROLE_NOTICE, "the reply was cut short: the context window of %d tokens is full "
                    "(the next message drops the oldest turns; /undo or /reset make room now)", a->n_ctx);
    if (a->log && tr.text) {
        fputs("reply-text: ", a->log);
        fwrite(tr.text, 1, tr.len, a->log);
        fputc('\n', a->log);
        log_flush(a);
    }
    after_change(a);
}

static void do_stop(app *a) {
    gpt2_session_token t;
    gpt2_error err;
    gpt2_session_stop(a->s, &t, &err);
    finish_reply(a, &t);
    app_message(a, UI_ROLE_NOTICE, "reply stopped (text kept)");
}

static void do_send(app *a, const char *text) {
    if (a->generating) do_stop(a); /* a message sent mid-reply ends the reply first */
    gpt2_error err;
    a->msg[0] = '\0';
    gpt2_status st = gpt2_session_send(a->s, text, strlen(text), progress_cb, a, &err);
    a->prefill_msg[0] = '\0';
    if (st == GPT2_CANCELLED) {
        app_message(a, UI_ROLE_NOTICE, "prefill cancelled; the message was not sent");
        return;
    }
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return;
    }
    after_change(a);
    gpt2_session_stats s = gpt2_session_get_stats(a->s);
    int n;
    gpt2_session_tokens(a->s, &n);
    logf_(a, "send: prefill %d tokens, context %d/%d", s.last_prefill, n, a->n_ctx);
    a->turn_prefill = s.last_prefill;
    a->generating = 1;
    a->reply_t0 = cli_now();
    a->reply_tokens = 0;
    a->heat_cursor = -1;
    a->conv_scroll = 0;
}

static void do_step(app *a) {
    gpt2_session_token t;
    gpt2_error err;
    gpt2_sampler_params params = gpt2_session_sampler_params(a->s);
    if (gpt2_session_step(a->s, &t, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        a->generating = 0;
        gpt2_session_stop(a->s, NULL, &err);
        return;
    }
    if (t.id >= 0) {
        token_snap *sn = &a->last_snap;
        sn->valid = 1;
        sn->chosen = t.id;
        sn->chosen_prob = t.prob;
        sn->params = params;
        sn->n = (int)gpt2_sampler_report(gpt2_session_sampler(a->s), sn->c, SNAP_K);
        char rej[32] = "";
        if (t.n_rejected) snprintf(rej, sizeof rej, ", %d drafts rejected", t.n_rejected);
        logf_(a, "token %d p %.3f kept %d temperature %.2f origin %s%s", t.id, (double)t.prob, t.kept,
              (double)params.temperature, origin_name(t.origin), rej);
        if (t.kept) {
            a->reply_tokens++;
            notes_push(a, gpt2_session_n_turns(a->s) - 1, t.prob, t.origin);
        }
    }
    if (t.done) finish_reply(a, &t);
    else after_change(a);
}

static int parse_num(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return !(errno || end == s || *end);
}

static void cmd_set(app *a, const char *name, const char *val) {
    double v;
    if (!name || !val || !parse_num(val, &v)) {
        app_message(a, UI_ROLE_ERROR, "usage: /set NAME VALUE (temperature top-k top-p min-p repeat-penalty "
                                      "repeat-last-n max-tokens seed draft_k)");
        return;
    }
    if (!strcmp(name, "draft_k") || !strcmp(name, "draft-k")) { /* from the next iteration, mid-reply too */
        gpt2_error err;
        if (v != floor(v) || v < 1 || v > GPT2_SPEC_MAX_K) {
            app_message(a, UI_ROLE_ERROR, "/set draft_k: K = %s is outside 1..%d", val, GPT2_SPEC_MAX_K);
        } else if (gpt2_session_set_draft_k(a->s, (int)v, &err) != GPT2_OK) {
            app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        } else {
            app_message(a, UI_ROLE_TEXT, "draft_k = %d%s", (int)v,
                        gpt2_session_draft_model(a->s) ? "" : " (no draft model: --draft DIR or /draft DIR)");
            logf_(a, "set draft-k %d", (int)v);
        }
        return;
    }
    if (!strcmp(name, "max-tokens") || !strcmp(name, "max-new") || !strcmp(name, "n")) {
        if (v != floor(v) || v < 0 || v > 1 << 20) { /* chat's -n takes the same */
            app_message(a, UI_ROLE_ERROR, "/set max-tokens: expected an integer in [0, %d], found '%s'", 1 << 20, val);
            return;
        }
        gpt2_session_set_max_new_tokens(a->s, (int)v);
        app_message(a, UI_ROLE_TEXT, "max-tokens = %d", gpt2_session_max_new_tokens(a->s));
        logf_(a, "set max-new %d", gpt2_session_max_new_tokens(a->s));
        return;
    }
    gpt2_sampler_params p = gpt2_session_sampler_params(a->s);
    const char *canon;
    char why[256];
    int r = cli_sampling_set(name, val, &p, &canon, why, sizeof why);
    if (r == 0) {
        app_message(a, UI_ROLE_ERROR, "/set: unknown parameter '%s' (temperature top-k top-p min-p repeat-penalty "
                                      "repeat-last-n max-tokens seed draft_k)", name);
        return;
    }
    if (r < 0) { /* refused with the range, as the command-line option refuses it */
        app_message(a, UI_ROLE_ERROR, "/set %s: %s", canon, why);
        return;
    }
    gpt2_session_set_sampler_params(a->s, p);
    p = gpt2_session_sampler_params(a->s);
    app_message(a, UI_ROLE_TEXT, "%s = %s", canon, val);
    logf_(a, "set temperature %.2f top-k %d top-p %.2f min-p %.2f repeat %.2f seed %llu", (double)p.temperature,
          p.top_k, (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty, (unsigned long long)p.seed);
}

static void cmd_template(app *a, const char *name) {
    gpt2_error err;
    gpt2_chat_template *own = NULL;
    const gpt2_chat_template *t = NULL;
    if (!name) {
        app_message(a, UI_ROLE_TEXT, "template: %s (built-in: transcript dialogpt raw; model; or a .json path)",
                    gpt2_session_template(a->s)->name);
        return;
    }
    if (a->generating) {
        app_message(a, UI_ROLE_ERROR, "stop the reply first (Esc)");
        return;
    }
    if (!strcmp(name, "model")) {
        if (gpt2_chat_template_for_model(a->model_dir, &own, &err) != GPT2_OK) {
            app_message(a, UI_ROLE_ERROR, "%s", err.msg);
            return;
        }
        t = own;
    } else if ((t = gpt2_chat_template_builtin(name)) == NULL) {
        if (gpt2_chat_template_load(name, &own, &err) != GPT2_OK) {
            app_message(a, UI_ROLE_ERROR, "%s", err.msg);
            return;
        }
        t = own;
    }
    gpt2_status st = gpt2_session_set_template(a->s, t, progress_cb, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "template switch cancelled" : err.msg);
    else {
        snaps_clear(a);
        app_message(a, UI_ROLE_TEXT, "template: %s", gpt2_session_template(a->s)->name);
        logf_(a, "template %s: evaluated %d", gpt2_session_template(a->s)->name, gpt2_session_get_stats(a->s).last_call);
    }
    gpt2_chat_template_free(own);
    after_change(a);
}

/* /draft [on|off|DIR]: draft mode (speculative sampling) on or off, or
 * another draft model (which must share the model's tokenizer). */
static void cmd_draft(app *a, const char *arg) {
    gpt2_error err;
    if (!arg) {
        if (!a->draft) app_message(a, UI_ROLE_TEXT, "draft: none (/draft DIR loads a draft model)");
        else
            app_message(a, UI_ROLE_TEXT, "draft: %s, k %d, %s", a->draft_name, gpt2_session_draft_k(a->s),
                        gpt2_session_draft_enabled(a->s) ? "on" : "off");
        return;
    }
    if (!strcmp(arg, "on") || !strcmp(arg, "off")) {
        int on = !strcmp(arg, "on");
        if (!a->draft) {
            app_message(a, UI_ROLE_ERROR, "draft: no draft model (/draft DIR or --draft DIR loads one)");
            return;
        }
        if (gpt2_session_set_draft_enabled(a->s, on, &err) != GPT2_OK) {
            app_message(a, UI_ROLE_ERROR, "%s", err.msg);
            return;
        }
        app_message(a, UI_ROLE_TEXT, "draft %s: %s", a->draft_name, on ? "on" : "off");
        logf_(a, "draft %s", on ? "on" : "off");
        return;
    }
    /* A draft file truncated while it loads would end the process (SIGBUS):
       the conversation is saved first, and the handler says where. */
    if (gpt2_session_n_turns(a->s) > 0 && input_state_path("autosave.json", g_autosave, sizeof g_autosave) &&
        gpt2_session_save(a->s, g_autosave, &err) != GPT2_OK)
        g_autosave[0] = '\0';
    gpt2_model *m;
    cli_mark_loading(arg);
    gpt2_status lst = gpt2_model_load(arg, &m, &err);
    cli_mark_loading(NULL);
    g_autosave[0] = '\0';
    if (lst != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return;
    }
    if (gpt2_session_set_draft(a->s, m, gpt2_session_draft_k(a->s), &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        gpt2_model_free(m);
        return;
    }
    gpt2_model_free(a->draft); /* the session let go of it */
    a->draft = m;
    snprintf(a->draft_name, sizeof a->draft_name, "%s", gpt2_model_name(m));
    app_message(a, UI_ROLE_TEXT, "draft: %s, k %d, on", a->draft_name, gpt2_session_draft_k(a->s));
    logf_(a, "draft %s k %d", a->draft_name, gpt2_session_draft_k(a->s));
}

/* A path typed in the chat with its leading ~ or ~user expanded, as a shell
 * would have (no shell sees it): into buf, else arg as it is. */
static char *expand_home(char *arg, char *buf, size_t cap) {
    if (!arg || arg[0] != '~') return arg;
    const char *rest = strchr(arg, '/');
    size_t ul = rest ? (size_t)(rest - arg - 1) : strlen(arg + 1);
    const char *home = ul == 0 ? getenv("HOME") : NULL;
    char user[256];
    if (!home || !*home) {
        if (ul >= sizeof user) return arg;
        memcpy(user, arg + 1, ul);
        user[ul] = '\0';
        struct passwd *pw = ul ? getpwnam(user) : getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (!home || snprintf(buf, cap, "%s%s", home, rest ? rest : "") >= (int)cap) return arg;
    return buf;
}

/* /load of a conversation another model wrote: it would be re-encoded, and
 * its template and sampling settings would replace these. The first /load
 * says so, naming both models; the same /load again goes ahead. 0: not now
 * (a message says why). */
static int other_model_confirmed(app *a, const char *path) {
    char saved[128];
    int n_vocab;
    gpt2_error err;
    if (gpt2_session_file_model(path, saved, sizeof saved, &n_vocab, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return 0;
    }
    if (!strcmp(saved, a->model_name) || !strcmp(a->pending_load, path)) {
        a->pending_load[0] = '\0';
        return 1;
    }
    snprintf(a->pending_load, sizeof a->pending_load, "%s", path);
    char shown[160];
    gpt2_text_escape(saved, strlen(saved), shown, sizeof shown);
    app_message(a, UI_ROLE_NOTICE, "%s was saved with model '%s', and this chat runs '%s': its text would be "
                "re-encoded and its template and sampling settings would replace these. /load it again to go ahead.",
                path, shown, a->model_name);
    return 0;
}

/* ---- the slash commands: one table, from which /help's list is drawn ---- */

static void c_quit(app *a, char *x, char *y) { (void)x, (void)y, a->quit = 1; }
static void c_help(app *a, char *x, char *y) { (void)x, (void)y, a->help = 1; }

static void c_conf(app *a, char *x, char *y) {
    (void)x, (void)y;
    a->conf_view = !a->conf_view;
    app_message(a, UI_ROLE_TEXT, "confidence view %s", a->conf_view ? "on (F2 or /conf turns it off)" : "off");
}

static void c_reset(app *a, char *x, char *y) {
    gpt2_error err;
    (void)x, (void)y;
    if (a->generating) do_stop(a);
    if (gpt2_session_reset(a->s, &err) != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    else app_message(a, UI_ROLE_TEXT, "conversation cleared"), snaps_clear(a), notes_clear_all(a), logf_(a, "reset");
    after_change(a);
}

static void c_undo(app *a, char *x, char *y) {
    gpt2_error err;
    (void)x, (void)y;
    if (a->generating) do_stop(a);
    if (gpt2_session_undo(a->s, &err) != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    else app_message(a, UI_ROLE_TEXT, "last exchange removed"), logf_(a, "undo");
    after_change(a);
    a->last_snap.valid = 0;
}

static void c_regen(app *a, char *x, char *y) {
    gpt2_error err;
    (void)x, (void)y;
    if (a->generating) do_stop(a);
    gpt2_status st = gpt2_session_regen(a->s, progress_cb, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "regen cancelled" : err.msg);
    } else {
        notes_sync_turns(a);
        int nt = gpt2_session_n_turns(a->s);
        if (nt > 0 && nt - 1 < a->turns_cap) a->turn_nnotes[nt - 1] = 0;
        a->generating = 1;
        a->reply_t0 = cli_now();
        a->reply_tokens = 0;
        a->turn_prefill = gpt2_session_get_stats(a->s).last_call;
        a->heat_cursor = -1;
        app_message(a, UI_ROLE_TEXT, "regenerating the last reply");
        logf_(a, "regen: evaluated %d", gpt2_session_get_stats(a->s).last_call);
    }
    after_change(a);
}

static void c_set(app *a, char *name, char *val) { cmd_set(a, name, val); }

static void c_layer(app *a, char *arg, char *y) {
    double v;
    (void)y;
    if (!arg || !parse_num(arg, &v) || v < 0 || v >= a->cfg->n_layer || v != floor(v)) {
        app_message(a, UI_ROLE_ERROR, "usage: /layer N (0..%d)", a->cfg->n_layer - 1);
        return;
    }
    app_set_layer(a, (int)v);
    app_message(a, UI_ROLE_TEXT, "inspector: layer %d (layers 0-%d)", a->layer, a->cfg->n_layer - 1);
    logf_(a, "layer %d", a->layer);
}

static void c_head(app *a, char *arg, char *y) {
    double v;
    (void)y;
    if (arg && (!strcmp(arg, "avg") || !strcmp(arg, "average"))) {
        a->head = -1;
        app_message(a, UI_ROLE_TEXT, "inspector: the average of the %d heads", a->cfg->n_head);
        logf_(a, "head avg");
    } else if (!arg || !parse_num(arg, &v) || v < 0 || v >= a->cfg->n_head || v != floor(v)) {
        app_message(a, UI_ROLE_ERROR, "usage: /head N (0..%d) or /head avg", a->cfg->n_head - 1);
    } else {
        a->head = (int)v;
        app_message(a, UI_ROLE_TEXT, "inspector: head %d (heads 0-%d)", a->head, a->cfg->n_head - 1);
        logf_(a, "head %d", a->head);
    }
}

static void c_theme(app *a, char *arg, char *y) {
    ui_theme th;
    char e[512];
    (void)y;
    if (!arg) app_message(a, UI_ROLE_TEXT, "theme: %s (bundled: dark light high-contrast)", term_theme()->name);
    else if (ui_theme_load(arg, a->themes_dir, &th, e, sizeof e) != 0) app_message(a, UI_ROLE_ERROR, "%s", e);
    else term_set_theme(&th), app_message(a, UI_ROLE_TEXT, "theme: %s", th.name), clearok(curscr, TRUE);
}

static void c_template(app *a, char *arg, char *y) { (void)y, cmd_template(a, arg); }
static void c_draft(app *a, char *arg, char *y) { (void)y, cmd_draft(a, arg); }

static void c_save(app *a, char *path, char *y) {
    gpt2_error err;
    (void)y;
    if (!path) app_message(a, UI_ROLE_ERROR, "usage: /save FILE");
    else if (gpt2_session_save(a->s, path, &err) != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    else app_message(a, UI_ROLE_TEXT, "saved to %s", path), logf_(a, "saved %s", path);
}

static void c_load(app *a, char *path, char *y) {
    gpt2_error err;
    (void)y;
    if (!path) {
        app_message(a, UI_ROLE_ERROR, "usage: /load FILE");
        return;
    }
    if (!other_model_confirmed(a, path)) return;
    if (a->generating) do_stop(a);
    gpt2_status st = gpt2_session_load(a->s, path, progress_cb, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "load cancelled" : err.msg);
    } else {
        snaps_clear(a);
        notes_clear_all(a);
        int n;
        gpt2_session_tokens(a->s, &n);
        app_message(a, UI_ROLE_TEXT, "loaded %s (%d turns, %d tokens)", path, gpt2_session_n_turns(a->s), n);
        logf_(a, "loaded %s: %d turns, %d tokens", path, gpt2_session_n_turns(a->s), n);
        a->turn_prefill = gpt2_session_get_stats(a->s).last_call, a->reply_tokens = 0;
        if (gpt2_session_replying(a->s)) a->generating = 1, a->reply_t0 = cli_now();
    }
    after_change(a);
}

static const app_command commands[] = {
    {"/help", "/?", "", "this help", 0, c_help},
    {"/reset", NULL, "", "empty the conversation (template, knobs and RNG kept)", 0, c_reset},
    {"/regen", NULL, "", "sample the last reply again", 0, c_regen},
    {"/undo", NULL, "", "remove the last exchange", 0, c_undo},
    {"/set", NULL, "NAME VALUE",
     "temperature top-k top-p min-p repeat-penalty repeat-last-n max-tokens seed draft_k (the ranges of the "
     "command-line options)", 0, c_set},
    {"/layer", NULL, "N", "the inspector's layer", 0, c_layer},
    {"/head", NULL, "N|avg", "the inspector's head, or the average of the heads", 0, c_head},
    {"/conf", NULL, "", "confidence view on/off (as F2)", 0, c_conf},
    {"/theme", NULL, "NAME|PATH", "dark light high-contrast, or a .theme file", 1, c_theme},
    {"/template", NULL, "NAME|PATH", "transcript dialogpt raw model, or a chat_template.json", 1, c_template},
    {"/save", NULL, "FILE", "the session as JSON (~ is your home directory)", 1, c_save},
    {"/load", NULL, "FILE", "a saved session (another model's: asks first)", 1, c_load},
    {"/draft", NULL, "on|off|DIR", "speculative sampling with a draft model", 1, c_draft},
    {"/quit", "/q", "", "quit (also /exit, Ctrl-D on an empty line)", 0, c_quit},
    {"/exit", NULL, NULL, NULL, 0, c_quit}, /* NULL help: an alias not listed */
};

const app_command *app_commands(int *n) {
    *n = (int)(sizeof commands / sizeof *commands);
    return commands;
}

static void run_command(app *a, char *line) {
    char *save = NULL, home_buf[PATH_MAX];
    char *cmd = strtok_r(line, " \t", &save);
    char *arg1 = strtok_r(NULL, " \t", &save);
    char *arg2 = strtok_r(NULL, " \t", &save);
    a->msg[0] = '\0'; /* an earlier message is stale now; each command says what it did */
    if (strcmp(cmd, "/load")) a->pending_load[0] = '\0'; /* a confirmation is the very next /load */
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        const app_command *c = &commands[i];
        if (strcmp(cmd, c->name) && (!c->alias || strcmp(cmd, c->alias))) continue;
        if (c->path_arg) arg1 = expand_home(arg1, home_buf, sizeof home_buf);
        c->fn(a, arg1, arg2);
        return;
    }
    app_message(a, UI_ROLE_ERROR, "unknown command %s (F1 or /help lists them)", cmd);
}

static void handle_line(app *a, char *line) {
    if (!line) { /* Ctrl-D on an empty line */
        a->quit = 1;
        return;
    }
    size_t n = strlen(line);
    if (n == 0) return;
    input_history_add(line);
    if (line[0] == '/') {
        char *copy = strdup(line);
        if (copy) run_command(a, copy);
        free(copy);
        return;
    }
    do_send(a, line);
}

/* ---- keys ---- */

/* One key (code from term_get_key). Returns nonzero when the screen needs a redraw. */
static int handle_key(app *a, int key, int is_code) {
    if (is_code && key == KEY_RESIZE) {
        screen_layout(a);
        clearok(curscr, TRUE);
        return 1;
    }
    if (a->help) { /* the arrows scroll it; any other key closes it */
        if (!(is_code && app_help_scroll(a, key))) a->help = 0, a->help_top = 0;
        return 1;
    }
    if (a->too_small) {
        if (!is_code && key == 3) a->quit = 1; /* Ctrl-C still quits */
        return 1;
    }
    /* Escape: alone, stop; followed at once by a key, an Alt combination */
    if (!is_code && key == 27) {
        wint_t nx;
        nodelay(stdscr, TRUE);
        int r = term_get_key(&nx);
        if (r == OK && (nx == '\r' || nx == '\n')) {
            if (a->focus == PANE_INPUT) input_insert_newline();
            return 1;
        }
        if (r == OK) {
            if (a->focus == PANE_INPUT) input_meta_key((int)nx);
            return 1;
        }
        if (r == KEY_CODE_YES) return handle_key(a, (int)nx, 1);
        if (a->generating) do_stop(a);
        else if (a->focus != PANE_INPUT) a->focus = PANE_INPUT;
        return 1;
    }
    if (!is_code && key == 3) { /* Ctrl-C */
        if (a->generating) do_stop(a);
        else if (!input_empty()) input_clear(), a->msg[0] = '\0';
        else app_message(a, UI_ROLE_NOTICE, "Ctrl-C stops a reply and clears the line; /quit (or Ctrl-D on an empty line) quits");
        return 1;
    }
    if (is_code) {
        switch (key) {
        case KEY_F(1): a->help = 1; return 1;
        case KEY_F(2): a->conf_view = !a->conf_view; return 1;
        case KEY_F(3): app_set_layer(a, a->layer - 1); return 1;
        case KEY_F(4): app_set_layer(a, a->layer + 1); return 1;
        case KEY_F(5): app_set_head(a, a->head - 1); return 1;
        case KEY_F(6): app_set_head(a, a->head + 1); return 1;
        case KEY_F(7): a->head = a->head < 0 ? 0 : -1; return 1;
        case KEY_BTAB: screen_focus_next(a, -1); return 1;
        case KEY_MOUSE: {
            MEVENT ev;
            if (getmouse(&ev) == OK) {
                if (ev.bstate & BUTTON4_PRESSED) a->conv_scroll += 3;
                else if (ev.bstate & BUTTON5_PRESSED) a->conv_scroll -= 3;
            }
            return 1;
        }
        default: break;
        }
    } else {
        if (key == '\t') { screen_focus_next(a, +1); return 1; }
        if (key == 12) { clearok(curscr, TRUE); return 1; } /* Ctrl-L */
        if (key == '?' && (a->focus != PANE_INPUT || input_empty())) { a->help = 1; return 1; }
    }
    pane *fp = &a->panes[a->focus];
    if (a->focus != PANE_INPUT) {
        int r = fp->ops->key(fp, key, is_code);
        if (r & PANE_QUIT) a->quit = 1;
        if (r) return 1;
        if (!is_code && key >= ' ') a->focus = PANE_INPUT; /* typing goes back to the input */
    }
    if (is_code && (key == KEY_PPAGE || key == KEY_NPAGE)) {
        pane *cp = &a->panes[PANE_CONV];
        return cp->ops->key(cp, key, 1) ? 1 : 0;
    }
    if (a->focus == PANE_INPUT || !is_code) {
        a->focus = PANE_INPUT;
        if (!is_code && key == '\n') { /* Ctrl-J: a new line in the message */
            input_insert_newline();
            return 1;
        }
        input_key(key, is_code);
        int got;
        char *line = input_take_line(&got);
        if (got) handle_line(a, line);
        free(line);
        return 1;
    }
    return 0;
}

/* ---- setup ---- */

static void find_themes_dir(app *a) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *cands[3];
    char c1[PATH_MAX + 16], c2[PATH_MAX + 16];
    int nc = 0;
    if (n > 0) {
        exe[n] = '\0';
        char *sl = strrchr(exe, '/');
        if (sl) {
            *sl = '\0';
            snprintf(c1, sizeof c1, "%s/themes", exe);
            snprintf(c2, sizeof c2, "%s/../themes", exe);
            cands[nc++] = c1;
            cands[nc++] = c2;
        }
    }
    cands[nc++] = "themes";
    for (int i = 0; i < nc; i++) {
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/dark.theme", cands[i]);
        if (access(probe, R_OK) == 0) {
            snprintf(a->themes_dir, sizeof a->themes_dir, "%s", cands[i]);
            return;
        }
    }
    snprintf(a->themes_dir, sizeof a->themes_dir, "themes");
}

/* --help: on stdout, status 0; a usage error: on stderr, EXIT_USAGE */
static int usage(int help) {
    fputs("usage: gptscope chat [-m DIR] [--template NAME|FILE] [--theme NAME|PATH] [--log FILE]\n"
          "                     [-n N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]\n"
          "                     [--repeat-penalty R] [--repeat-last-n N] [--seed S]\n"
          "                     [--draft DIR [--draft-k K]] [--quantize q8] [--threads N]\n"
          "  The full-screen chat: streams replies, sampling knobs that act mid-reply,\n"
          "  live attention heatmaps and next-token candidates. F1 in the app lists the keys.\n"
          "  --template NAME    transcript, dialogpt, raw, or a chat_template.json file\n"
          "                     (default: the model's chat_template.json, else transcript)\n"
          "  --theme NAME|PATH  dark (default), light, high-contrast, or a theme file\n"
          "  --log FILE         append what each turn computed (prefill/reply tokens, tok/s)\n"
          "  -n N               max new tokens per reply, 0 = until the context is full (default 256)\n"
          "  --draft DIR        speculative sampling: the model in DIR (same tokenizer) drafts,\n"
          "                     the chat model checks K tokens per pass (/draft on|off in the app)\n"
          "  --draft-k K        draft tokens per iteration, 1..16 (default 4; /set draft_k K)\n"
          "  --quantize q8      run the chat model with 8-bit weights (converted at load)\n"
          "  --threads N        worker threads (default: one per CPU; replies do not depend on it)\n"
          "  sampling options as for generate (default seed: random)\n",
          help ? stdout : stderr);
    return help ? EXIT_OK : EXIT_USAGE;
}

static void app_free_panes(app *a) {
    for (int i = 0; i < N_PANES; i++) {
        pane *p = &a->panes[i];
        if (p->ops && p->win) p->ops->free(p);
        if (p->win) delwin(p->win), p->win = NULL;
    }
}

static void app_free(app *a) {
    if (a->s) gpt2_session_free(a->s);
    gpt2_model_free(a->model);
    gpt2_model_free(a->draft);
    free(a->att);
    free(a->att_row_layer);
    for (int i = 0; i < a->turns_cap; i++) free(a->turn_notes[i]);
    free(a->turn_notes);
    free(a->turn_nnotes);
    free(a->turn_capnotes);
    if (a->log && fclose(a->log) != 0 && !a->log_error[0])
        snprintf(a->log_error, sizeof a->log_error, "log %s: cannot write: %s", a->log_path, strerror(errno));
    a->log = NULL;
}

int cmd_chat(int argc, char **argv) {
    enum { O_TEMPLATE = 256, O_THEME, O_LOG, O_DRAFT, O_DRAFT_K };
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"n-tokens", required_argument, 0, 'n'},
                                         CLI_SAMPLING_OPTIONS,
                                         {"template", required_argument, 0, O_TEMPLATE},
                                         {"theme", required_argument, 0, O_THEME},
                                         {"log", required_argument, 0, O_LOG},
                                         {"draft", required_argument, 0, O_DRAFT},
                                         {"draft-k", required_argument, 0, O_DRAFT_K},
                                         {"quantize", required_argument, 0, CLI_OPT_QUANTIZE},
                                         {"threads", required_argument, 0, CLI_OPT_THREADS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *mdir = NULL, *tmpl_name = NULL, *theme_name = NULL, *log_path = NULL, *draft_dir = NULL,
               *quantize = NULL;
    long n_new = 256, draft_k = 4;
    int draft_k_given = 0, n_threads = 0;
    int c, seeded = 0;
    gpt2_sampler_params sp = gpt2_sampler_default_params();
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mdir = optarg; break;
        case 'n': if (!cli_parse_int("-n", optarg, 0, 1 << 20, &n_new)) return EXIT_USAGE; break;
        case O_TEMPLATE: tmpl_name = optarg; break;
        case O_THEME: theme_name = optarg; break;
        case O_LOG: log_path = optarg; break;
        case O_DRAFT: draft_dir = optarg; break;
        case O_DRAFT_K:
            if (!cli_parse_int("--draft-k", optarg, 1, GPT2_SPEC_MAX_K, &draft_k)) return EXIT_USAGE;
            draft_k_given = 1;
            break;
        case CLI_OPT_QUANTIZE: if (!cli_quantize_option(optarg, &quantize)) return EXIT_USAGE; break;
        case CLI_OPT_THREADS: if (!cli_threads_option(optarg, &n_threads)) return EXIT_USAGE; break;
        case 'h': return usage(1);
        default: {
            int r = cli_sampling_option(c, optarg, &sp, &seeded);
            if (r < 0) return EXIT_USAGE;
            if (r == 0) return cli_option_error(c, argv, ""), usage(0);
        }
        }
    }
    if (cli_positional("", "chat", argc, argv, 0, "") != EXIT_OK) return usage(0);
    if (draft_k_given && !draft_dir) {
        cli_error("--draft-k needs --draft DIR");
        return EXIT_USAGE;
    }
    if (!seeded) sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    setlocale(LC_ALL, "");

    static app A;
    app *a = &A;
    memset(a, 0, sizeof *a);
    a->layer = 0;
    a->head = 0;
    a->heat_cursor = -1;
    a->focus = PANE_INPUT;
    find_themes_dir(a);

    ui_theme theme;
    char e[1024];
    if (ui_theme_load(theme_name ? theme_name : "dark", a->themes_dir, &theme, e, sizeof e) != 0) {
        if (theme_name) {
            cli_error("%s", e);
            return EXIT_ERR;
        }
        ui_theme_default(&theme); /* the bundled file is missing: use the built-in copy */
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        cli_error("chat needs a terminal (stdin and stdout must be TTYs)");
        return EXIT_ERR;
    }
    gpt2_error log_err;
    if (log_path && gpt2_fileio_open_append(log_path, &a->log, &log_err) != GPT2_OK) {
        cli_error("%s", log_err.msg);
        return EXIT_ERR;
    }
    a->log_path = log_path;

    int rc = EXIT_ERR;
    gpt2_error err;
    gpt2_chat_template *tmpl = NULL;
    a->model_dir = cli_model_dir(mdir);
    if (!(a->model = cli_load_model_as(a->model_dir, quantize))) goto out;
    a->tok = gpt2_model_tokenizer(a->model);
    a->cfg = gpt2_model_config(a->model);
    snprintf(a->model_name, sizeof a->model_name, "%s", gpt2_model_name(a->model));
    if (tmpl_name) {
        const gpt2_chat_template *b = gpt2_chat_template_builtin(tmpl_name);
        gpt2_status st = b ? gpt2_chat_template_copy(b, &tmpl, &err) : gpt2_chat_template_load(tmpl_name, &tmpl, &err);
        if (st != GPT2_OK) {
            cli_error("%s", err.msg);
            goto out;
        }
    } else if (gpt2_chat_template_for_model(a->model_dir, &tmpl, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    gpt2_session_params ps = gpt2_session_default_params();
    ps.sampler = sp;
    ps.max_new_tokens = (int)n_new;
    ps.chat_template = tmpl;
    ps.context.n_threads = n_threads;
    /* prefill in chunks of at most a quarter of the context (64 at most): progress
       shows and Esc cancels between them */
    int n_ctx_model = a->cfg->n_ctx;
    ps.context.n_batch = n_ctx_model / 4 < 1 ? 1 : n_ctx_model / 4 > 64 ? 64 : n_ctx_model / 4;
    gpt2_status sst = gpt2_session_new(a->model, ps, &a->s, &err);
    if (sst == GPT2_ERR_CONTEXT_FULL && !tmpl_name) {
        /* a model too small for its default template's preamble (models/reverse:
           16 positions) still chats, on the raw template, and says so */
        const char *wanted = tmpl->name;
        ps.chat_template = gpt2_chat_template_builtin("raw");
        if ((sst = gpt2_session_new(a->model, ps, &a->s, &err)) == GPT2_OK)
            snprintf(a->msg, sizeof a->msg, "template raw: the %.80s template's preamble does not fit the %d positions "
                     "of %.80s (--template chooses another)", wanted, a->cfg->n_ctx, a->model_name);
    }
    if (sst != GPT2_OK) {
        cli_error("%s%s", err.msg, sst == GPT2_ERR_CONTEXT_FULL ? " (--template raw has no preamble)" : "");
        goto out;
    }
    if (draft_dir) { /* a bad or mismatched draft fails here, before the terminal is touched */
        if (!(a->draft = cli_load_model(draft_dir))) goto out;
        if (gpt2_session_set_draft(a->s, a->draft, (int)draft_k, &err) != GPT2_OK) {
            cli_error("%s", err.msg);
            goto out;
        }
        snprintf(a->draft_name, sizeof a->draft_name, "%s", gpt2_model_name(a->draft));
    }
    a->n_ctx = gpt2_session_n_ctx(a->s);
    size_t per_layer = (size_t)a->cfg->n_head * (size_t)a->n_ctx * (size_t)a->n_ctx * sizeof(float);
    a->all_layers = per_layer * (size_t)a->cfg->n_layer <= ATT_BUDGET;
    size_t att_layers = a->all_layers ? (size_t)a->cfg->n_layer : 1;
    a->att = calloc(att_layers * per_layer / sizeof(float), sizeof(float)); /* (att_layers, n_head, n_ctx, n_ctx) */
    a->att_row_layer = malloc((size_t)a->n_ctx * sizeof *a->att_row_layer);
    if (!a->att || !a->att_row_layer) {
        cli_error("out of memory for the inspector's buffers");
        goto out;
    }
    for (int i = 0; i < a->n_ctx; i++) a->att_row_layer[i] = -1;
    gpt2_hooks hooks = {.user_data = a, .want_attention = hook_want_attention, .on_attention = hook_on_attention};
    gpt2_session_set_hooks(a->s, &hooks);
    logf_(a, "start: model %s (%s), template %s, n_ctx %d%s%s", a->model_name,
          gpt2_dtype_name(gpt2_model_dtype(a->model)), gpt2_session_template(a->s)->name, a->n_ctx,
          a->draft ? ", draft " : "", a->draft ? a->draft_name : "");

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    /* tests only: wait this long between tokens and prefill batches (keys are still
       read while waiting), so that the tmux tests can act in the middle of a reply */
    const char *delay_env = getenv("GPTSCOPE_TEST_STEP_DELAY_MS");
    g_step_delay_ms = delay_env ? atoi(delay_env) : 0;
    if (term_init(&theme, e, sizeof e) != 0) {
        cli_error("%s", e);
        goto out;
    }
    cli_on_fatal_signal(emergency);
    const pane_ops *ops[N_PANES] = {&conv_pane_ops, &sampling_pane_ops, &inspector_pane_ops, &input_pane_ops,
                                    &status_pane_ops};
    for (int i = 0; i < N_PANES; i++) a->panes[i] = (pane){.ops = ops[i], .a = a};
    input_setup(a);
    screen_layout(a);
    screen_draw(a);

    /* tests only: wait this long between tokens (keys are still read while waiting),
       so that the tmux tests can act in the middle of a reply of the tiny model */
    unsigned seen_invalid = 0;
    while (!a->quit && !g_signal) {
        int dirty = 0;
        wint_t ch;
        int r;
        /* waiting: block up to 100 ms for a key; generating: only take what is there */
        if (a->generating && g_step_delay_ms <= 0) nodelay(stdscr, TRUE);
        else nodelay(stdscr, FALSE), wtimeout(stdscr, a->generating ? g_step_delay_ms : 100);
        while ((r = term_get_key(&ch)) != ERR) {
            dirty |= handle_key(a, (int)ch, r == KEY_CODE_YES);
            if (a->quit || g_signal) break;
            nodelay(stdscr, TRUE);
        }
        if (term_invalid_bytes() != seen_invalid) {
            seen_invalid = term_invalid_bytes();
            app_message(a, UI_ROLE_NOTICE, "the input held bytes that are not UTF-8: each is shown and sent as \uFFFD (U+FFFD)");
            dirty = 1;
        }
        if (a->quit || g_signal) break;
        if (a->generating) {
            do_step(a);
            dirty = 1;
        }
        if (dirty) screen_draw(a);
    }
    if (a->generating) do_stop(a);
    if (g_signal) logf_(a, "signal %d: quitting", (int)g_signal);
    logf_(a, "quit");
    rc = g_signal == SIGINT || g_signal == SIGTERM ? 128 + (int)g_signal : EXIT_OK;
    if (g_signal == SIGHUP) rc = 128 + SIGHUP;
out:
    if (term_active()) app_free_panes(a), input_teardown();
    term_end();
    gpt2_chat_template_free(tmpl);
    app_free(a);
    if (a->log_error[0]) { /* told on screen when it happened; the terminal is back now */
        cli_error("%s", a->log_error);
        if (rc == EXIT_OK) rc = EXIT_ERR;
    }
    return rc;
}
