/* cmd_inspect.c — `gptscope inspect`: the chat app (src/ui) opened in
 * prompt mode on a fixed text: -p PROMPT, -f FILE, or stdin (the terminal
 * is then reopened for the app). Built only with the chat. */
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ui/chat.h"

static const char usage_text[] =
    "usage: gptscope inspect [-m DIR] [-p PROMPT | -f FILE] [--theme NAME|PATH] [--seed S] [--threads N]\n"
    "  The chat's microscope on a fixed text (from -p, -f, or stdin): the text is evaluated\n"
    "  as it is (the raw template), nothing is generated unless asked (/generate N), and the\n"
    "  inspector opens on it (text view, heatmaps, ablation). /chat switches to a conversation.\n";

typedef struct {
    const char *model, *prompt, *file, *theme;
    uint64_t seed;
    int seeded, n_threads;
} inspect_opts;

/* The text: -p, else -f FILE, else stdin (which must not be the terminal). */
static char *inspect_text(const inspect_opts *o) {
    size_t len;
    if (o->prompt) return strdup(o->prompt);
    if (o->file) return cli_read_all(NULL, o->file, CLI_PROMPT_MAX, &len);
    if (isatty(STDIN_FILENO)) {
        cli_error("inspect needs a text: -p PROMPT, -f FILE or stdin");
        return NULL;
    }
    char *t = cli_read_all(stdin, "stdin", CLI_PROMPT_MAX, &len);
    if (t && !freopen("/dev/tty", "r", stdin)) { /* the app reads keys from the terminal */
        cli_error("inspect: text read from stdin, but no terminal to open (/dev/tty)");
        free(t);
        return NULL;
    }
    return t;
}

int cmd_inspect(int argc, char **argv) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', inspect_opts, model)},
        {CLI_STR("prompt", 'p', inspect_opts, prompt)},
        {CLI_STR("file", 'f', inspect_opts, file)},
        {CLI_STR("theme", 0, inspect_opts, theme)},
        {CLI_U64("seed", 0, inspect_opts, seed, 0, 1L << 62), .given = CLI_GIVEN(inspect_opts, seeded)},
        {CLI_INT("threads", 0, inspect_opts, n_threads, 1, 256)},
    };
    inspect_opts o = {0};
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), &o, usage_text);
    if (rc != CLI_PARSED) return rc;
    if (cli_positional(usage_text, "inspect", argc, argv, 0, "") != EXIT_OK) return EXIT_USAGE;
    if (o.prompt && o.file) return cli_usage_error(usage_text, "inspect: -p and -f both given (one text)");
    char *text = inspect_text(&o);
    if (!text) return EXIT_ERR;
    char themes[PATH_MAX + 16];
    chat_options co = {.model_dir = cli_model_dir(o.model), .theme_name = o.theme, .n_new = 256, .draft_k = 4,
                       .n_threads = o.n_threads, .sampler = gpt2_sampler_default_params(), .prompt = text,
                       .themes_dir = cli_data_path("themes", themes, sizeof themes) ? themes : NULL};
    if (!co.model_dir) {
        free(text);
        return EXIT_ERR;
    }
    /* a random seed of 32 bits, as chat's: whole in the knobs panel at 80 columns */
    co.sampler.seed = o.seeded ? o.seed : ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)) & 0xFFFFFFFFu;
    rc = chat_run(&co, cli_chat_host());
    free(text);
    return rc;
}
