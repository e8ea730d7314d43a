/* cmd_convert.c — `gptscope convert IN OUT_DIR`: any model gptscope reads, written as a
 * Hugging Face directory of its own architecture (gpt2_model_save) that every other tool
 * reads too. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope convert IN OUT_DIR [--dtype f32|f16|bf16] [--force]\n"
    "  Loads the model at IN (any format -m takes: a Hugging Face directory,\n"
    "  pytorch_model.bin, nanoGPT's ckpt.pt, llm.c's .bin, GGUF) and writes OUT_DIR as a\n"
    "  Hugging Face directory of its own architecture (GPT-2, Llama, Mistral, Qwen2,\n"
    "  Qwen3, GPT-NeoX, Gemma): config.json, model.safetensors and the tokenizer: GPT-2's\n"
    "  vocab.json + merges.txt; for the others, a Hugging Face source's tokenizer files\n"
    "  as they are, else tokenizer.json, tokenizer_config.json (with the chat template)\n"
    "  and generation_config.json made from the model.\n"
    "  They are written beside OUT_DIR and moved in when all are complete:\n"
    "  an error or Ctrl-C leaves nothing. Padded vocabulary rows are dropped, biases\n"
    "  a checkpoint leaves out are written as zeros, the GELU form is kept.\n"
    "  --dtype  every tensor's type in OUT_DIR (f16 and bf16 round to nearest even).\n"
    "           Default: each matrix as stored (f32 for GGUF's block formats, which\n"
    "           are dequantized); norms, biases and positions in the matrices' type\n"
    "           where that holds them exactly, else f32: the same floats as loaded,\n"
    "           so the same logits, bit for bit\n"
    "  --force  OUT_DIR may hold files: those written are replaced, others kept\n";

typedef struct {
    const char *in, *out;
    gpt2_dtype dtype;
    int dtype_given, force;
} convert_opts;

typedef struct {
    gpt2_model *m;
    gpt2_dtype dtype;
    char files[512]; /* what was written beside model.safetensors: ", vocab.json, merges.txt" */
} convert_result;

/* The files a conversion writes besides config.json and model.safetensors, in this order. */
static const char *const other_files[] = {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                                          "special_tokens_map.json", "generation_config.json", "chat_template.jinja",
                                          "tokenizer.model", "added_tokens.json"};

/* Those of other_files in dir, as ", a, b". */
static void list_files(const char *dir, char *out, size_t cap) {
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof other_files / sizeof *other_files; i++) {
        char p[8192];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, other_files[i]);
        if (stat(p, &st) == 0 && k < cap) k += (size_t)snprintf(out + k, cap - k, ", %s", other_files[i]);
    }
}

static int dtype_option(const cli_opt *o, const char *arg, void *value) {
    (void)o;
    gpt2_dtype *dtype = value;
    if (!strcmp(arg, "f32")) *dtype = GPT2_DTYPE_F32;
    else if (!strcmp(arg, "f16")) *dtype = GPT2_DTYPE_F16;
    else if (!strcmp(arg, "bf16")) *dtype = GPT2_DTYPE_BF16;
    else {
        cli_error("--dtype: expected f32, f16 or bf16, found '%s'", arg);
        return 0;
    }
    return 1;
}

static int convert_parse(int argc, char **argv, convert_opts *o) {
    static const cli_opt rows[] = {
        {CLI_FN("dtype", 0, convert_opts, dtype, gpt2_dtype, dtype_option), .given = CLI_GIVEN(convert_opts, dtype_given)},
        {CLI_FLAG("force", 0, convert_opts, force)},
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc != CLI_PARSED) return rc;
    if (argc - optind < 2) return cli_usage_error(usage_text, "convert needs %s", argc == optind ? "IN and OUT_DIR" : "OUT_DIR");
    if (argc - optind > 2) return cli_usage_error(usage_text, "convert: unexpected argument '%s'", argv[optind + 2]);
    o->in = argv[optind];
    o->out = argv[optind + 1];
    return CLI_PARSED;
}

static int convert_run(const convert_opts *o, convert_result *r) {
    cli_outdir d;
    /* the target checked before a long load */
    if (!cli_outdir_begin(&d, o->out, o->force, "config.json, model.safetensors and the tokenizer's files"))
        return EXIT_ERR;
    if (!(r->m = cli_load_model(o->in))) return cli_outdir_abandon(&d), EXIT_ERR;
    const gpt2_dtype own = gpt2_model_dtype(r->m);
    /* a block format's dequantized values are floats: exact in F32 */
    r->dtype = o->dtype_given ? o->dtype : own <= GPT2_DTYPE_BF16 ? own : GPT2_DTYPE_F32;
    gpt2_error err;
    gpt2_status st = o->dtype_given ? gpt2_model_save(r->m, d.scratch, r->dtype, &err)
                                    : gpt2_model_save_stored(r->m, d.scratch, &err);
    if (st != GPT2_OK) {
        cli_outdir_abandon(&d);
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    list_files(d.scratch, r->files, sizeof r->files);
    return cli_outdir_commit(&d) ? EXIT_OK : EXIT_ERR;
}

static void convert_report(const convert_opts *o, const convert_result *r) {
    const gpt2_config *c = gpt2_model_config(r->m);
    printf("%s: config.json, model.safetensors (%s%s)%s\n", cli_show(o->out), gpt2_dtype_name(r->dtype),
           o->dtype_given ? "" : ", every value as loaded", r->files);
    printf("from %s: %s\n", cli_show(o->in), cli_show(gpt2_model_source(r->m)));
    printf("%d layers, %d heads, %d channels, %d positions, %d tokens\n", c->n_layer, c->n_head, c->n_embd, c->n_ctx,
           c->n_vocab);
}

int cmd_convert(int argc, char **argv) {
    convert_opts o = {0};
    convert_result r = {0};
    int rc = convert_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = convert_run(&o, &r)) == EXIT_OK) convert_report(&o, &r);
    gpt2_model_free(r.m);
    return rc;
}
