/* chat.h — `gptscope chat`, the full-screen app, as the command line starts
 * it: src/cli/cmd_chat.c parses the options into a chat_options, then calls
 * chat_run. No curses here.
 *
 * The chat needs a few things the command line owns (its error line, the
 * sampling knobs' table, model loading guarded against SIGBUS): they come in
 * a chat_host of function pointers, so that src/ui never includes the CLI's
 * header and the CLI never reaches into the app.
 *
 *   chat_options o = {.model_dir = "models/shakespeare", .n_new = 256, .draft_k = 4,
 *                     .sampler = gpt2_sampler_default_params()};
 *   chat_host h = {.now = cli_now, .error = cli_error, ...};
 *   return chat_run(&o, &h); // exit status: 0, 1, or 128 + a signal
 */
#ifndef GPTSCOPE_UI_CHAT_H
#define GPTSCOPE_UI_CHAT_H

#include <stddef.h>

#include "gpt2.h"

typedef struct {
    const char *model_dir;     /* the model (already resolved: -m, $GPTSCOPE_MODEL or the bundled one) */
    const char *template_name; /* --template: a built-in name or a file; NULL: the model's own */
    const char *system;        /* --system: the system message; NULL: none (or the continued chat's) */
    const char *theme_name;    /* --theme: a name or a path; NULL: dark */
    const char *themes_dir;    /* where the bundled themes are; NULL: ./themes */
    const char *log_path;      /* --log; NULL: none */
    const char *draft_dir;     /* --draft; NULL: none */
    const char *quantize;      /* --quantize q8; NULL: as stored */
    int n_new;                 /* -n: max new tokens per reply, 0 = until the context is full */
    int draft_k;               /* --draft-k */
    int n_threads;             /* --threads, 0: one per CPU */
    const char *prompt;        /* `gptscope inspect`: open in prompt mode on this text; NULL: the chat */
    int resume_last;           /* --continue: the last conversation kept with this model */
    gpt2_sampler_params sampler; /* the knobs, the seed chosen */
} chat_options;

typedef struct chat_host_s {
    double (*now)(void); /* seconds, monotonic */
    /* "gptscope: MESSAGE" on stderr (before the terminal is taken, or after) */
    void (*error)(const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 1, 2)))
#endif
        ;
    /* loads a model (quantize: NULL or "q8"); NULL after printing why */
    gpt2_model *(*load_model)(const char *dir, const char *quantize);
    /* around a model load made in the app (/draft DIR): a SIGBUS then names dir */
    void (*mark_loading)(const char *dir);
    /* the params of such a load (GPT-2's tokenizer for files without one) */
    gpt2_model_params (*model_params)(void);
    /* what a fatal signal runs first (the terminal's restore); async-signal-safe */
    void (*on_fatal_signal)(void (*restore)(void));
    void (*say)(const char *s); /* stderr with write(2): safe in a signal handler */
    /* /set NAME VALUE for a sampling knob, with the options' ranges: 1 set
       (*canon = its name), 0 no such knob, -1 refused (why in msg) */
    int (*sampling_set)(const char *name, const char *text, gpt2_sampler_params *sp, const char **canon, char *msg,
                        size_t cap);
    /* /ablate SPEC: "L.H[,L.H...]" (L.* a whole layer) into mask (n_layer,
       n_head; set entries only): 1, or 0 with the reason in msg */
    int (*ablation_parse)(const char *spec, int n_layer, int n_head, unsigned char *mask, char *msg, size_t cap);
} chat_host;

int chat_run(const chat_options *o, const chat_host *host);

#endif
