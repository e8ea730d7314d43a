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
    "data:      --val-fraction F (0.1)\n"
    "           --examples      each line of FILE is one example; all lines must be\n"
    "                           the same number of tokens (at most block + 1)\n"
    "progress:  --eval-every N (100) --eval-batches N (20) --log-every N (10)\n"
    "output:    --dtype f16|bf16|f32 (f16) --checkpoint FILE (OUT/checkpoint.bin)\n"
    "           --resume        continue from the checkpoint (model options ignored;\n"
    "                           --steps may extend the run)\n";

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

static int parse_dtype(const char *s, gpt2_dtype *dt) {
    if (strcmp(s, "f16") == 0) *dt = GPT2_DTYPE_F16;
    else if (strcmp(s, "bf16") == 0) *dt = GPT2_DTYPE_BF16;
    else if (strcmp(s, "f32") == 0) *dt = GPT2_DTYPE_F32;
    else {
        cli_error("--dtype: '%s' is not one of f16, bf16, f32", s);
        return 0;
    }
    return 1;
}

/* Writes the model directory: weights, config, tokenizer files. */
static int export_model(gpt2_trainer *tr, const char *out_dir, const char *tok_dir, gpt2_dtype dt, int eot) {
    gpt2_error err;
    if (gpt2_trainer_export(tr, out_dir, dt, eot, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return 0;
    }
    if (strcmp(tok_dir, out_dir) == 0) return 1;
    char from[4096];
    snprintf(from, sizeof from, "%s/vocab.json", tok_dir);
    if (!copy_file(from, out_dir, "vocab.json")) return 0;
    snprintf(from, sizeof from, "%s/merges.txt", tok_dir);
    return copy_file(from, out_dir, "merges.txt");
}


/* What OUT/training.json records of a finished run. */
typedef struct {
    const char *data;
    double val_fraction, seconds;
    size_t train_tokens, val_tokens, parameters;
    const gpt2_train_params *p;
    float train_loss, val_loss; /* NAN: none this run */
    int steps_run;
    const cli_score *score;     /* NULL: nothing held out */
} train_report;

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

static cJSON *report_json(const train_report *r) {
    const gpt2_train_params *p = r->p;
    const char *no_val = r->val_fraction == 0 ? "--val-fraction 0: nothing is held out" : "the held-out split is empty";
    const char *no_step = "no training step ran in this run";
    cJSON *o = cJSON_CreateObject(), *why = cJSON_CreateObject();
    int ok = o && why && cJSON_AddStringToObject(o, "data", r->data) &&
             cJSON_AddNumberToObject(o, "val_fraction", r->val_fraction) &&
             cJSON_AddNumberToObject(o, "train_tokens", (double)r->train_tokens) &&
             cJSON_AddNumberToObject(o, "val_tokens", (double)r->val_tokens) &&
             cJSON_AddNumberToObject(o, "n_layer", p->n_layer) && cJSON_AddNumberToObject(o, "n_head", p->n_head) &&
             cJSON_AddNumberToObject(o, "n_embd", p->n_embd) &&
             cJSON_AddNumberToObject(o, "block_size", p->block_size) &&
             cJSON_AddNumberToObject(o, "n_vocab", p->n_vocab) &&
             cJSON_AddNumberToObject(o, "parameters", (double)r->parameters) &&
             cJSON_AddNumberToObject(o, "steps", p->steps) && cJSON_AddNumberToObject(o, "batch_size", p->batch_size) &&
             cJSON_AddNumberToObject(o, "lr", float_figure(p->lr)) &&
             cJSON_AddNumberToObject(o, "min_lr", float_figure(p->min_lr)) &&
             cJSON_AddNumberToObject(o, "warmup_steps", p->warmup_steps) &&
             cJSON_AddNumberToObject(o, "weight_decay", float_figure(p->weight_decay)) &&
             cJSON_AddNumberToObject(o, "beta2", float_figure(p->beta2)) &&
             cJSON_AddNumberToObject(o, "dropout", float_figure(p->dropout)) &&
             cJSON_AddNumberToObject(o, "seed", (double)p->seed) &&
             cJSON_AddNumberToObject(o, "threads", p->n_threads) &&
             cJSON_AddNumberToObject(o, "seconds_this_run", round(r->seconds * 10) / 10) &&
             add_figure(o, why, "final_train_loss", float_figure(r->train_loss), no_step) &&
             add_figure(o, why, "final_val_loss_estimate", float_figure(r->val_loss),
                        r->val_tokens == 0 ? no_val
                        : r->steps_run == 0 ? no_step
                                            : "the held-out tokens hold no whole sequence to estimate it on") &&
             add_figure(o, why, "heldout_nats_per_token", r->score ? r->score->nats_per_token : NAN, no_val) &&
             add_figure(o, why, "heldout_bits_per_byte", r->score ? r->score->bits_per_byte : NAN, no_val);
    if (ok && cJSON_GetArraySize(why) > 0) {
        ok = cJSON_AddItemToObject(o, "null_reasons", why);
        why = NULL;
    }
    cJSON_Delete(why);
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

/* Writes out_dir/training.json atomically (gpt2_fileio). */
static int write_report(const char *out_dir, const train_report *r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/training.json", out_dir);
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

int cmd_train(int argc, char **argv) {
    enum {
        O_LAYERS = 256, O_HEADS, O_EMBD, O_BLOCK, O_BATCH, O_STEPS, O_LR, O_MINLR, O_WARMUP, O_WD, O_BETA2, O_CLIP,
        O_DROPOUT, O_SEED, O_THREADS, O_VALF, O_EXAMPLES, O_EVAL_EVERY, O_EVAL_BATCHES, O_LOG_EVERY, O_DTYPE,
        O_CKPT, O_RESUME, O_TOK
    };
    static const struct option opts[] = {
        {"layers", required_argument, 0, O_LAYERS},   {"heads", required_argument, 0, O_HEADS},
        {"embd", required_argument, 0, O_EMBD},       {"block", required_argument, 0, O_BLOCK},
        {"batch", required_argument, 0, O_BATCH},     {"steps", required_argument, 0, O_STEPS},
        {"lr", required_argument, 0, O_LR},           {"min-lr", required_argument, 0, O_MINLR},
        {"warmup", required_argument, 0, O_WARMUP},   {"weight-decay", required_argument, 0, O_WD},
        {"beta2", required_argument, 0, O_BETA2},     {"clip", required_argument, 0, O_CLIP},
        {"dropout", required_argument, 0, O_DROPOUT}, {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, O_THREADS}, {"val-fraction", required_argument, 0, O_VALF},
        {"examples", no_argument, 0, O_EXAMPLES},     {"eval-every", required_argument, 0, O_EVAL_EVERY},
        {"eval-batches", required_argument, 0, O_EVAL_BATCHES},
        {"log-every", required_argument, 0, O_LOG_EVERY},
        {"dtype", required_argument, 0, O_DTYPE},     {"checkpoint", required_argument, 0, O_CKPT},
        {"resume", no_argument, 0, O_RESUME},         {"tokenizer", required_argument, 0, O_TOK},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    gpt2_train_params p = gpt2_train_default_params();
    const char *out_dir = NULL, *tok_dir = NULL, *ckpt_opt = NULL;
    int examples = 0, resume = 0, eval_every = 100, eval_batches = 20, log_every = 10, c;
    int set_minlr = 0, set_warmup = 0, set_steps = 0;
    double valf = 0.1;
    gpt2_dtype dt = GPT2_DTYPE_F16;
    long v;
    double d;
#define INT_OPT(name, lo, hi, field) \
    if (!cli_parse_int(name, optarg, lo, hi, &v)) return EXIT_USAGE; \
    field = (int)v;
#define FLT_OPT(name, lo, hi, field) \
    if (!cli_parse_float(name, optarg, lo, hi, &d)) return EXIT_USAGE; \
    field = (float)d;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case O_TOK: tok_dir = optarg; break;
        case O_LAYERS: INT_OPT("--layers", 1, 256, p.n_layer) break;
        case O_HEADS: INT_OPT("--heads", 1, 1024, p.n_head) break;
        case O_EMBD: INT_OPT("--embd", 1, 16384, p.n_embd) break;
        case O_BLOCK: INT_OPT("--block", 1, 65536, p.block_size) break;
        case O_BATCH: INT_OPT("--batch", 1, 65536, p.batch_size) break;
        case O_STEPS: INT_OPT("--steps", 0, 100000000, p.steps) set_steps = 1; break;
        case O_LR: FLT_OPT("--lr", 0, 10, p.lr) break;
        case O_MINLR: FLT_OPT("--min-lr", 0, 10, p.min_lr) set_minlr = 1; break;
        case O_WARMUP: INT_OPT("--warmup", 0, 100000000, p.warmup_steps) set_warmup = 1; break;
        case O_WD: FLT_OPT("--weight-decay", 0, 10, p.weight_decay) break;
        case O_BETA2: FLT_OPT("--beta2", 0, 0.999999, p.beta2) break;
        case O_CLIP: FLT_OPT("--clip", 0, 1e6, p.grad_clip) break;
        case O_DROPOUT: FLT_OPT("--dropout", 0, 0.95, p.dropout) break;
        case O_SEED:
            if (!cli_parse_int("--seed", optarg, 0, 9007199254740991L, &v)) return EXIT_USAGE;
            p.seed = (uint64_t)v;
            break;
        case O_THREADS: INT_OPT("--threads", 1, 1024, p.n_threads) break;
        case O_VALF:
            if (!cli_parse_float("--val-fraction", optarg, 0.0, 0.9, &valf)) return EXIT_USAGE;
            break;
        case O_EXAMPLES: examples = 1; break;
        case O_EVAL_EVERY: INT_OPT("--eval-every", 1, 100000000, eval_every) break;
        case O_EVAL_BATCHES: INT_OPT("--eval-batches", 1, 1000000, eval_batches) break;
        case O_LOG_EVERY: INT_OPT("--log-every", 1, 100000000, log_every) break;
        case O_DTYPE:
            if (!parse_dtype(optarg, &dt)) return EXIT_USAGE;
            break;
        case O_CKPT: ckpt_opt = optarg; break;
        case O_RESUME: resume = 1; break;
        case 'h': return cli_usage(1, usage_text);
        default: return cli_option_error(c, argv, usage_text);
        }
    }
#undef INT_OPT
#undef FLT_OPT
    int bad = cli_positional(usage_text, "train", argc, argv, 1, "a FILE to train on");
    if (!bad) bad = cli_required(usage_text, "train", "--tokenizer DIR", !!tok_dir, "-o OUT", !!out_dir, NULL);
    if (bad) return bad;
    if (!set_minlr) p.min_lr = p.lr / 10;
    if (!set_warmup) p.warmup_steps = p.steps / 10;
    const char *path = argv[optind];
    char ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%s", ckpt_opt ? ckpt_opt : "");
    if (!ckpt_opt) snprintf(ckpt, sizeof ckpt, "%s/checkpoint.bin", out_dir);

    int rc = EXIT_ERR;
    size_t len = 0;
    char *text = NULL;
    gpt2_tokenizer *tok = NULL;
    gpt2_trainer *tr = NULL;
    token_set train = {0}, val = {0};
    gpt2_error err;
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        cli_error("%s: cannot create directory: %s", out_dir, strerror(errno));
        goto out;
    }
    if (gpt2_tokenizer_load(tok_dir, &tok, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    if (!(text = cli_read_all(NULL, path, CLI_TEXT_MAX, &len))) goto out;
    /* the split: examples cut at a line start so no example straddles it */
    size_t cut = gpt2_text_split(text, len, 1.0 - valf);
    if (examples)
        while (cut > 0 && cut < len && text[cut - 1] != '\n') cut--;
    size_t lines_before = 0;
    for (size_t i = 0; i < cut; i++) lines_before += text[i] == '\n';
    if (!encode_split(tok, path, text, cut, examples, 0, &train) ||
        !encode_split(tok, path, text + cut, len - cut, examples, lines_before, &val))
        goto out;
    if (examples && val.example_len && train.example_len != val.example_len) {
        cli_error("%s: held-out lines have %d tokens, training lines %d", path, val.example_len, train.example_len);
        goto out;
    }
    if (examples && train.example_len > p.block_size + 1) p.block_size = train.example_len - 1;
    const uint64_t data_hash = gpt2_tokens_hash(train.ids, train.n) ^ (uint64_t)train.example_len;
    p.n_vocab = gpt2_tokenizer_n_vocab(tok);
    if (resume) {
        uint64_t hash;
        if (gpt2_trainer_resume(ckpt, p.n_threads, &tr, &hash, &err) != GPT2_OK) {
            cli_error("%s", err.msg);
            goto out;
        }
        if (hash != data_hash) {
            cli_error("%s: the checkpoint was trained on other data (token hash differs): same FILE, tokenizer, "
                      "--val-fraction and --examples are needed to resume",
                      ckpt);
            goto out;
        }
        if (set_steps && gpt2_trainer_set_steps(tr, p.steps, &err) != GPT2_OK) {
            cli_error("%s", err.msg);
            goto out;
        }
        p = *gpt2_trainer_params(tr);
        fprintf(stderr, "resumed %s at step %d of %d\n", cli_show(ckpt), gpt2_trainer_step_count(tr), p.steps);
    } else if (gpt2_trainer_new(&p, &tr, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    gpt2_train_data td = {train.ids, train.n, train.example_len}, vd = {val.ids, val.n, val.example_len};
    const int T = examples ? train.example_len - 1 : p.block_size;
    const size_t n_params = gpt2_trainer_n_params(tr);
    fprintf(stderr,
            "model: %d layers, %d heads, %d wide, block %d, vocab %d: %.2fM parameters\n"
            "data: %zu training tokens, %zu held-out tokens (%s, last %.0f%% = %zu bytes)%s\n"
            "training: %d steps of %d x %d tokens, lr %g -> %g, warmup %d, dropout %g, seed %llu\n",
            p.n_layer, p.n_head, p.n_embd, p.block_size, p.n_vocab, n_params / 1e6, train.n, val.n, path,
            valf * 100, len - cut, examples ? ", one example per line" : "", p.steps, p.batch_size, T, p.lr,
            p.min_lr, p.warmup_steps, p.dropout, (unsigned long long)p.seed);
    volatile sig_atomic_t *stop = cli_interrupt_flag();
    gpt2_trainer_set_interrupt(tr, cli_interrupted, NULL);
    const int eot = gpt2_tokenizer_eot(tok);
    double t0 = cli_now(), t_log = t0, elapsed_train = 0;
    const int start_step = gpt2_trainer_step_count(tr); /* > 0 when resumed */
    int steps_since_log = 0;
    float loss = NAN, val_loss = NAN;
    while (gpt2_trainer_step_count(tr) < p.steps && !*stop) {
        double ts = cli_now();
        gpt2_status sst = gpt2_trainer_step(tr, &td, &loss, &err);
        if (sst == GPT2_CANCELLED) break; /* Ctrl-C mid-step: the step is undone */
        if (sst != GPT2_OK) {
            cli_error("%s", err.msg);
            goto out;
        }
        elapsed_train += cli_now() - ts;
        if (*stop) break;
        steps_since_log++;
        const int step = gpt2_trainer_step_count(tr);
        const int at_eval = step % eval_every == 0 || step == p.steps;
        if (at_eval && vd.n_tokens) val_loss = gpt2_trainer_eval(tr, &vd, eval_batches);
        if (*stop) break; /* the held-out figure was cut short */
        if (step % log_every == 0 || at_eval || step == 1) {
            double now = cli_now(), tok_s = steps_since_log * (double)p.batch_size * T / (now - t_log);
            double eta = (p.steps - step) * (elapsed_train / (step - start_step));
            fprintf(stderr, "step %6d/%d  loss %.4f  val %.4f  lr %.2e  %.0f tok/s  %.0f s  eta %.0f s\n", step,
                    p.steps, loss, val_loss, gpt2_trainer_lr(tr, step - 1), tok_s, now - t0, eta);
            t_log = now, steps_since_log = 0;
        }
        if (at_eval) {
            if (gpt2_trainer_save(tr, ckpt, data_hash, &err) != GPT2_OK) {
                cli_error("%s", err.msg);
                goto out;
            }
            if (!export_model(tr, out_dir, tok_dir, dt, eot)) goto out;
        }
    }
    if (*stop)
        fprintf(stderr, "interrupted after step %d of %d; saving the checkpoint and the model\n",
                gpt2_trainer_step_count(tr), p.steps);
    if (gpt2_trainer_save(tr, ckpt, data_hash, &err) != GPT2_OK || !export_model(tr, out_dir, tok_dir, dt, eot)) {
        if (err.msg[0]) cli_error("%s", err.msg);
        goto out;
    }
    const double train_s = cli_now() - t0;
    if (*stop) {
        fprintf(stderr, "saved checkpoint %s and model %s; --resume goes on from step %d\n", cli_show(ckpt),
                cli_show(out_dir), gpt2_trainer_step_count(tr));
        rc = 130;
        goto out;
    }
    /* the shipped (exported, possibly 16-bit) model on the held-out text, as `eval --heldout` scores it */
    cli_score score = {0};
    if (len > cut) {
        gpt2_model *m = cli_load_model(out_dir);
        if (!m) goto out;
        int src = cli_score_text(m, path, text + cut, len - cut, CLI_SCORE_QUIET | (examples ? CLI_SCORE_LINES : 0),
                                 p.n_threads, &score);
        gpt2_model_free(m);
        if (src != EXIT_OK) {
            rc = src;
            goto out;
        }
        printf("held-out %.0f%% of %s: %.4f nats/token, %.4f bits/byte (%ld tokens scored%s)\n"
               "  reproduce: gptscope eval -m %s --heldout %g%s %s\n",
               valf * 100, cli_show(path), score.nats_per_token, score.bits_per_byte, score.scored,
               examples ? ", each line on its own" : "", cli_show(out_dir), valf, examples ? " --examples" : "",
               cli_show(path));
    }
    train_report rep = {.data = path, .val_fraction = valf, .seconds = train_s, .train_tokens = train.n,
                        .val_tokens = val.n, .parameters = n_params, .p = &p, .train_loss = loss,
                        .val_loss = val_loss, .steps_run = gpt2_trainer_step_count(tr) - start_step,
                        .score = len > cut ? &score : NULL};
    if (!write_report(out_dir, &rep)) goto out;
    rc = EXIT_OK;
out:
    free(train.ids);
    free(val.ids);
    free(text);
    gpt2_trainer_free(tr);
    gpt2_tokenizer_free(tok);
    return rc;
}
