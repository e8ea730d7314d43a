/* cmd_train.c — `gptscope train`: train a GPT-2-architecture model on a text
 * file and write it as a model directory everything in gptscope loads.
 *
 * The last --val-fraction of the file (cut by gpt2_text_split) is held out;
 * the rest is the training split. Every --eval-every steps the validation loss
 * is estimated, a checkpoint written and the model exported, so an interrupted
 * run (Ctrl-C, or the machine going away) loses little and `--resume` goes on
 * exactly. At the end the exported model is scored on the held-out text the
 * way `gptscope eval --heldout F` scores it, and the figures go to
 * DIR/training.json.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope train --tokenizer DIR -o OUT [options] FILE\n"
    "  Trains a GPT-2-architecture model on FILE and writes OUT/{config.json,\n"
    "  model.safetensors,vocab.json,merges.txt}. The last --val-fraction of FILE\n"
    "  is held out for validation.\n"
    "model:     --layers N (4) --heads N (4) --embd N (128) --block N (128)\n"
    "training:  --batch N (16) --steps N (1000) --lr X (1e-3) --min-lr X (lr/10)\n"
    "           --warmup N (steps/10) --weight-decay X (0.1) --beta2 X (0.99)\n"
    "           --clip X (1.0) --dropout X (0.1) --seed N (1337) --threads N (all)\n"
    "           --attn-dropout X (0)  dropout on the attention probabilities\n"
    "           --short-block N --short-steps S   a sequence-length warmup: the first\n"
    "                           S steps train on windows of N tokens (N divides\n"
    "                           --block), block/N times as many per batch\n"
    "           --short-init-positions  at the switch, position rows N.. (never\n"
    "                           trained) start as a copy of row N-1\n"
    "           --short-offsets F  in the warmup, a fraction F (0..1) of the\n"
    "                           windows start at a random position row, so\n"
    "                           that the rows past N train too\n"
    "data:      --val-fraction F (0.1)\n"
    "           --bpe-dropout P  train on --bpe-copies K (8) segmentations of the\n"
    "                           training split, each merge skipped with probability\n"
    "                           P (BPE-dropout); validation keeps the usual one\n"
    "           --bpe-dropout-steps N  only the first N steps; then the usual one\n"
    "           --examples      each line of FILE is one example; all lines must be\n"
    "                           the same number of tokens (at most block + 1)\n"
    "progress:  --eval-every N (100) --eval-batches N (20) --log-every N (10)\n"
    "output:    --dtype f16|bf16|f32 (f16) --checkpoint FILE (OUT/checkpoint.bin)\n"
    "           --resume        continue from the checkpoint (model options ignored;\n"
    "                           --steps may extend the run)\n"
    "           --force         start over in an OUT that holds a model or checkpoint\n"
    "                           (else refused: a finished run is never replaced unasked)\n";

typedef struct {
    int32_t *ids;
    size_t n;
    int example_len;
} token_set;

/* Encodes text as one stream, or (examples) line by line, each line one
 * example of the same length. */
static int encode_split(const gpt2_tokenizer *tok, const char *path, const char *text, size_t len, int examples,
                        size_t line_base, token_set *out) {
    if (!examples) return cli_encode(tok, text, len, 0, &out->ids, &out->n);
    size_t cap = 0;
    size_t line_no = line_base;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        line_no++;
        if (end > at) {
            int32_t *ids = NULL;
            size_t n = 0;
            if (!cli_encode(tok, text + at, end - at, 0, &ids, &n)) return 0;
            if (out->example_len == 0) out->example_len = (int)n;
            if ((int)n != out->example_len) {
                cli_error("%s:%zu: %zu tokens, but the examples before it have %d (--examples needs equal lengths)",
                          path, line_no, n, out->example_len);
                free(ids);
                return 0;
            }
            if (out->n + n > cap) {
                cap = (out->n + n) * 2;
                int32_t *grown = realloc(out->ids, cap * sizeof *grown);
                if (!grown) {
                    free(ids);
                    cli_error("out of memory");
                    return 0;
                }
                out->ids = grown;
            }
            memcpy(out->ids + out->n, ids, n * sizeof *ids);
            out->n += n;
            free(ids);
        }
        at = end + 1;
    }
    return 1;
}

/* --bpe-dropout: the training split as copies segmented copies, one after
 * another, copy k drawn from (seed, k) so that a resume rebuilds the same. */
static int encode_dropout(const gpt2_tokenizer *tok, const char *text, size_t len, double p, int copies,
                          uint64_t seed, token_set *out) {
    for (int k = 0; k < copies; k++) {
        int32_t *ids;
        size_t n;
        gpt2_error err;
        uint64_t s = seed ^ (0x9E3779B97F4A7C15u * (uint64_t)(k + 1));
        if (gpt2_tokenizer_encode_dropout(tok, text, len, 0, p, s, &ids, &n, &err) != GPT2_OK) {
            cli_error("%s", err.msg);
            return 0;
        }
        if (n == 0) { /* an empty split: "holds no whole sequence" comes later */
            free(ids);
            continue;
        }
        int32_t *grown = realloc(out->ids, (out->n + n) * sizeof *grown);
        if (!grown) {
            free(ids);
            cli_error("out of memory for %d copies of the training split", copies);
            return 0;
        }
        memcpy(grown + out->n, ids, n * sizeof *ids);
        out->ids = grown;
        out->n += n;
        free(ids);
    }
    return 1;
}

static int copy_file(const char *from, const char *to_dir, const char *name) {
    char to[4096];
    snprintf(to, sizeof to, "%s/%s", to_dir, name);
    size_t len;
    char *data = cli_read_all(NULL, from, CLI_TEXT_MAX, &len);
    if (!data) return 0;
    gpt2_error err;
    int ok = gpt2_fileio_write_bytes(to, data, len, &err) == GPT2_OK;
    if (!ok) cli_error("%s", err.msg);
    free(data);
    return ok;
}

typedef struct {
    gpt2_train_params p;
    const char *out_dir, *tok_dir, *ckpt_opt, *path;
    double valf; /* --val-fraction */
    double bpe_dropout;
    int bpe_copies, bpe_steps; /* bpe_steps < 0: every step */
    int bpe_copies_given;
    int examples, resume, force, eval_every, eval_batches, log_every;
    int minlr_given, warmup_given, steps_given;
    gpt2_dtype dt;   /* of the exported model */
    char ckpt[4096]; /* --checkpoint, or OUT/checkpoint.bin */
} train_opts;

/* What the run reports: the held-out line and OUT/training.json. */
typedef struct {
    const char *data, *out_dir;
    double val_fraction, seconds;
    int examples;
    double bpe_dropout; /* 0: off */
    int bpe_copies, bpe_steps;
    size_t train_tokens, val_tokens, parameters;
    gpt2_train_params p;        /* as trained (a resumed run's own) */
    float train_loss, val_loss; /* NAN: none this run */
    int steps_run;
    int heldout;                /* the held-out split was scored: score */
    cli_score score;
} train_result;

/* --dtype: the exported model's */
static int dtype_option(const cli_opt *o, const char *s, void *value) {
    gpt2_dtype *dt = value;
    if (strcmp(s, "f16") == 0) *dt = GPT2_DTYPE_F16;
    else if (strcmp(s, "bf16") == 0) *dt = GPT2_DTYPE_BF16;
    else if (strcmp(s, "f32") == 0) *dt = GPT2_DTYPE_F32;
    else {
        cli_error("--dtype: '%s' is not one of f16, bf16, f32", s);
        return 0;
    }
    return 1;
}

#define T train_opts
static const cli_opt train_rows[] = {
    {CLI_INT("layers", 0, T, p.n_layer, 1, 256)},
    {CLI_INT("heads", 0, T, p.n_head, 1, 1024)},
    {CLI_INT("embd", 0, T, p.n_embd, 1, 16384)},
    {CLI_INT("block", 0, T, p.block_size, 1, 65536)},
    {CLI_INT("batch", 0, T, p.batch_size, 1, 65536)},
    {CLI_INT("steps", 0, T, p.steps, 0, 100000000), .given = CLI_GIVEN(T, steps_given)},
    {CLI_FLOAT("lr", 0, T, p.lr, 0, 10)},
    {CLI_FLOAT("min-lr", 0, T, p.min_lr, 0, 10), .given = CLI_GIVEN(T, minlr_given)},
    {CLI_INT("warmup", 0, T, p.warmup_steps, 0, 100000000), .given = CLI_GIVEN(T, warmup_given)},
    {CLI_FLOAT("weight-decay", 0, T, p.weight_decay, 0, 10)},
    {CLI_FLOAT("beta2", 0, T, p.beta2, 0, 0.999999)},
    {CLI_FLOAT("clip", 0, T, p.grad_clip, 0, 1e6)},
    {CLI_FLOAT("dropout", 0, T, p.dropout, 0, 0.95)},
    {CLI_FLOAT("attn-dropout", 0, T, p.attn_dropout, 0, 0.95)},
    {CLI_INT("short-block", 0, T, p.short_block, 1, 65536)},
    {CLI_INT("short-steps", 0, T, p.short_steps, 0, 100000000)},
    {CLI_FLAG("short-init-positions", 0, T, p.short_init_positions)},
    {CLI_FLOAT("short-offsets", 0, T, p.short_offsets, 0, 1)},
    {CLI_U64("seed", 0, T, p.seed, 0, 9007199254740991.0)}, /* 2^53 - 1: exact in JSON */
    {CLI_INT("threads", 0, T, p.n_threads, 1, 1024)},
    {CLI_DOUBLE("val-fraction", 0, T, valf, 0.0, 0.9)},
    {CLI_FLAG("examples", 0, T, examples)},
    {CLI_DOUBLE("bpe-dropout", 0, T, bpe_dropout, 0.0, 0.9)},
    {CLI_INT("bpe-copies", 0, T, bpe_copies, 1, 1024), .given = CLI_GIVEN(T, bpe_copies_given)},
    {CLI_INT("bpe-dropout-steps", 0, T, bpe_steps, 0, 100000000)},
    {CLI_INT("eval-every", 0, T, eval_every, 1, 100000000)},
    {CLI_INT("eval-batches", 0, T, eval_batches, 1, 1000000)},
    {CLI_INT("log-every", 0, T, log_every, 1, 100000000)},
    {CLI_FN("dtype", 0, T, dt, gpt2_dtype, dtype_option)},
    {CLI_STR("checkpoint", 0, T, ckpt_opt)},
    {CLI_FLAG("resume", 0, T, resume)},
    {CLI_FLAG("force", 0, T, force)},
    {CLI_STR("tokenizer", 0, T, tok_dir)},
    {CLI_STR(NULL, 'o', T, out_dir)},
};
#undef T

static int train_parse(int argc, char **argv, train_opts *o) {
    int rc = cli_parse_options(argc, argv, train_rows, CLI_ROWS(train_rows), o, usage_text);
    if (rc == CLI_PARSED &&
        (cli_positional(usage_text, "train", argc, argv, 1, "a FILE to train on") != EXIT_OK ||
         cli_required(usage_text, "train", "--tokenizer DIR", !!o->tok_dir, "-o OUT", !!o->out_dir, NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    if (rc != CLI_PARSED) return rc;
    if ((o->bpe_steps >= 0 || o->bpe_copies_given) && !(o->bpe_dropout > 0)) {
        cli_error("%s: no --bpe-dropout P to go with it", o->bpe_steps >= 0 ? "--bpe-dropout-steps" : "--bpe-copies");
        return EXIT_USAGE;
    }
    if (o->bpe_dropout > 0 && o->examples) {
        cli_error("--bpe-dropout and --examples: segmenting examples at random would break their equal lengths");
        return EXIT_USAGE;
    }
    if (!o->minlr_given) o->p.min_lr = o->p.lr / 10;
    if (!o->warmup_given) o->p.warmup_steps = o->p.steps / 10;
    o->path = argv[optind];
    if (o->ckpt_opt) snprintf(o->ckpt, sizeof o->ckpt, "%s", o->ckpt_opt);
    else snprintf(o->ckpt, sizeof o->ckpt, "%s/checkpoint.bin", o->out_dir);
    return CLI_PARSED;
}

/* Writes the model directory: weights, config, tokenizer files. */
static int export_model(gpt2_trainer *tr, const char *out_dir, const char *tok_dir, gpt2_dtype dt, int eot) {
    gpt2_error err;
    if (gpt2_trainer_export(tr, out_dir, dt, eot, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return 0;
    }
    if (strcmp(tok_dir, out_dir) == 0) return 1;
    /* the files the tokenizer was read from, chosen as gpt2_tokenizer_load
     * chooses them, under a model directory's names: vocab.json + merges.txt,
     * else GPT-2's own encoder.json + vocab.bpe (the same formats), else a
     * tokenizer.json with its tokenizer_config.json where there is one */
    static const char *const sets[][2][2] = {{{"vocab.json", "vocab.json"}, {"merges.txt", "merges.txt"}},
                                             {{"encoder.json", "vocab.json"}, {"vocab.bpe", "merges.txt"}},
                                             {{"tokenizer.json", "tokenizer.json"}, {"tokenizer_config.json", NULL}}};
    char from[4096];
    struct stat st;
    for (int i = 0; i < 3; i++) {
        snprintf(from, sizeof from, "%s/%s", tok_dir, sets[i][0][0]);
        if (stat(from, &st) != 0) continue;
        for (int f = 0; f < 2; f++) {
            const char *name = sets[i][f][0], *as = sets[i][f][1] ? sets[i][f][1] : name;
            snprintf(from, sizeof from, "%s/%s", tok_dir, name);
            if (f == 1 && !sets[i][f][1] && stat(from, &st) != 0) continue; /* optional */
            if (!copy_file(from, out_dir, as)) return 0;
        }
        return 1;
    }
    cli_error("%s: no vocab.json + merges.txt, encoder.json + vocab.bpe or tokenizer.json to copy beside the model",
              tok_dir);
    return 0;
}

/* A run in progress. */
typedef struct {
    gpt2_tokenizer *tok;
    gpt2_trainer *tr;
    gpt2_train_params p;  /* the options', then the trainer's own */
    char *text;
    size_t len, cut;      /* the held-out split: text[cut, len) */
    token_set train, val;
    token_set plain;      /* --bpe-dropout-steps: the usual training tokens, after those steps */
    uint64_t data_hash;   /* what a checkpoint must have been trained on */
    int start_step;       /* > 0 when resumed */
    float loss, val_loss; /* the last figures; NAN: none yet */
    double t0;            /* when training started */
    volatile sig_atomic_t *stop;
} train_job;

/* OUT created, the tokenizer loaded, FILE read, split and encoded. */
static int job_data(const train_opts *o, train_job *j) {
    gpt2_error err;
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        cli_error("%s: cannot create directory: %s", o->out_dir, strerror(errno));
        return EXIT_ERR;
    }
    if (gpt2_tokenizer_load(o->tok_dir, &j->tok, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    if (!(j->text = cli_read_all(NULL, o->path, CLI_TEXT_MAX, &j->len))) return EXIT_ERR;
    /* the split: examples cut at a line start so no example straddles it */
    size_t cut = gpt2_text_split(j->text, j->len, 1.0 - o->valf);
    if (o->examples)
        while (cut > 0 && cut < j->len && j->text[cut - 1] != '\n') cut--;
    size_t lines_before = 0;
    for (size_t i = 0; i < cut; i++) lines_before += j->text[i] == '\n';
    j->cut = cut;
    if (o->bpe_dropout > 0 ? !encode_dropout(j->tok, j->text, cut, o->bpe_dropout, o->bpe_copies, o->p.seed, &j->train)
                           : !encode_split(j->tok, o->path, j->text, cut, o->examples, 0, &j->train))
        return EXIT_ERR;
    if (o->bpe_dropout > 0 && o->bpe_steps >= 0 && !encode_split(j->tok, o->path, j->text, cut, 0, 0, &j->plain))
        return EXIT_ERR;
    if (!encode_split(j->tok, o->path, j->text + cut, j->len - cut, o->examples, lines_before, &j->val))
        return EXIT_ERR;
    if (o->examples && j->val.example_len && j->train.example_len != j->val.example_len) {
        cli_error("%s: held-out lines have %d tokens, training lines %d", o->path, j->val.example_len,
                  j->train.example_len);
        return EXIT_ERR;
    }
    return EXIT_OK;
}

/* A new trainer, or the checkpoint's after checking it was trained on this data. */
static int job_trainer(const train_opts *o, train_job *j) {
    gpt2_error err;
    if (o->examples && j->train.example_len > j->p.block_size + 1) j->p.block_size = j->train.example_len - 1;
    j->data_hash = gpt2_tokens_hash(j->train.ids, j->train.n) ^ (uint64_t)j->train.example_len;
    if (j->plain.n) /* and which steps train on which */
        j->data_hash ^= (gpt2_tokens_hash(j->plain.ids, j->plain.n) << 1) ^ (0x9E3779B97F4A7C15u * (uint64_t)o->bpe_steps);
    j->p.n_vocab = gpt2_tokenizer_n_vocab(j->tok);
    if (!o->resume) {
        if (gpt2_trainer_new(j->p, &j->tr, &err) == GPT2_OK) return EXIT_OK;
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    uint64_t hash;
    if (gpt2_trainer_resume(o->ckpt, j->p.n_threads, &j->tr, &hash, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    if (hash != j->data_hash) {
        cli_error("%s: the checkpoint was trained on other data (token hash differs): same FILE, tokenizer, "
                  "--val-fraction, --examples, --bpe-dropout, --bpe-copies, --bpe-dropout-steps and --seed are needed to resume",
                  o->ckpt);
        return EXIT_ERR;
    }
    if (o->steps_given && gpt2_trainer_set_steps(j->tr, j->p.steps, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    j->p = *gpt2_trainer_params(j->tr);
    fprintf(stderr, "resumed %s at step %d of %d\n", cli_show(o->ckpt), gpt2_trainer_step_count(j->tr), j->p.steps);
    return EXIT_OK;
}

/* Tokens per sequence at step (0-based), and sequences per batch. */
static int seq_len(const train_opts *o, const train_job *j, int step) {
    if (o->examples) return j->train.example_len - 1;
    return step < j->p.short_steps ? j->p.short_block : j->p.block_size;
}
static int batch_len(const train_opts *o, const train_job *j, int step) {
    return o->examples ? j->p.batch_size : j->p.batch_size * (j->p.block_size / seq_len(o, j, step));
}

/* The three lines on stderr saying what is trained on what, and how. */
static void job_describe(const train_opts *o, const train_job *j, size_t n_params) {
    const gpt2_train_params *p = &j->p;
    fprintf(stderr,
            "model: %d layers, %d heads, %d wide, block %d, vocab %d: %.2fM parameters\n"
            "data: %zu training tokens, %zu held-out tokens (%s, last %.0f%% = %zu bytes)%s\n"
            "training: %d steps of %d x %d tokens, lr %g -> %g, warmup %d, dropout %g (attention %g), seed %llu\n",
            p->n_layer, p->n_head, p->n_embd, p->block_size, p->n_vocab, n_params / 1e6, j->train.n, j->val.n,
            o->path, o->valf * 100, j->len - j->cut, o->examples ? ", one example per line" : "", p->steps,
            batch_len(o, j, p->steps), seq_len(o, j, p->steps), p->lr, p->min_lr, p->warmup_steps, p->dropout,
            p->attn_dropout, (unsigned long long)p->seed);
    if (o->bpe_dropout > 0)
        fprintf(stderr, "  training tokens: %d segmentations of the split with BPE-dropout %g (validation: the usual one)\n",
                o->bpe_copies, o->bpe_dropout);
    if (j->plain.n && o->bpe_steps < p->steps)
        fprintf(stderr, "  after step %d: the usual segmentation (%zu tokens)\n", o->bpe_steps, j->plain.n);
    if (p->short_steps > 0)
        fprintf(stderr, "  the first %d steps: %d x %d tokens (sequence-length warmup; validation on %d-token windows "
                "meanwhile)\n", p->short_steps, batch_len(o, j, 0), p->short_block, p->short_block);
    if (p->short_steps > 0 && p->short_init_positions)
        fprintf(stderr, "  after step %d, position rows %d..%d start as row %d (--short-init-positions)\n",
                p->short_steps, p->short_block, p->block_size - 1, p->short_block - 1);
    if (p->short_steps > 0 && p->short_offsets >= 1)
        fprintf(stderr, "  every warmup window starts at a random position row 0..%d (--short-offsets)\n",
                p->block_size - p->short_block);
    else if (p->short_steps > 0 && p->short_offsets > 0)
        fprintf(stderr, "  a fraction %g of the warmup's windows start at random position rows 0..%d "
                "(--short-offsets)\n", (double)p->short_offsets, p->block_size - p->short_block);
}

/* The checkpoint and the exported model, as they stand. */
static int job_save(const train_opts *o, const train_job *j) {
    gpt2_error err;
    if (gpt2_trainer_save(j->tr, o->ckpt, j->data_hash, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return 0;
    }
    return export_model(j->tr, o->out_dir, o->tok_dir, o->dt, gpt2_tokenizer_eot(j->tok));
}

/* Steps until the last or Ctrl-C (a step cut short is undone), logging,
 * estimating the held-out loss and saving every eval_every steps. */
static int job_steps(const train_opts *o, train_job *j) {
    gpt2_train_data td = {j->train.ids, j->train.n, j->train.example_len},
                    vd = {j->val.ids, j->val.n, j->val.example_len}, plain = {j->plain.ids, j->plain.n, 0};
    const int steps = j->p.steps;
    double t_log = j->t0, elapsed_train = 0;
    int steps_since_log = 0;
    gpt2_error err;
    while (gpt2_trainer_step_count(j->tr) < steps && !*j->stop) {
        double ts = cli_now();
        const int past = j->plain.n && gpt2_trainer_step_count(j->tr) >= o->bpe_steps;
        gpt2_status st = gpt2_trainer_step(j->tr, past ? &plain : &td, &j->loss, &err);
        if (st == GPT2_CANCELLED) break; /* Ctrl-C mid-step: the step is undone */
        if (st != GPT2_OK) {
            cli_error("%s", err.msg);
            return EXIT_ERR;
        }
        elapsed_train += cli_now() - ts;
        if (*j->stop) break;
        steps_since_log++;
        const int step = gpt2_trainer_step_count(j->tr);
        const int at_eval = step % o->eval_every == 0 || step == steps;
        if (at_eval && vd.n_tokens) j->val_loss = gpt2_trainer_eval(j->tr, &vd, o->eval_batches);
        if (*j->stop) break; /* the held-out figure was cut short */
        if (step % o->log_every == 0 || at_eval || step == 1) {
            double now = cli_now(),
                   tok_s = steps_since_log * (double)batch_len(o, j, step - 1) * seq_len(o, j, step - 1) / (now - t_log);
            double eta = (steps - step) * (elapsed_train / (step - j->start_step));
            fprintf(stderr, "step %6d/%d  loss %.4f  val %.4f  lr %.2e  %.0f tok/s  %.0f s  eta %.0f s\n", step,
                    steps, j->loss, j->val_loss, gpt2_trainer_lr(j->tr, step - 1), tok_s, now - j->t0, eta);
            t_log = now, steps_since_log = 0;
        }
        if (at_eval && !job_save(o, j)) return EXIT_ERR;
    }
    return EXIT_OK;
}

/* Training, then the last checkpoint and model; 130 after Ctrl-C (saved too). */
static int job_train(const train_opts *o, train_job *j, train_result *r) {
    j->stop = cli_interrupt_flag();
    gpt2_trainer_set_cancel(j->tr, cli_interrupted, NULL);
    gpt2_trainer_set_stop_flag(j->tr, j->stop); /* within a layer too: Ctrl-C at 1,024 positions */
    j->t0 = cli_now();
    j->start_step = gpt2_trainer_step_count(j->tr);
    j->loss = j->val_loss = NAN;
    if (job_steps(o, j) != EXIT_OK) return EXIT_ERR;
    if (*j->stop)
        fprintf(stderr, "interrupted after step %d of %d; saving the checkpoint and the model\n",
                gpt2_trainer_step_count(j->tr), j->p.steps);
    if (!job_save(o, j)) return EXIT_ERR;
    r->seconds = cli_now() - j->t0;
    if (*j->stop) {
        fprintf(stderr, "saved checkpoint %s and model %s; --resume goes on from step %d\n", cli_show(o->ckpt),
                cli_show(o->out_dir), gpt2_trainer_step_count(j->tr));
        return 130;
    }
    return EXIT_OK;
}

/* The shipped (exported, possibly 16-bit) model on the held-out text, as `eval --heldout` scores it. */
static int job_score(const train_opts *o, const train_job *j, train_result *r) {
    if (j->len <= j->cut) return EXIT_OK;
    gpt2_model *m = cli_load_model(o->out_dir);
    if (!m) return EXIT_ERR;
    int rc = cli_score_text(m, o->path, j->text + j->cut, j->len - j->cut,
                            CLI_SCORE_QUIET | (o->examples ? CLI_SCORE_LINES : 0), 0, j->p.n_threads, NULL,
                            &r->score);
    gpt2_model_free(m);
    r->heldout = rc == EXIT_OK;
    return rc;
}

/* A new run (no --resume, no --force) never replaces a model or checkpoint. */
static int out_vacant(const train_opts *o) {
    static const char *const model[] = {"config.json", "model.safetensors", NULL};
    const char *ckpt[] = {o->ckpt, NULL};
    const char *how = "--resume continues that run, --force starts over and replaces it; or give another -o";
    return o->resume || (cli_outdir_vacant(o->out_dir, model, o->force, how) && cli_outdir_vacant(NULL, ckpt, o->force, how));
}

static int train_run(const train_opts *o, train_result *r) {
    train_job j = {.p = o->p};
    if (!out_vacant(o)) return EXIT_ERR;
    int rc = job_data(o, &j);
    if (rc == EXIT_OK) rc = job_trainer(o, &j);
    if (rc == EXIT_OK) {
        r->parameters = gpt2_trainer_n_params(j.tr);
        job_describe(o, &j, r->parameters);
        rc = job_train(o, &j, r);
    }
    if (rc == EXIT_OK) rc = job_score(o, &j, r);
    r->data = o->path, r->out_dir = o->out_dir, r->val_fraction = o->valf, r->examples = o->examples;
    r->bpe_dropout = o->bpe_dropout, r->bpe_copies = o->bpe_dropout > 0 ? o->bpe_copies : 0;
    r->bpe_steps = o->bpe_dropout > 0 ? (o->bpe_steps < 0 || o->bpe_steps > j.p.steps ? j.p.steps : o->bpe_steps) : 0;
    r->train_tokens = j.train.n, r->val_tokens = j.val.n, r->p = j.p;
    r->train_loss = j.loss, r->val_loss = j.val_loss;
    r->steps_run = j.tr ? gpt2_trainer_step_count(j.tr) - j.start_step : 0;
    free(j.train.ids);
    free(j.plain.ids);
    free(j.val.ids);
    free(j.text);
    gpt2_trainer_free(j.tr);
    gpt2_tokenizer_free(j.tok);
    return rc;
}

/* A float figure as the digits it has (0.001f -> 0.001, not 0.0010000000474974513). */
static double float_figure(float f) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", (double)f);
    return strtod(b, NULL);
}

/* key: v, or null when v is not finite (JSON has no NaN) with why in reasons[key]. */
static int add_figure(cJSON *o, cJSON *reasons, const char *key, double v, const char *why) {
    if (isfinite(v)) return cJSON_AddNumberToObject(o, key, v) != NULL;
    return cJSON_AddNullToObject(o, key) && cJSON_AddStringToObject(reasons, key, why);
}

/* training.json: the settings, then the figures (null with a reason when the run has none). */
static cJSON *report_json(const train_result *r) {
    const gpt2_train_params *p = &r->p;
    const struct {
        const char *key;
        double v;
    } settings[] = {
        {"val_fraction", r->val_fraction}, {"bpe_dropout", r->bpe_dropout}, {"bpe_copies", r->bpe_copies},
        {"bpe_dropout_steps", r->bpe_steps},
        {"train_tokens", (double)r->train_tokens},
        {"val_tokens", (double)r->val_tokens}, {"n_layer", p->n_layer}, {"n_head", p->n_head},
        {"n_embd", p->n_embd}, {"block_size", p->block_size}, {"n_vocab", p->n_vocab},
        {"parameters", (double)r->parameters}, {"steps", p->steps}, {"batch_size", p->batch_size},
        {"lr", float_figure(p->lr)}, {"min_lr", float_figure(p->min_lr)}, {"warmup_steps", p->warmup_steps},
        {"weight_decay", float_figure(p->weight_decay)}, {"beta2", float_figure(p->beta2)},
        {"dropout", float_figure(p->dropout)}, {"attn_dropout", float_figure(p->attn_dropout)},
        {"short_block", p->short_steps ? p->short_block : 0},
        {"short_steps", p->short_steps}, {"short_init_positions", p->short_init_positions},
        {"short_offsets", float_figure(p->short_offsets)},
        {"seed", (double)p->seed}, {"threads", p->n_threads},
        {"seconds_this_run", round(r->seconds * 10) / 10},
    };
    const char *no_val = r->val_fraction == 0 ? "--val-fraction 0: nothing is held out" : "the held-out split is empty";
    const char *no_step = "no training step ran in this run";
    const struct {
        const char *key;
        double v;
        const char *why;
    } figures[] = {
        {"final_train_loss", float_figure(r->train_loss), no_step},
        {"final_val_loss_estimate", float_figure(r->val_loss),
         r->val_tokens == 0  ? no_val
         : r->steps_run == 0 ? no_step
                             : "the held-out tokens hold no whole sequence to estimate it on"},
        {"heldout_nats_per_token", r->heldout ? r->score.nats_per_token : NAN, no_val},
        {"heldout_bits_per_byte", r->heldout ? r->score.bits_per_byte : NAN, no_val},
    };
    cJSON *o = cJSON_CreateObject(), *why = cJSON_CreateObject();
    int ok = o && why && cJSON_AddStringToObject(o, "data", r->data);
    for (size_t i = 0; ok && i < sizeof settings / sizeof *settings; i++)
        ok = cJSON_AddNumberToObject(o, settings[i].key, settings[i].v) != NULL;
    for (size_t i = 0; ok && i < sizeof figures / sizeof *figures; i++)
        ok = add_figure(o, why, figures[i].key, figures[i].v, figures[i].why);
    if (ok && cJSON_GetArraySize(why) > 0) {
        ok = cJSON_AddItemToObject(o, "null_reasons", why);
        why = NULL;
    }
    cJSON_Delete(why);
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

/* Writes out_dir/training.json atomically (gpt2_fileio). */
static int write_report(const train_result *r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/training.json", r->out_dir);
    cJSON *o = report_json(r);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        cli_error("%s: out of memory building it", path);
        return 0;
    }
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON_Print's buffer ends with a NUL we may overwrite */
    gpt2_error err;
    int ok = gpt2_fileio_write_bytes(path, text, n + 1, &err) == GPT2_OK;
    if (!ok) cli_error("%s", err.msg);
    free(text);
    return ok;
}

/* The held-out figure on stdout, then the whole record as OUT/training.json. */
static int train_report(const train_result *r) {
    if (r->heldout)
        printf("held-out %.0f%% of %s: %.4f nats/token, %.4f bits/byte (%ld tokens scored%s)\n"
               "  reproduce: gptscope eval -m %s --heldout %g%s %s\n",
               r->val_fraction * 100, cli_show(r->data), r->score.nats_per_token, r->score.bits_per_byte,
               r->score.scored, r->examples ? ", each line on its own" : "", cli_show(r->out_dir), r->val_fraction,
               r->examples ? " --examples" : "", cli_show(r->data));
    return write_report(r) ? EXIT_OK : EXIT_ERR;
}

int cmd_train(int argc, char **argv) {
    train_opts o = {.p = gpt2_train_default_params(), .valf = 0.1, .eval_every = 100, .eval_batches = 20,
                    .log_every = 10, .dt = GPT2_DTYPE_F16, .bpe_copies = 8, .bpe_steps = -1};
    train_result r = {0};
    int rc = train_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = train_run(&o, &r)) == EXIT_OK) rc = train_report(&r);
    return rc;
}
