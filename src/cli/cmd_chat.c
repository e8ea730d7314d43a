/* cmd_chat.c — `gptscope chat`: its options parsed into a chat_options, then
 * the app (src/ui/chat.c) run with the services of the command line it needs
 * (a chat_host). Built only with the chat (GPTSCOPE_HAVE_CHAT). */
#include <ctype.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ui/chat.h"

/* --help: on stdout, status 0; a usage error: on stderr, EXIT_USAGE */
static int usage(int help) {
    return cli_usage(help,
                     "usage: gptscope chat [-m DIR] [--template NAME|FILE] [--system TEXT]\n"
                     "                     [--continue] [--theme NAME|PATH] [--log FILE]\n"
                     "                     [-n N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]\n"
                     "                     [--repeat-penalty R] [--repeat-last-n N] [--seed S]\n"
                     "                     [--draft DIR [--draft-k K]] [--quantize q8|q4] [--threads N]\n"
                     "  The full-screen chat: streams replies, sampling knobs that act mid-reply,\n"
                     "  live attention heatmaps and next-token candidates. F1 in the app lists the keys.\n"
                     "  --continue         go on with the last conversation kept with this model (each is\n"
                     "                     kept in ~/.local/state/gptscope/chats/ as it goes and at exit)\n"
                     "  --template NAME    transcript, dialogpt, raw, or a chat_template.json file\n"
                     "                     (default: the model's chat_template.json, else transcript)\n"
                     "  --system TEXT      the system message, first in the conversation (/system in the chat)\n"
                     "  --theme NAME|PATH  dark (default), light, high-contrast, or a theme file\n"
                     "  --log FILE         append what each turn computed (prefill/reply tokens, tok/s)\n"
                     "  -n N               max new tokens per reply, 0 = until the context is full (default 256)\n"
                     "  --draft DIR        speculative sampling: the model in DIR (same tokenizer) drafts,\n"
                     "                     the chat model checks K tokens per pass (/draft on|off in the app)\n"
                     "  --draft-k K        draft tokens per iteration, 1..16 (default 4; /set draft_k K)\n"
                     "  --quantize q8|q4   run the chat model with 8- or 4-bit weights (converted at load)\n"
                     "  --threads N        worker threads (default: one per CPU; replies do not depend on it)\n"
                     "  sampling options as for generate (default seed: random)\n");
}

enum { O_TEMPLATE = 256, O_THEME, O_LOG, O_DRAFT, O_DRAFT_K, O_CONTINUE, O_SYSTEM };

/* One option into o: 1 taken, 0 not one of chat's own, -1 a bad value (message printed). */
static int chat_option(int c, const char *arg, chat_options *o, int *draft_k_given) {
    long v;
    switch (c) {
    case 'm': o->model_dir = arg; return 1;
    case 'n': return cli_parse_int("-n", arg, 0, 1 << 20, &v) ? (o->n_new = (int)v, 1) : -1;
    case O_TEMPLATE: o->template_name = arg; return 1;
    case O_SYSTEM: o->system = arg; return 1;
    case O_THEME: o->theme_name = arg; return 1;
    case O_LOG: o->log_path = arg; return 1;
    case O_CONTINUE: o->resume_last = 1; return 1;
    case O_DRAFT: o->draft_dir = arg; return 1;
    case O_DRAFT_K:
        if (!cli_parse_int("--draft-k", arg, 1, GPT2_SPEC_MAX_K, &v)) return -1;
        o->draft_k = (int)v, *draft_k_given = 1;
        return 1;
    case CLI_OPT_QUANTIZE: return cli_quantize_option(arg, &o->quantize) ? 1 : -1;
    case CLI_OPT_THREADS: return cli_threads_option(arg, &o->n_threads) ? 1 : -1;
    default: return 0;
    }
}

/* argv into o: -1 when the chat is to run, else the exit status (--help, a usage error). */
static int chat_parse(int argc, char **argv, chat_options *o) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"n-tokens", required_argument, 0, 'n'},
                                         CLI_SAMPLING_OPTIONS,
                                         {"template", required_argument, 0, O_TEMPLATE},
                                         {"system", required_argument, 0, O_SYSTEM},
                                         {"theme", required_argument, 0, O_THEME},
                                         {"log", required_argument, 0, O_LOG},
                                         {"continue", no_argument, 0, O_CONTINUE},
                                         {"draft", required_argument, 0, O_DRAFT},
                                         {"draft-k", required_argument, 0, O_DRAFT_K},
                                         {"quantize", required_argument, 0, CLI_OPT_QUANTIZE},
                                         {"threads", required_argument, 0, CLI_OPT_THREADS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    *o = (chat_options){.n_new = 256, .draft_k = 4, .sampler = gpt2_sampler_default_params()};
    int c, seeded = 0, draft_k_given = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:n:h", opts, NULL)) != -1) {
        if (c == 'h') return usage(1);
        int r = chat_option(c, optarg, o, &draft_k_given);
        if (r == 0) r = cli_sampling_option(c, optarg, &o->sampler, &seeded);
        if (r < 0) return EXIT_USAGE;
        if (r == 0) return cli_option_error(c, argv, ""), usage(0);
    }
    if (cli_positional("", "chat", argc, argv, 0, "") != EXIT_OK) return usage(0);
    if (draft_k_given && !o->draft_dir) {
        cli_error("--draft-k needs --draft DIR");
        return EXIT_USAGE;
    }
    /* a random seed of 32 bits: its 10 digits fit the knobs panel of an 80-column terminal */
    if (!seeded) o->sampler.seed = ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)) & 0xFFFFFFFFu;
    static char themes[PATH_MAX + 16];
    o->themes_dir = cli_data_path("themes", themes, sizeof themes) ? themes : NULL;
    o->model_dir = cli_model_dir(o->model_dir);
    return o->model_dir ? -1 : EXIT_ERR;
}

const chat_host *cli_chat_host(void) {
    static const chat_host host = {.now = cli_now,
                                   .error = cli_error,
                                   .load_model = cli_load_model_as,
                                   .mark_loading = cli_mark_loading,
                                   .model_params = cli_model_params,
                                   .on_fatal_signal = cli_on_fatal_signal,
                                   .say = cli_say,
                                   .sampling_set = cli_sampling_set,
                                   .ablation_parse = cli_ablation_parse};
    return &host;
}

int cmd_chat(int argc, char **argv) {
    chat_options o;
    int rc = chat_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    return chat_run(&o, cli_chat_host());
}
