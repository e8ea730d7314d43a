/* actions.c — what keys and commands do to the session: send a message, run
 * one step of the reply, stop it; and what every action reports through: the
 * message line above the input and the --log file. The inspector's store is
 * fed here (the latest candidates, one note per kept token) and kept in step
 * with the session's turns and tokens. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "ui/app.h"

static void log_flush(app *a);

static void set_message(app *a, ui_role role, const char *fmt, va_list ap) {
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    a->msg_role = role;
    a->msg_while_reply = 0;
    if (a->log) fprintf(a->log, "message: %s\n", a->msg), log_flush(a);
}

void app_message(app *a, ui_role role, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(a, role, fmt, ap);
    va_end(ap);
}

void app_reply_message(app *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(a, UI_ROLE_TEXT, fmt, ap);
    va_end(ap);
    a->msg_while_reply = 1;
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

void app_log(app *a, const char *fmt, ...) {
    if (!a->log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(a->log, fmt, ap);
    va_end(ap);
    fputc('\n', a->log);
    log_flush(a);
}

void app_log_sampling(app *a) {
    gpt2_sampler_params p = gpt2_session_sampler_params(a->s);
    app_log(a, "set temperature %.2f top-k %d top-p %.2f min-p %.2f repeat %.2f seed %llu", (double)p.temperature,
            p.top_k, (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty, (unsigned long long)p.seed);
}

/* The reply's text as it stands, on a line of its own. */
static void log_reply_text(app *a, const char *text, size_t len) {
    if (!a->log || !text) return;
    fputs("reply-text: ", a->log);
    fwrite(text, 1, len, a->log);
    fputc('\n', a->log);
    log_flush(a);
}

void app_token_label(const app *a, int32_t id, char *buf, size_t cap) {
    size_t bl;
    const char *b = gpt2_tokenizer_token_bytes(a->tok, id, &bl);
    if (!b) snprintf(buf, cap, "<%d>", id);
    else gpt2_token_escape(b, bl, buf, cap);
}

int app_progress(void *ud, int done, int total) {
    app *a = ud;
    snprintf(a->prefill_msg, sizeof a->prefill_msg, "%s %d/%d tokens  (Esc cancels)",
             a->progress_what ? a->progress_what : "prefill", done, total);
    pane *in = a->panes[PANE_INPUT];
    if (!a->too_small && in && in->win) in->ops->draw(in), wnoutrefresh(in->win), doupdate();
    if (*a->signalled) return 1;
    /* Esc and Ctrl-C cancel; every other key (typing ahead, a paste) is kept
       for when the prefill is over, in order */
    static int pasting; /* inside a paste: its Esc and Ctrl-C bytes are text */
    wint_t ch;
    int r, cancel = 0;
    if (a->step_delay_ms > 0) wtimeout(stdscr, a->step_delay_ms); /* tests: slow prefill down too, still listening */
    else nodelay(stdscr, TRUE);
    while ((r = term_get_fresh_key(&ch)) != ERR) {
        if (r == KEY_CODE_YES && (ch == TERM_KEY_PASTE_BEGIN || ch == TERM_KEY_PASTE_END))
            pasting = ch == TERM_KEY_PASTE_BEGIN;
        if (!pasting && r == OK && (ch == 27 || ch == 3)) cancel = 1;
        else term_defer_key(ch, r);
        nodelay(stdscr, TRUE);
    }
    return cancel;
}

void app_forget_latest(app *a) {
    istore_clear_last(a->store);
    a->cmp_n_tok = -1;
    inspector_follow_newest(a->panes[PANE_INSPECTOR]);
}

void app_after_change(app *a) {
    a->keep_dirty = 1;
    int n_tok;
    gpt2_session_tokens(a->s, &n_tok);
    istore_notes_sync(a->store, gpt2_session_n_turns(a->s));
    istore_truncate(a->store, n_tok);
    gpt2_session_stats st = gpt2_session_get_stats(a->s);
    if (st.notices != a->seen_notices) {
        a->seen_notices = st.notices;
        app_message(a, UI_ROLE_NOTICE, "%s", gpt2_session_notice(a->s));
        app_forget_latest(a); /* positions moved */
    }
}

void app_keep(app *a) {
    gpt2_error err;
    const gpt2_session *chat = a->prompt_mode ? a->other_s : a->s;
    if (!chat) return;
    if (!a->keep_dirty && !a->keep.path[0] && a->continued_from[0]) return; /* as continued: kept there already */
    if (state_keep(&a->keep, chat, &err) == GPT2_OK) {
        a->keep_error[0] = '\0';
        a->keep_dirty = 0;
        return;
    }
    if (!strcmp(a->keep_error, err.msg)) return; /* told already */
    snprintf(a->keep_error, sizeof a->keep_error, "%s", err.msg);
    app_message(a, UI_ROLE_ERROR, "%s (/save FILE keeps it elsewhere)", err.msg);
    app_log(a, "%s", err.msg);
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
    double dt = a->host->now() - a->reply_t0;
    a->generating = 0;
    if (a->msg_while_reply) a->msg[0] = '\0', a->msg_while_reply = 0;
    if (a->restore_max_new >= 0) { /* /generate N's limit was for that reply only */
        gpt2_session_set_max_new_tokens(a->s, a->restore_max_new);
        a->restore_max_new = -1;
    }
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
    app_log(a, "reply: %d tokens (%s), %.1f tok/s, evaluated %d, context %d/%d%s", a->reply_tokens,
            gpt2_reply_end_name(t->end), a->last_tps, s.last_reply, n, a->n_ctx, draft);
    if (t->end == GPT2_REPLY_CONTEXT_FULL)
        /* whether the model would have ended it there cannot be known: no position is left to ask */
        app_message(a, UI_ROLE_NOTICE, "the context window of %d tokens is full: the reply ends here, perhaps before "
                    "the model would have ended it (the next message drops the oldest turns; /undo or /reset make "
                    "room now)", a->n_ctx);
    log_reply_text(a, tr.text + tr.start, tr.len - tr.start);
    app_after_change(a);
    app_keep(a);
}

void app_stop(app *a) {
    gpt2_session_token t;
    gpt2_error err;
    gpt2_session_stop(a->s, &t, &err);
    finish_reply(a, &t);
    app_message(a, UI_ROLE_NOTICE, "reply stopped (text kept)");
}

void app_start_reply(app *a, int evaluated) {
    a->generating = 1;
    a->reply_t0 = a->host->now();
    a->reply_tokens = 0;
    a->turn_prefill = evaluated;
    inspector_follow_newest(a->panes[PANE_INSPECTOR]);
}

int app_send(app *a, const char *text) {
    if (a->generating) app_stop(a); /* a message sent mid-reply ends the reply first */
    gpt2_error err;
    a->msg[0] = '\0';
    gpt2_status st = gpt2_session_send(a->s, text, strlen(text), app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st == GPT2_CANCELLED) {
        app_message(a, UI_ROLE_NOTICE, "prefill cancelled; the message was not sent (it is back in the input line)");
        return -1;
    }
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return -1;
    }
    app_after_change(a);
    app_keep(a); /* the message is kept before its reply begins */
    gpt2_session_stats s = gpt2_session_get_stats(a->s);
    int n;
    gpt2_session_tokens(a->s, &n);
    app_log(a, "send: prefill %d tokens, context %d/%d", s.last_prefill, n, a->n_ctx);
    app_start_reply(a, s.last_prefill);
    conv_scroll(a->panes[PANE_CONV], -(1 << 28)); /* to the bottom: the reply shows */
    return 0;
}

/* The token just sampled: the inspector's latest candidates, its note, the log. */
static void record_token(app *a, const gpt2_session_token *t, gpt2_sampler_params params) {
    gpt2_candidate c[ISTORE_SNAP_K];
    int n = (int)gpt2_sampler_report(gpt2_session_sampler(a->s), c, ISTORE_SNAP_K);
    istore_set_last(a->store, t->id, t->prob, params, c, n);
    char rej[32] = "";
    if (t->n_rejected) snprintf(rej, sizeof rej, ", %d drafts rejected", t->n_rejected);
    app_log(a, "token %d p %.3f kept %d temperature %.2f origin %s%s", t->id, (double)t->prob, t->kept,
            (double)params.temperature, origin_name(t->origin), rej);
    if (!t->kept) return;
    a->reply_tokens++;
    int nt = gpt2_session_n_turns(a->s);
    istore_notes_sync(a->store, nt);
    istore_note_push(a->store, nt - 1, t->prob, t->origin);
}

void app_step(app *a) {
    gpt2_session_token t;
    gpt2_error err;
    gpt2_sampler_params params = gpt2_session_sampler_params(a->s);
    if (gpt2_session_step(a->s, &t, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        a->generating = 0;
        gpt2_session_stop(a->s, NULL, &err);
        return;
    }
    if (t.id >= 0) record_token(a, &t, params);
    if (t.done) finish_reply(a, &t);
    else app_after_change(a);
}
