/* commands.c — the chat's slash commands: one table {name, alias, args, help,
 * fn} from which the help screen (screen.c) and /help are drawn, so that the
 * two never drift; the dispatch of a line the input accepted (a command or a
 * message); and the commands themselves. Each says what it did on the message
 * line and in the --log. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ui/app.h"

static int parse_num(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return !(errno || end == s || *end);
}

/* /set draft_k K: from the next iteration, mid-reply too. */
static void set_draft_k(app *a, double v, const char *val) {
    gpt2_error err;
    if (v != floor(v) || v < 1 || v > GPT2_SPEC_MAX_K) {
        app_message(a, UI_ROLE_ERROR, "/set draft_k: K = %s is outside 1..%d", val, GPT2_SPEC_MAX_K);
    } else if (gpt2_session_set_draft_k(a->s, (int)v, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    } else {
        app_message(a, UI_ROLE_TEXT, "draft_k = %d%s", (int)v,
                    gpt2_session_draft_model(a->s) ? "" : " (no draft model: --draft DIR or /draft DIR)");
        app_log(a, "set draft-k %d", (int)v);
    }
}

/* /set max-tokens N: the range chat's -n takes. */
static void set_max_tokens(app *a, double v, const char *val) {
    if (v != floor(v) || v < 0 || v > 1 << 20) {
        app_message(a, UI_ROLE_ERROR, "/set max-tokens: expected an integer in [0, %d], found '%s'", 1 << 20, val);
        return;
    }
    gpt2_session_set_max_new_tokens(a->s, (int)v);
    app_message(a, UI_ROLE_TEXT, "max-tokens = %d", gpt2_session_max_new_tokens(a->s));
    app_log(a, "set max-new %d", gpt2_session_max_new_tokens(a->s));
}

/* /set KNOB VALUE for a sampling knob: the command line's table, so /set
 * refuses exactly what the option refuses. */
static void set_knob(app *a, const char *name, const char *val) {
    gpt2_sampler_params p = gpt2_session_sampler_params(a->s);
    const char *canon;
    char why[256];
    int r = a->host->sampling_set(name, val, &p, &canon, why, sizeof why);
    if (r == 0) {
        app_message(a, UI_ROLE_ERROR, "/set: unknown parameter '%s' (temperature top-k top-p min-p repeat-penalty "
                                      "repeat-last-n max-tokens seed draft_k)", name);
        return;
    }
    if (r < 0) {
        app_message(a, UI_ROLE_ERROR, "/set %s: %s", canon, why);
        return;
    }
    gpt2_session_set_sampler_params(a->s, p);
    app_message(a, UI_ROLE_TEXT, "%s = %s", canon, val);
    app_log_sampling(a);
}

static void c_set(app *a, char *name, char *val) {
    double v;
    if (!name || !val || !parse_num(val, &v))
        app_message(a, UI_ROLE_ERROR, "usage: /set NAME VALUE (temperature top-k top-p min-p repeat-penalty "
                                      "repeat-last-n max-tokens seed draft_k)");
    else if (!strcmp(name, "draft_k") || !strcmp(name, "draft-k"))
        set_draft_k(a, v, val);
    else if (!strcmp(name, "max-tokens") || !strcmp(name, "max-new") || !strcmp(name, "n"))
        set_max_tokens(a, v, val);
    else
        set_knob(a, name, val);
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
        if (gpt2_chat_template_of_model(a->model, a->model_dir, &own, &err) != GPT2_OK) {
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
    gpt2_status st = gpt2_session_set_template(a->s, t, app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "template switch cancelled" : err.msg);
    else {
        app_forget_latest(a);
        app_message(a, UI_ROLE_TEXT, "template: %s", gpt2_session_template(a->s)->name);
        app_log(a, "template %s: evaluated %d", gpt2_session_template(a->s)->name, gpt2_session_get_stats(a->s).last_call);
    }
    gpt2_chat_template_free(own);
    app_after_change(a);
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
        app_log(a, "draft %s", on ? "on" : "off");
        return;
    }
    /* A draft file truncated while it loads would end the process (SIGBUS):
       the conversation is kept first, and the handler says where. */
    app_keep(a);
    gpt2_model *m;
    a->host->mark_loading(arg);
    gpt2_status lst = gpt2_model_load_with(arg, a->host->model_params(), &m, &err);
    a->host->mark_loading(NULL);
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
    app_log(a, "draft %s k %d", a->draft_name, gpt2_session_draft_k(a->s));
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

/* A command that would replace something asks first (its message says what);
 * the same command as the very next line goes ahead. line: the command with
 * its arguments as it acts on them (~ expanded). */
static int confirmed(app *a, const char *line) {
    if (!strcmp(a->pending, line)) return 1; /* run_command forgets it */
    snprintf(a->pending, sizeof a->pending, "%s", line);
    a->pending_new = 1;
    return 0;
}

/* /load of a conversation another model wrote: it would be re-encoded, and
 * its template and sampling settings would replace these. 0: not now (a
 * message says why). */
static int other_model_confirmed(app *a, const char *path) {
    char saved[128], line[sizeof a->pending];
    int n_vocab;
    gpt2_error err;
    if (gpt2_session_file_model(path, saved, sizeof saved, &n_vocab, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
        return 0;
    }
    snprintf(line, sizeof line, "/load %s", path);
    if (!strcmp(saved, a->model_name) || confirmed(a, line)) return 1;
    char shown[160];
    gpt2_text_escape(saved, strlen(saved), shown, sizeof shown);
    app_message(a, UI_ROLE_NOTICE, "%s was saved with model '%s', and this chat runs '%s': its text would be "
                "re-encoded and its template and sampling settings would replace these. /load it again to go ahead.",
                path, shown, a->model_name);
    return 0;
}

/* A file the command would replace: 1 when path is not a regular file (free,
 * or something the writer refuses with its own message) or the same command
 * was typed again; else 0 after saying so. what: "/export attention". */
static int replace_confirmed(app *a, const char *what, const char *path) {
    char line[sizeof a->pending];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 1;
    if (snprintf(line, sizeof line, "%s %s", what, path) >= (int)sizeof line) { /* PATH_MAX: cannot happen */
        app_message(a, UI_ROLE_ERROR, "%s: the name is too long", what);
        return 0;
    }
    if (confirmed(a, line)) return 1;
    app_message(a, UI_ROLE_NOTICE, "%s exists: the same %.*s again (Up, Enter) replaces it", path,
                (int)strcspn(what, " "), what);
    return 0;
}

/* ---- the slash commands: one table, from which /help's list is drawn ---- */

static void c_quit(app *a, char *x, char *y) { (void)x, (void)y, a->quit = 1; }
static void c_help(app *a, char *x, char *y) { (void)x, (void)y, a->help = 1; }

static void c_conf(app *a, char *x, char *y) {
    (void)x, (void)y;
    int on = conv_toggle_confidence(a->panes[PANE_CONV]);
    app_message(a, UI_ROLE_TEXT, "confidence view %s", on ? "on (F2 or /conf turns it off)" : "off");
}

static void c_reset(app *a, char *x, char *y) {
    gpt2_error err;
    (void)x, (void)y;
    if (a->generating) app_stop(a);
    app_keep(a);
    const char *kept = a->prompt_mode ? "" : a->keep.path[0] ? a->keep.path : a->continued_from;
    if (gpt2_session_reset(a->s, &err) != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    } else {
        app_message(a, UI_ROLE_TEXT, "conversation cleared%s%s", *kept ? "; it is kept in " : "", kept);
        app_forget_latest(a), istore_notes_clear(a->store, -1), app_log(a, "reset");
        if (!a->prompt_mode) state_keep_next(&a->keep), a->continued_from[0] = '\0'; /* the next gets a file of its own */
        a->turn_prefill = a->reply_tokens = 0, a->last_tps = 0; /* the status bar's turn is gone too */
    }
    app_after_change(a);
}

static void c_undo(app *a, char *x, char *y) {
    gpt2_error err;
    (void)x, (void)y;
    if (a->generating) app_stop(a);
    if (gpt2_session_undo(a->s, &err) != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    else app_message(a, UI_ROLE_TEXT, "last exchange removed"), app_log(a, "undo");
    app_after_change(a);
    istore_clear_last(a->store);
}

static void c_regen(app *a, char *x, char *y) {
    gpt2_error err;
    (void)x, (void)y;
    if (a->generating) app_stop(a);
    gpt2_status st = gpt2_session_regen(a->s, app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "regen cancelled" : err.msg);
    } else {
        int nt = gpt2_session_n_turns(a->s);
        istore_notes_sync(a->store, nt);
        if (nt > 0) istore_notes_clear(a->store, nt - 1); /* the reply starts over */
        app_start_reply(a, gpt2_session_get_stats(a->s).last_call);
        app_reply_message(a, "regenerating the last reply");
        app_log(a, "regen: evaluated %d", gpt2_session_get_stats(a->s).last_call);
    }
    app_after_change(a);
}

/* The reply token at the inspector's query: its turn and index; 0 when the query is no reply token. */
static int query_reply_token(app *a, int *turn_i, int *k, int *q) {
    inspect_focus f;
    inspector_focus(a->panes[PANE_INSPECTOR], &f);
    *q = f.query;
    for (int i = gpt2_session_n_turns(a->s) - 1; i >= 0 && f.query >= 0; i--) {
        gpt2_turn t;
        if (!gpt2_session_turn(a->s, i, &t) || t.pos < 0 || f.query < t.pos || f.query >= t.pos + t.n_ids) continue;
        *turn_i = i, *k = f.query - t.pos;
        return 1;
    }
    return 0;
}

/* /fork N|TEXT: the reply token at the inspector's query becomes candidate N of
 * the next-token panel (what the sampler saw there), or TEXT (one token); the
 * reply goes on from it in a new branch, the old conversation kept as another. */
static void c_fork(app *a, char *arg, char *y) {
    (void)y;
    int ti, k, q;
    if (!arg) {
        app_message(a, UI_ROLE_ERROR, "usage: /fork N|TEXT: put the inspector's query on a reply token (Tab, then "
                    "\u2191\u2193), then take candidate N of its next-token panel, or TEXT (one token)");
        return;
    }
    if (a->prompt_mode) {
        app_message(a, UI_ROLE_ERROR, "prompt mode has no replies to fork: /chat first");
        return;
    }
    if (a->generating) {
        app_message(a, UI_ROLE_ERROR, "stop the reply first (Esc)");
        return;
    }
    if (!query_reply_token(a, &ti, &k, &q)) {
        app_message(a, UI_ROLE_ERROR, "the inspector's query (#%d) is not a reply token: move it onto one (Tab to "
                    "the inspector, \u2191\u2193)", q);
        return;
    }
    int32_t id = -1;
    double v;
    gpt2_token_candidates tc;
    if (parse_num(arg, &v)) {
        if (gpt2_session_candidates(a->s, ti, k, &tc) != GPT2_OK || tc.n == 0) {
            app_message(a, UI_ROLE_ERROR, "#%d has no candidates recorded: /fork TEXT names the token instead", q);
            return;
        }
        if (v < 1 || v > tc.n || v != floor(v)) {
            app_message(a, UI_ROLE_ERROR, "/fork N: the panel lists candidates 1..%d", tc.n);
            return;
        }
        id = tc.c[(int)v - 1].id;
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        gpt2_error e;
        if (gpt2_tokenizer_encode(a->tok, arg, strlen(arg), GPT2_ENCODE_CONTINUE, &ids, &n, &e) != GPT2_OK || n != 1) {
            app_message(a, UI_ROLE_ERROR, "\"%s\" is %zu tokens, not one: /fork takes one token (or a candidate's "
                        "number)", arg, n);
            free(ids);
            return;
        }
        id = ids[0];
        free(ids);
    }
    gpt2_error err;
    const int was = gpt2_session_branch(a->s); /* where the old conversation stays */
    gpt2_status st = gpt2_session_fork(a->s, ti, k, id, app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "fork cancelled" : err.msg);
    } else {
        char lab[48];
        app_token_label(a, id, lab, sizeof lab);
        istore_notes_sync(a->store, gpt2_session_n_turns(a->s));
        istore_notes_clear(a->store, ti); /* this reply goes on differently */
        app_start_reply(a, gpt2_session_get_stats(a->s).last_call);
        app_reply_message(a, "branch %d: #%d is now \"%s\"; branch %d keeps what was (/branch)",
                          gpt2_session_branch(a->s), q, lab, was);
        app_log(a, "fork: turn %d token %d -> %d, evaluated %d", ti, k, id, gpt2_session_get_stats(a->s).last_call);
    }
    app_after_change(a);
}

/* /branch N switches to branch N; alone, lists them and where each parts. */
static void c_branch(app *a, char *arg, char *y) {
    (void)y;
    const int n = gpt2_session_n_branches(a->s), cur = gpt2_session_branch(a->s);
    double v;
    if (!arg) {
        if (n == 1) {
            app_message(a, UI_ROLE_TEXT, "one branch: /fork N makes another");
            return;
        }
        char line[512];
        int len = snprintf(line, sizeof line, "branches 0-%d, this is %d;", n - 1, cur);
        for (int i = 0; i < n && len < (int)sizeof line - 64; i++) {
            int at, tok;
            if (gpt2_session_branch_diverges(a->s, i, &at, &tok))
                len += tok >= 0 ? snprintf(line + len, sizeof line - (size_t)len, " %d parts from it at turn %d, token %d;", i, at, tok)
                                : snprintf(line + len, sizeof line - (size_t)len, " %d parts from it at turn %d;", i, at);
        }
        app_message(a, UI_ROLE_TEXT, "%s /branch N switches", line);
        return;
    }
    if (!parse_num(arg, &v) || v < 0 || v >= n || v != floor(v)) {
        app_message(a, UI_ROLE_ERROR, "usage: /branch N (0..%d)", n - 1);
        return;
    }
    if (a->generating) app_stop(a);
    gpt2_error err;
    gpt2_status st = gpt2_session_switch_branch(a->s, (int)v, app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "branch switch cancelled" : err.msg);
    } else {
        app_forget_latest(a);
        istore_notes_clear(a->store, -1);
        app_message(a, UI_ROLE_TEXT, "branch %d (evaluated %d tokens)", (int)v, gpt2_session_get_stats(a->s).last_call);
        app_log(a, "branch %d: evaluated %d", (int)v, gpt2_session_get_stats(a->s).last_call);
    }
    app_after_change(a);
}

static void c_layer(app *a, char *arg, char *y) {
    double v;
    (void)y;
    if (!arg || !parse_num(arg, &v) || v < 0 || v >= a->cfg->n_layer || v != floor(v)) {
        app_message(a, UI_ROLE_ERROR, "usage: /layer N (0..%d)", a->cfg->n_layer - 1);
        return;
    }
    pane *in = a->panes[PANE_INSPECTOR];
    inspector_set_layer(in, (int)v);
    app_message(a, UI_ROLE_TEXT, "inspector: layer %d (layers 0-%d)", inspector_layer(in), a->cfg->n_layer - 1);
    app_log(a, "layer %d", inspector_layer(in));
}

static void c_head(app *a, char *arg, char *y) {
    double v;
    pane *in = a->panes[PANE_INSPECTOR];
    (void)y;
    if (arg && (!strcmp(arg, "avg") || !strcmp(arg, "average"))) {
        inspector_set_head(in, -1);
        app_message(a, UI_ROLE_TEXT, "inspector: the average of the %d heads", a->cfg->n_head);
        app_log(a, "head avg");
    } else if (!arg || !parse_num(arg, &v) || v < 0 || v >= a->cfg->n_head || v != floor(v)) {
        app_message(a, UI_ROLE_ERROR, "usage: /head N (0..%d) or /head avg", a->cfg->n_head - 1);
    } else {
        inspector_set_head(in, (int)v);
        app_message(a, UI_ROLE_TEXT, "inspector: head %d (heads 0-%d)", inspector_head(in), a->cfg->n_head - 1);
        app_log(a, "head %d", inspector_head(in));
    }
}

/* /ablate L.H[,L.H...] | L.* | off: adds heads to the ablated set (or lifts
 * it); alone, names the set. */
static void c_ablate(app *a, char *arg, char *y) {
    char set[256], why[256], what[96];
    (void)y;
    app_ablation_text(a, set, sizeof set);
    if (!arg) {
        app_message(a, UI_ROLE_TEXT, "ablated: %s (x/X in the inspector toggle a head/layer; /ablate off lifts all)",
                    set[0] ? set : "none");
        return;
    }
    const int nl = a->cfg->n_layer, nh = a->cfg->n_head;
    unsigned char *mask = calloc((size_t)nl * nh, 1);
    if (!mask) return;
    int off = !strcmp(arg, "off") || !strcmp(arg, "none");
    for (int i = 0; !off && i < nl * nh; i++) mask[i] = (unsigned char)gpt2_session_ablated(a->s, i / nh, i % nh);
    if (!off && !a->host->ablation_parse(arg, nl, nh, mask, why, sizeof why))
        app_message(a, UI_ROLE_ERROR, "/ablate %s: %s", arg, why);
    else
        snprintf(what, sizeof what, "ablated %.80s", arg), app_ablate_set(a, off ? NULL : mask, off ? "ablation lifted" : what);
    free(mask);
}

static void c_inspect(app *a, char *text, char *y) {
    (void)y;
    if (!text) app_message(a, UI_ROLE_ERROR, "usage: /inspect TEXT (the text evaluated as it is, nothing generated)");
    else app_inspect_text(a, text);
}

static void c_generate(app *a, char *arg, char *y) {
    double v;
    (void)y;
    if (!arg || !parse_num(arg, &v) || v < 1 || v > 1 << 20 || v != floor(v))
        app_message(a, UI_ROLE_ERROR, "usage: /generate N (tokens, 1..%d)", 1 << 20);
    else app_generate(a, (int)v);
}

static void c_chat(app *a, char *x, char *y) { (void)x, (void)y, app_back_to_chat(a); }
static void c_heads(app *a, char *x, char *y) { (void)x, (void)y, model_view_open(a); }
static void c_zoom(app *a, char *x, char *y) { (void)x, (void)y, screen_toggle_zoom(a); }

/* /why [vs]: the why view (attribution at the inspector's query), against the runner-up with vs. */
static void c_why(app *a, char *arg, char *y) {
    (void)y;
    pane *ins = a->panes[PANE_INSPECTOR];
    if (arg && strcmp(arg, "vs") != 0) {
        app_message(a, UI_ROLE_ERROR, "usage: /why [vs] (vs: against the best other token)");
        return;
    }
    inspector_why(ins)->vs = arg != NULL;
    if (inspector_view(ins) != INSPECT_WHY) inspector_toggle_why(ins);
    a->focus = PANE_INSPECTOR;
}

static void c_export(app *a, char *kind, char *path) {
    char home_buf[4096];
    gpt2_error err;
    if (!kind || !path) {
        app_message(a, UI_ROLE_ERROR, "usage: /export attention|heads|lens|topk|why FILE (.json .csv; attention also .svg .png)");
        return;
    }
    path = expand_home(path, home_buf, sizeof home_buf);
    char what[64];
    snprintf(what, sizeof what, "/export %s", kind);
    if (!replace_confirmed(a, what, path)) return;
    if (app_export(a, kind, path, &err) != GPT2_OK) app_message(a, UI_ROLE_ERROR, "/export %s: %s", kind, err.msg);
    else app_message(a, UI_ROLE_NOTICE, "exported %s to %s", kind, path);
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

/* /system TEXT sets the system message, /system off removes it, /system shows it. */
static void c_system(app *a, char *text, char *y) {
    (void)y;
    if (!text) {
        const char *cur = gpt2_session_system(a->s);
        if (cur[0]) app_message(a, UI_ROLE_TEXT, "system: %s", cur);
        else app_message(a, UI_ROLE_TEXT, "no system message (/system TEXT sets one)");
        return;
    }
    if (a->prompt_mode) {
        app_message(a, UI_ROLE_ERROR, "prompt mode has no system message: /chat first");
        return;
    }
    if (a->generating) {
        app_message(a, UI_ROLE_ERROR, "stop the reply first (Esc)");
        return;
    }
    if (!strcmp(text, "off")) text = "";
    gpt2_error err;
    gpt2_status st = gpt2_session_set_system(a->s, text, strlen(text), app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "system message change cancelled" : err.msg);
    } else {
        app_forget_latest(a);
        app_message(a, UI_ROLE_TEXT, text[0] ? "system message set" : "system message removed");
        app_log(a, "system message: evaluated %d", gpt2_session_get_stats(a->s).last_call);
    }
    app_after_change(a);
}
static void c_draft(app *a, char *arg, char *y) { (void)y, cmd_draft(a, arg); }

static void c_save(app *a, char *path, char *y) {
    gpt2_error err;
    (void)y;
    if (!path) app_message(a, UI_ROLE_ERROR, "usage: /save FILE");
    else if (!replace_confirmed(a, "/save", path)) return;
    else if (gpt2_session_save(a->s, path, &err) != GPT2_OK) app_message(a, UI_ROLE_ERROR, "%s", err.msg);
    else app_message(a, UI_ROLE_TEXT, "saved to %s", path), app_log(a, "saved %s", path);
}

static void c_load(app *a, char *path, char *y) {
    gpt2_error err;
    (void)y;
    if (!path) {
        app_message(a, UI_ROLE_ERROR, "usage: /load FILE");
        return;
    }
    if (!other_model_confirmed(a, path)) return;
    if (a->generating) app_stop(a);
    app_keep(a); /* the conversation it replaces */
    gpt2_status st = gpt2_session_load(a->s, path, app_progress, a, &err);
    a->prefill_msg[0] = '\0';
    if (st != GPT2_OK) {
        app_message(a, UI_ROLE_ERROR, "%s", st == GPT2_CANCELLED ? "load cancelled" : err.msg);
    } else {
        app_forget_latest(a);
        istore_notes_clear(a->store, -1);
        int n;
        gpt2_session_tokens(a->s, &n);
        app_message(a, UI_ROLE_TEXT, "loaded %s (%d turns, %d tokens)", path, gpt2_session_n_turns(a->s), n);
        app_log(a, "loaded %s: %d turns, %d tokens", path, gpt2_session_n_turns(a->s), n);
        if (!a->prompt_mode) state_keep_next(&a->keep), a->continued_from[0] = '\0'; /* a file of its own from now on */
        a->turn_prefill = gpt2_session_get_stats(a->s).last_call, a->reply_tokens = 0;
        if (gpt2_session_replying(a->s)) a->generating = 1, a->reply_t0 = a->host->now();
    }
    app_after_change(a);
}

static const app_command commands[] = {
    {"/help", "/?", "", "this help", 0, c_help, 0},
    {"/reset", NULL, "", "empty the conversation (template, knobs and RNG kept)", 0, c_reset, 0},
    {"/regen", NULL, "", "sample the last reply again", 0, c_regen, 0},
    {"/undo", NULL, "", "remove the last exchange", 0, c_undo, 0},
    {"/fork", NULL, "N|TEXT", "the reply token at the inspector's query becomes candidate N of its next-token panel "
     "(or TEXT, one token) and the reply goes on from it, in a new branch", 0, c_fork, 1},
    {"/branch", NULL, "[N]", "list the branches /fork made and where they part, or switch to branch N", 0, c_branch, 0},
    {"/set", NULL, "NAME VALUE",
     "temperature top-k top-p min-p repeat-penalty repeat-last-n max-tokens seed draft_k (the ranges of the "
     "command-line options)", 0, c_set, 0},
    {"/layer", NULL, "N", "the inspector's layer", 0, c_layer, 0},
    {"/head", NULL, "N|avg", "the inspector's head, or the average of the heads", 0, c_head, 0},
    {"/ablate", NULL, "L.H|L.*|off", "zero-ablate heads (3.1,2.0; 3.* a layer): the context is re-evaluated, the "
     "next-token panel compares before/after; off lifts all", 0, c_ablate, 0},
    {"/heads", NULL, "", "the model view: every head's pattern and scores (as F9)", 0, c_heads, 0},
    {"/zoom", NULL, "", "the inspector (or a focused conversation) over the whole screen, and back (as F10)", 0, c_zoom, 0},
    {"/why", NULL, "[vs]", "why the token after the query: its logit split into every head and MLP (as w in the "
     "inspector); vs: against the best other token", 0, c_why, 0},
    {"/export", NULL, "KIND FILE", "attention (the inspector's head; .json .csv .svg .png), heads (scores), lens "
     "(at the query), topk (each position's candidates), why (the attribution): .json or .csv", 0, c_export, 0},
    {"/inspect", NULL, "TEXT", "prompt mode on TEXT: evaluated as it is (raw template), nothing generated; "
     "the conversation waits (/chat)", 0, c_inspect, 1},
    {"/generate", NULL, "N", "prompt mode: continue the text by N tokens", 0, c_generate, 0},
    {"/chat", NULL, "", "back from prompt mode to the conversation (kept as it was)", 0, c_chat, 0},
    {"/conf", NULL, "", "confidence view on/off (as F2)", 0, c_conf, 0},
    {"/theme", NULL, "NAME|PATH", "dark light high-contrast, or a .theme file", 1, c_theme, 0},
    {"/template", NULL, "NAME|PATH", "transcript dialogpt raw model, or a chat_template.json", 1, c_template, 0},
    {"/system", NULL, "TEXT|off", "the system message the template puts first (kept by /reset)", 0, c_system, 1},
    {"/save", NULL, "FILE", "the session as JSON (~ is your home directory)", 1, c_save, 0},
    {"/load", NULL, "FILE", "a saved session (another model's: asks first)", 1, c_load, 0},
    {"/draft", NULL, "on|off|DIR", "speculative sampling with a draft model", 1, c_draft, 0},
    {"/quit", "/q", "", "quit (also /exit, Ctrl-D on an empty line)", 0, c_quit, 0},
    {"/exit", NULL, NULL, NULL, 0, c_quit, 0}, /* NULL help: an alias not listed */
};

const app_command *app_commands(int *n) {
    *n = (int)(sizeof commands / sizeof *commands);
    return commands;
}

static void run_command(app *a, char *line) {
    char *save = NULL, home_buf[PATH_MAX];
    size_t cl = strcspn(line, " \t");
    char *rest = strdup(line + cl + strspn(line + cl, " \t")); /* the line after the command, spaces kept */
    char *cmd = strtok_r(line, " \t", &save);
    char *arg1 = strtok_r(NULL, " \t", &save);
    char *arg2 = strtok_r(NULL, " \t", &save);
    a->msg[0] = '\0'; /* an earlier message is stale now; each command says what it did */
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        const app_command *c = &commands[i];
        if (strcmp(cmd, c->name) && (!c->alias || strcmp(cmd, c->alias))) continue;
        if (c->path_arg) arg1 = expand_home(arg1, home_buf, sizeof home_buf);
        if (c->rest_arg) arg1 = rest && *rest ? rest : NULL, arg2 = NULL;
        a->pending_new = 0;
        c->fn(a, arg1, arg2);
        if (!a->pending_new) a->pending[0] = '\0'; /* a confirmation is the very next command */
        free(rest);
        return;
    }
    free(rest);
    a->pending[0] = '\0';
    app_message(a, UI_ROLE_ERROR, "unknown command %s (F1 or /help lists them)", cmd);
}

int app_submit_line(app *a, char *line) {
    if (!line) { /* Ctrl-D on an empty line */
        a->quit = 1;
        return 0;
    }
    size_t n = strlen(line), t = n;
    if (n == 0) return 0;
    while (t > 0 && strchr(" \t\n", line[t - 1])) t--; /* a pasted command's newline */
    if (line[0] == '/' && !memchr(line, '\n', t)) { /* a command is one line; more is a message */
        char *copy = strndup(line, t);
        if (copy) run_command(a, copy);
        free(copy);
        return 0;
    }
    a->pending[0] = '\0'; /* what a command asked is answered by the same command only */
    if (a->prompt_mode) app_inspect_text(a, line); /* a line in prompt mode is the next prompt */
    else return app_send(a, line);
    return 0;
}

