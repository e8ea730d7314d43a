/* main.c — gptscope's entry point: dispatches to a subcommand. The only place that exits. */
#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
#ifdef GPTSCOPE_HAVE_CHAT
    {"chat", cmd_chat, "the full-screen chat app (also: gptscope with no arguments on a terminal)"},
    {"inspect", cmd_inspect, "the chat's microscope on a fixed prompt (nothing generated unless asked)"},
#endif
    {"generate", cmd_generate, "stream a continuation of a prompt"},
    {"tokenize", cmd_tokenize, "print the token ids of text"},
    {"template", cmd_template, "a conversation as the chat feeds it to the model (its chat template)"},
    {"topk", cmd_topk, "the next-token distribution after a prompt"},
    {"attention", cmd_attention, "one head's attention matrix over a prompt (also as a picture)"},
    {"heads", cmd_heads, "every attention head's scores over a prompt"},
    {"lens", cmd_lens, "the logit lens: the next-token prediction read after each layer"},
    {"attribute", cmd_attribute, "why that token: its logit split into each head's and MLP's part"},
    {"patch", cmd_patch, "what causes it: a clean run's activations patched into a corrupt run's"},
    {"eval", cmd_eval, "loss of a model on a text file (nats/token, bits/byte)"},
    {"bench", cmd_bench, "speed, latency and memory, against this machine's bandwidth"},
    {"train", cmd_train, "train a GPT-2-architecture model on a text file"},
    {"train-tokenizer", cmd_train_tokenizer, "learn a byte-level BPE vocabulary from a text file"},
    {"convert", cmd_convert, "write any model gptscope reads as a Hugging Face directory"},
};

static void usage(FILE *out) {
    fprintf(out, "gptscope %s — talk to a GPT-2 model and look inside it\n\n"
                 "usage: gptscope COMMAND [options]   (gptscope COMMAND --help for its options)\n\n",
            gpt2_version());
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-16s %s\n", commands[i].name, commands[i].summary);
    fputs("\nEvery command takes -m PATH: a model directory in the Hugging Face GPT-2 layout,\n"
          "pytorch_model.bin, nanoGPT's ckpt.pt, llm.c's .bin or GGUF (the format is read\n"
          "from the file); without it, $GPTSCOPE_MODEL or the bundled models/shakespeare.\n"
#ifdef GPTSCOPE_HAVE_CHAT
          "Options without a command (gptscope -m DIR ...) open the chat with them.\n"
#endif
          ,
          out);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* used by finish() only without them */
static volatile sig_atomic_t g_exit_rc;
static void exit_now(int sig) {
    (void)sig;
    _exit(g_exit_rc);
}
#endif

/* What a command wrote to stdout must have got there: a full disk, /dev/full
 * or a closed stdout end in one line and status 1, never a silent 0. (A
 * closed stdout that nothing was written to is no error.) */
static void finish(int rc) {
    int e = cli_stdout_flush() != 0 ? cli_stdout_errno() : 0;
    if (!e && fclose(stdout) != 0 && errno != EBADF) e = errno;
    if (e) {
        cli_error("cannot write the output (stdout): %s", strerror(e));
        if (rc == EXIT_OK) rc = EXIT_ERR;
    }
    /* from here a signal ends the process, whatever handler a command set */
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
    /* Out of memory, OpenBLAS's worker threads may be looping on a buffer they
       cannot map, and its exit handler would wait for them for ever: the
       message is out, the status says it failed; no handler is needed */
    if (cli_out_of_memory()) fflush(stderr), _exit(rc == EXIT_OK ? EXIT_ERR : rc);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* their reports run at exit and take their time */
    /* Short of address space (ulimit -v), an OpenBLAS worker that could not
       map its buffer retries for ever, and OpenBLAS's exit handler joins it:
       whatever the handlers do, the process ends 5 s on with this status */
    g_exit_rc = rc;
    signal(SIGALRM, exit_now);
    alarm(5);
#endif
    exit(rc);
}

/* OpenBLAS starts its threads in its library constructor, before main; when
 * it cannot (memory or thread limits) it prints why and raises SIGINT, which
 * ended the process with status 130 and no word of ours. The executable's
 * preinit array runs before any library's constructor: a handler put there
 * (only where SIGINT has its default action) says what happened and exits 1;
 * main gives SIGINT its action back. */
static struct sigaction g_start_sigint;
static void start_failed(int sig) {
    static const char msg[] = "gptscope: could not start: a library's start-up was stopped (OpenBLAS could not "
                              "create its threads: memory or thread limits, as said above; or Ctrl-C)\n";
    (void)sig;
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
    _exit(EXIT_ERR);
}
static void guard_start(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = start_failed;
    if (sigaction(SIGINT, NULL, &g_start_sigint) == 0 && g_start_sigint.sa_handler == SIG_DFL)
        sigaction(SIGINT, &sa, NULL);
}
__attribute__((section(".preinit_array"), used)) static void (*const g_preinit)(int, char **, char **) = guard_start;

int main(int argc, char **argv) {
    sigaction(SIGINT, &g_start_sigint, NULL); /* as it was before guard_start */
    if (argc < 2) {
#ifdef GPTSCOPE_HAVE_CHAT
        if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
            char *chat_argv[] = {"chat", NULL};
            finish(cmd_chat(1, chat_argv));
        }
#endif
        usage(stderr);
        finish(EXIT_USAGE);
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        finish(EXIT_OK);
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("gptscope %s\n", gpt2_version());
        finish(EXIT_OK);
    }
    opterr = 0; /* the commands report bad options themselves (cli_option_error) */
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(cmd, commands[i].name) == 0) finish(commands[i].run(argc - 1, argv + 1));
#ifdef GPTSCOPE_HAVE_CHAT
    if (cmd[0] == '-') { /* options and no command (gptscope -m DIR): the chat, as with no arguments */
        argv[0] = "chat";
        finish(cmd_chat(argc, argv));
    }
#endif
    cli_error("unknown command '%s'", cmd);
    fputc('\n', stderr);
    usage(stderr);
    finish(EXIT_USAGE);
}
