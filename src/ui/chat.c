/* chat.c — the chat app's startup, event loop and teardown (chat_run; the
 * options come parsed from src/cli/cmd_chat.c). Everything that can fail
 * without a terminal (theme, log, model, template, session, draft model) is
 * done before curses starts, so its message lands on a normal stderr.
 *
 * The loop: while a reply is being written, each iteration reads every key
 * that is waiting (non-blocking), then runs one step of the reply and
 * redraws; otherwise it waits for a key (100 ms timeout, to notice signals).
 * Keys go to the screen manager (screen_key); signals only set a flag; every
 * exit path ends curses. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ui/app.h"

enum { CHAT_OK = 0, CHAT_ERR = 1 };

static volatile sig_atomic_t g_signal; /* SIGTERM/SIGINT/SIGHUP: quit */
static app A; /* the one app: a fatal signal's handler reads its kept file's path */

static void on_signal(int sig) { g_signal = sig; }

/* A fatal signal's last words (chat_host.on_fatal_signal): the terminal back,
 * and where the conversation was kept (after its last message or reply). */
static void emergency(void) {
    term_emergency_restore();
    if (!A.keep.path[0]) return;
    A.host->say("gptscope: the conversation up to its last message or reply is kept in ");
    A.host->say(A.keep.path);
    A.host->say("\n");
}

/* ---- startup ---- */

/* --theme, else the bundled dark theme (its built-in copy when the file is missing). */
static int load_theme(app *a, const chat_options *o, ui_theme *theme) {
    char e[1024];
    if (ui_theme_load(o->theme_name ? o->theme_name : "dark", a->themes_dir, theme, e, sizeof e) == 0) return 0;
    if (o->theme_name) {
        a->host->error("%s", e);
        return -1;
    }
    ui_theme_default(theme);
    return 0;
}

/* --template (a built-in or a file), else the model's: its chat_template.json,
 * its own Jinja template, or transcript. */
static int load_template(app *a, const chat_options *o, gpt2_chat_template **tmpl) {
    gpt2_error err;
    gpt2_status st;
    if (o->template_name) {
        const gpt2_chat_template *b = gpt2_chat_template_builtin(o->template_name);
        st = b ? gpt2_chat_template_copy(b, tmpl, &err) : gpt2_chat_template_load(o->template_name, tmpl, &err);
    } else {
        st = gpt2_chat_template_of_model(a->model, a->model_dir, tmpl, &err);
    }
    if (st != GPT2_OK) a->host->error("%s", err.msg);
    return st == GPT2_OK ? 0 : -1;
}

static int open_session(app *a, const chat_options *o, const gpt2_chat_template *tmpl) {
    gpt2_error err;
    gpt2_session_params ps = gpt2_session_default_params();
    ps.sampler = o->sampler;
    ps.max_new_tokens = o->n_new;
    ps.chat_template = tmpl;
    ps.context.n_threads = o->n_threads;
    /* prefill in chunks of at most a quarter of the context (64 at most): progress
       shows and Esc cancels between them */
    int q = a->cfg->n_ctx / 4;
    ps.context.n_batch = a->n_batch = q < 1 ? 1 : q > 64 ? 64 : q;
    gpt2_status st = gpt2_session_new(a->model, ps, &a->s, &err);
    if (st == GPT2_ERR_CONTEXT_FULL && !o->template_name) {
        /* a model too small for its default template's preamble (models/reverse:
           16 positions) still chats, on the raw template, and says so */
        ps.chat_template = gpt2_chat_template_builtin("raw");
        if ((st = gpt2_session_new(a->model, ps, &a->s, &err)) == GPT2_OK)
            snprintf(a->msg, sizeof a->msg, "template raw: the %.80s template's preamble does not fit the %d positions "
                     "of %.80s (--template chooses another)", tmpl->name, a->cfg->n_ctx, a->model_name);
    }
    if (st != GPT2_OK) {
        a->host->error("%s%s", err.msg, st == GPT2_ERR_CONTEXT_FULL ? " (--template raw has no preamble)" : "");
        return -1;
    }
    a->n_ctx = gpt2_session_n_ctx(a->s);
    return 0;
}

/* --system, after --continue: it replaces the continued chat's. */
static int set_system(app *a, const char *text) {
    gpt2_error err;
    if (gpt2_session_set_system(a->s, text, strlen(text), NULL, NULL, &err) == GPT2_OK) return 0;
    a->host->error("--system: %s", err.msg);
    return -1;
}

/* --draft: a bad or mismatched draft fails here, before the terminal is touched. */
static int open_draft(app *a, const chat_options *o) {
    gpt2_error err;
    if (!o->draft_dir) return 0;
    if (!(a->draft = a->host->load_model(o->draft_dir, NULL))) return -1;
    if (gpt2_session_set_draft(a->s, a->draft, o->draft_k, &err) != GPT2_OK) {
        a->host->error("%s", err.msg);
        return -1;
    }
    snprintf(a->draft_name, sizeof a->draft_name, "%s", gpt2_model_name(a->draft));
    return 0;
}

/* --continue: the newest conversation kept with this model, loaded before
 * the screen opens; a newer one of another model is named on the message line. */
static int continue_last(app *a) {
    char path[PATH_MAX], other[PATH_MAX];
    gpt2_error err;
    if (!state_latest_chat(a->model_name, a->cfg->n_vocab, path, sizeof path, other, sizeof other)) {
        char dir[PATH_MAX], note[1024];
        if (state_dir(dir, sizeof dir, note, sizeof note) != 0) a->host->error("--continue: %s", note);
        else a->host->error("--continue: no conversation with model '%s' is kept in %s/chats%s%s", a->model_name, dir,
                            other[0] ? "; the last one kept is " : "", other);
        return -1;
    }
    if (gpt2_session_load(a->s, path, NULL, NULL, &err) != GPT2_OK) {
        a->host->error("--continue: %s", err.msg);
        return -1;
    }
    int n, nv;
    gpt2_session_tokens(a->s, &n);
    char other_model[128] = "";
    if (other[0] && gpt2_session_file_model(other, other_model, sizeof other_model, &nv, &err) != GPT2_OK)
        other_model[0] = '\0';
    if (other_model[0])
        app_message(a, UI_ROLE_NOTICE, "continued %.200s (%d turns, %d tokens); a newer one, %.200s, is with model "
                    "'%.100s' (gptscope chat -m THAT_MODEL --continue)", path, gpt2_session_n_turns(a->s), n, other,
                    other_model);
    else
        app_message(a, UI_ROLE_NOTICE, "continued %.300s (%d turns, %d tokens)", path, gpt2_session_n_turns(a->s), n);
    snprintf(a->continued_from, sizeof a->continued_from, "%s", path);
    return 0;
}

/* The inspector's store, filled by the session's hooks. */
static int open_store(app *a) {
    if (istore_new(a->cfg->n_layer, a->cfg->n_head, a->n_ctx, APP_ATT_BUDGET, &a->store) != ISTORE_OK) {
        a->host->error("out of memory for the inspector's buffers");
        return -1;
    }
    app_hook_store(a->s, a->store);
    if (app_microscope_open(a) != 0) {
        a->host->error("out of memory for the inspector's buffers");
        return -1;
    }
    return 0;
}

/* Everything before the terminal: the log, the model, the template, the
 * session, the draft model, the store. 0, or -1 after printing why. */
static int open_app(app *a, const chat_options *o, gpt2_chat_template **tmpl) {
    gpt2_error err;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        a->host->error("chat needs a terminal (stdin and stdout must be TTYs)");
        return -1;
    }
    if (o->log_path && gpt2_fileio_open_append(o->log_path, &a->log, &err) != GPT2_OK) {
        a->host->error("%s", err.msg);
        return -1;
    }
    a->log_path = o->log_path;
    a->model_dir = o->model_dir;
    if (!(a->model = a->host->load_model(a->model_dir, o->quantize))) return -1;
    a->tok = gpt2_model_tokenizer(a->model);
    a->cfg = gpt2_model_config(a->model);
    snprintf(a->model_name, sizeof a->model_name, "%s", gpt2_model_name(a->model));
    const char *src = gpt2_model_source(a->model);
    if (strncmp(src, "Hugging Face safetensors", 24) != 0) { /* say how a file of another format was read */
        const char *kind = !strncmp(src, "Hugging Face", 12) ? "PyTorch" : src;
        snprintf(a->model_kind, sizeof a->model_kind, "%.*s", (int)strcspn(kind, " "), kind);
        snprintf(a->msg, sizeof a->msg, "%.100s: %.300s", a->model_name, src);
    }
    if (load_template(a, o, tmpl) || open_session(a, o, *tmpl) || open_draft(a, o) || open_store(a)) return -1;
    if (o->resume_last && continue_last(a)) return -1;
    if (o->system && set_system(a, o->system)) return -1;
    app_log(a, "start: model %s (%s), %s, template %s, n_ctx %d%s%s, seed %llu", a->model_name,
            gpt2_dtype_name(gpt2_model_dtype(a->model)), src, gpt2_session_template(a->s)->name, a->n_ctx,
            a->draft ? ", draft " : "", a->draft ? a->draft_name : "",
            (unsigned long long)gpt2_session_sampler_params(a->s).seed);
    return 0;
}

static void set_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* curses, the panes, the first frame. */
static int open_screen(app *a, const ui_theme *theme) {
    char e[1024];
    if (term_init(theme, e, sizeof e) != 0) {
        a->host->error("%s", e);
        return -1;
    }
    a->host->on_fatal_signal(emergency);
    pane *(*const make[N_PANES])(app *) = {conv_pane_new, sampling_pane_new, inspector_pane_new, input_pane_new,
                                           status_pane_new};
    for (int i = 0; i < N_PANES; i++)
        if (!(a->panes[i] = make[i](a))) {
            a->host->error("out of memory for the screen's panes");
            return -1;
        }
    screen_layout(a);
    screen_draw(a);
    return 0;
}

/* ---- the loop ---- */

/* The keys waiting (or the first within the wait): nonzero when one asks for a redraw. */
static int read_keys(app *a) {
    int dirty = 0;
    wint_t ch;
    int r;
    /* waiting: block up to 100 ms for a key; generating: only take what is there */
    if (a->generating && a->step_delay_ms <= 0) nodelay(stdscr, TRUE);
    else nodelay(stdscr, FALSE), wtimeout(stdscr, a->generating ? a->step_delay_ms : 100);
    while ((r = term_get_key(&ch)) != ERR) {
        dirty |= screen_key(a, (int)ch, r == KEY_CODE_YES);
        if (a->quit || g_signal) break;
        nodelay(stdscr, TRUE);
    }
    return dirty;
}

/* Every way out keeps the conversation (a reply in progress stopped first,
 * its text kept), and the log says where. */
static void keep_on_exit(app *a, const char *why) {
    app_log(a, "%s: quitting", why);
    app_keep(a); /* a continued conversation left as it was is not copied (app_keep) */
    if (a->keep.path[0] && !a->keep_error[0]) app_log(a, "the conversation is kept in %s", a->keep.path);
}

static void run_loop(app *a) {
    unsigned seen_invalid = 0;
    while (!a->quit && !g_signal) {
        int dirty = read_keys(a);
        if (term_lost()) {
            a->term_lost = 1;
            break;
        }
        if (term_invalid_bytes() != seen_invalid) {
            seen_invalid = term_invalid_bytes();
            app_message(a, UI_ROLE_NOTICE, "the input held bytes that are not UTF-8: each is shown and sent as \uFFFD (U+FFFD)");
            dirty = 1;
        }
        if (a->quit || g_signal) break;
        if (a->generating) {
            app_step(a);
            dirty = 1;
        }
        if (dirty) screen_draw(a);
    }
    if (a->generating) app_stop(a);
    char why[48];
    snprintf(why, sizeof why, a->term_lost ? "the terminal is gone" : g_signal ? "signal %d" : "asked", (int)g_signal);
    keep_on_exit(a, why);
    app_log(a, "quit");
}

/* ---- teardown ---- */

static void close_app(app *a, gpt2_chat_template *tmpl) {
    for (int i = 0; i < N_PANES; i++)
        if (a->panes[i]) a->panes[i]->ops->free(a->panes[i]), a->panes[i] = NULL;
    term_end();
    gpt2_chat_template_free(tmpl);
    if (a->s) gpt2_session_free(a->s);
    gpt2_model_free(a->model);
    gpt2_model_free(a->draft);
    model_view_close(a); /* before the store it reads */
    app_lens_free(a);
    app_why_free(a);
    istore_free(a->store);
    if (a->other_s) gpt2_session_free(a->other_s);
    istore_free(a->other_store);
    app_microscope_close(a);
    if (a->log && fclose(a->log) != 0 && !a->log_error[0])
        snprintf(a->log_error, sizeof a->log_error, "log %s: cannot write: %s", a->log_path, strerror(errno));
    a->log = NULL;
}

int chat_run(const chat_options *o, const chat_host *host) {
    setlocale(LC_ALL, "");
    app *a = &A;
    memset(a, 0, sizeof *a);
    a->host = host;
    a->focus = PANE_INPUT;
    a->signalled = &g_signal;
    a->restore_max_new = -1;
    a->zoom = a->zoom_from = -1;
    snprintf(a->themes_dir, sizeof a->themes_dir, "%s", o->themes_dir ? o->themes_dir : "themes");
    ui_theme theme;
    if (load_theme(a, o, &theme)) return CHAT_ERR;
    int rc = CHAT_ERR;
    gpt2_chat_template *tmpl = NULL;
    state_keeper_init(&a->keep);
    if (open_app(a, o, &tmpl) == 0) {
        set_signals(on_signal);
        signal(SIGPIPE, SIG_IGN); /* a --log pipe whose reader left fails a write, which stops the log */
        /* tests only: wait this long between tokens and prefill batches (keys are still
           read while waiting), so that the tmux tests can act in the middle of a reply */
        const char *delay_env = getenv("GPTSCOPE_TEST_STEP_DELAY_MS");
        a->step_delay_ms = delay_env ? atoi(delay_env) : 0;
        if (open_screen(a, &theme) == 0) {
            if (o->prompt) app_inspect_text(a, o->prompt), screen_draw(a);
            a->keep_dirty = 0; /* what was loaded (--continue) is kept already */
            run_loop(a);
            rc = g_signal == SIGINT || g_signal == SIGTERM || g_signal == SIGHUP ? 128 + (int)g_signal
                 : a->term_lost                                                ? 128 + SIGHUP
                                                                               : CHAT_OK;
        }
    }
    close_app(a, tmpl);
    /* the terminal is restored and nothing reads g_signal any more: from here a
       hangup or a kill ends the process, instead of being noted and ignored while
       exit runs (LeakSanitizer's stop-the-world, under SAN=1, never returns when a
       hangup's SIGCONT cancels the SIGSTOP it sent; the SIGHUP then ends it) */
    set_signals(SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    /* the terminal is back (or gone: then only the log tells) */
    if (a->keep.note[0]) host->error("state directory: %s", a->keep.note);
    if (a->keep_error[0]) {
        host->error("%s", a->keep_error);
    } else if (a->keep.path[0] || a->continued_from[0]) {
        char said[2 * PATH_MAX + 160], dir[1024];
        gpt2_text_escape(a->model_dir, strlen(a->model_dir), dir, sizeof dir);
        snprintf(said, sizeof said, "gptscope: the conversation is kept in %.*s (gptscope chat -m %s --continue goes on)\n",
                 PATH_MAX, a->keep.path[0] ? a->keep.path : a->continued_from, dir);
        host->say(said);
    }
    if (a->log_error[0]) { /* told on screen when it happened; the terminal is back now */
        host->error("%s", a->log_error);
        if (rc == CHAT_OK) rc = CHAT_ERR;
    }
    return rc;
}
