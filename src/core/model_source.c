/* model_source.c — finds a model's weights, tells their format from the bytes,
 * and hands the binder one shape (model_source.h); the safetensors directory
 * (config.json + model.safetensors + tokenizer) is read here. */
#include "model_source.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "arch.h"
#include "error.h"
#include "gpt2_fileio.h"
#include "json.h"
#include "textio.h"

source_format source_sniff(const unsigned char *p, size_t n) {
    if (n >= 4 && memcmp(p, "GGUF", 4) == 0) return SOURCE_FMT_GGUF;
    if (n >= 4 && p[0] == 'P' && p[1] == 'K' && ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6)))
        return SOURCE_FMT_ZIP;
    if (n >= 4) {
        const uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (magic == 20240326) return SOURCE_FMT_LLMC;
        if (magic == 20240328) return SOURCE_FMT_LLMC_TOKENIZER;
    }
    if (n >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5) return SOURCE_FMT_PICKLE;
    if (n >= 10) { /* u64 header length that fits, then the JSON object */
        uint64_t h = 0;
        for (int i = 7; i >= 0; i--) h = h << 8 | p[i];
        if (h >= 2 && h <= n - 8 && p[8] == '{') return SOURCE_FMT_SAFETENSORS;
    }
    size_t i = 0; /* last: a safetensors header length may begin with the byte '{' */
    while (i < n && i < 64 && p[i] && strchr(" \t\r\n", p[i])) i++;
    if (i < n && p[i] == '{') return SOURCE_FMT_JSON;
    return SOURCE_FMT_UNKNOWN;
}

/* --- config.json ---------------------------------------------------------- */

void source_add_end(model_source *src, int64_t id) {
    if (id < 0 || id > INT32_MAX || src->n_end == SOURCE_END_IDS) return;
    for (int i = 0; i < src->n_end; i++)
        if (src->end_ids[i] == id) return;
    src->end_ids[src->n_end++] = (int32_t)id;
}

/* A JSON number as an id, -1 where it is none (negative, fractional, or past
 * int32: converting those to an integer would be undefined). */
static int64_t id_of(double v) {
    return v >= 0 && v <= INT32_MAX && v == (double)(int64_t)v ? (int64_t)v : -1;
}

/* eos_token_id: an id, or a list of ids (Llama 3.x's generation_config.json) */
static void add_end_ids(model_source *src, const cJSON *v) {
    if (cJSON_IsNumber(v)) source_add_end(src, id_of(v->valuedouble));
    for (const cJSON *it = cJSON_IsArray(v) ? v->child : NULL; it; it = it->next)
        if (cJSON_IsNumber(it)) source_add_end(src, id_of(it->valuedouble));
}


/* config.json's checks, in the order a message should report them. */
static gpt2_status check_config(const json_src *js, const cJSON *root, model_source *src) {
    gpt2_config *c = &src->cfg;
    add_end_ids(src, cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"));
    char shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 2];
    const char *mt = "gpt2", *act = "gelu_new";
    gpt2_status st = GPT2_OK;
    if (cJSON_GetObjectItemCaseSensitive(root, "model_type") && (st = json_get_str(js, root, "model_type", &mt)))
        return st;
    if (arch_hf_family(mt) >= 0) { /* Llama and its kin: nn.Linear weights under HF Llama's names */
        if ((st = arch_from_hf_config(js, root, mt, c, &src->n_inner, &src->gelu_erf, &src->tied))) return st;
        src->vocab_rows = c->n_vocab;
        src->linear_out_in = 1;
        src->qkv_by_head = strcmp(mt, "gpt_neox") == 0;
        return GPT2_OK;
    }
    if (strcmp(mt, "gpt2") != 0) {
        snprintf(found, sizeof found, "\"%s\"", text_show(mt, strlen(mt), shown));
        return json_bad(js, "model_type",
                        "\"gpt2\", \"llama\", \"mistral\", \"qwen2\", \"qwen3\", \"gpt_neox\", \"gemma\", \"gemma2\" or "
                        "\"gemma3_text\"", found);
    }
    /* n_positions, or its older name n_ctx */
    const char *pos = cJSON_GetObjectItemCaseSensitive(root, "n_positions") || !cJSON_GetObjectItemCaseSensitive(root, "n_ctx")
                          ? "n_positions" : "n_ctx";
    if ((st = json_get_int(js, root, "n_layer", 1, 1000, &c->n_layer)) ||
        (st = json_get_int(js, root, "n_head", 1, 4096, &c->n_head)) ||
        (st = json_get_int(js, root, "n_embd", 1, 65536, &c->n_embd)) ||
        (st = json_get_int(js, root, pos, 1, 1 << 20, &c->n_ctx)) ||
        (st = json_get_int(js, root, "vocab_size", 1, 1 << 24, &c->n_vocab)))
        return st;
    if (c->n_embd % c->n_head != 0)
        return gpt2_fail(js->err, js->code, "%s: n_embd %d is not divisible by n_head %d", js->path, c->n_embd,
                         c->n_head);
    src->vocab_rows = c->n_vocab;
    src->n_inner = 4 * c->n_embd;
    if (json_has(root, "n_inner") && (st = json_get_int(js, root, "n_inner", 1, 1 << 20, &src->n_inner))) return st;
    c->ln_eps = 1e-5f;
    if (cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon") &&
        (st = json_get_float(js, root, "layer_norm_epsilon", 0, 1, 1, &c->ln_eps)))
        return st;
    if (cJSON_GetObjectItemCaseSensitive(root, "activation_function") &&
        (st = json_get_str(js, root, "activation_function", &act)))
        return st;
    if (strcmp(act, "gelu") == 0)
        src->gelu_erf = 1;
    else if (strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0) {
        snprintf(found, sizeof found, "\"%s\"", text_show(act, strlen(act), shown));
        return json_bad(js, "activation_function", "gelu_new, gelu_pytorch_tanh or gelu", found);
    }
    static const char *unsupported[] = {"scale_attn_by_inverse_layer_idx", "add_cross_attention"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, unsupported[i])))
            return json_bad(js, unsupported[i], "false (true is not supported)", "true");
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "scale_attn_weights")))
        return json_bad(js, "scale_attn_weights", "true (false is not supported)", "false");
    return GPT2_OK;
}

gpt2_status source_parse_config(const char *path, model_source *src, gpt2_error *err) {
    cJSON *root;
    gpt2_status st = json_read_file(path, (size_t)64 << 20, GPT2_ERR_CONFIG, "config file", &root, err);
    if (st != GPT2_OK) return st;
    json_src js = {path, NULL, GPT2_ERR_CONFIG, err};
    st = check_config(&js, root, src);
    cJSON_Delete(root);
    src->cfg_from = "config.json";
    return st;
}

/* The shortest decimal that reads back as f ("1e-05", not 9.99999974737875e-06). */
static double shortest(float f) {
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

gpt2_status source_write_config(const char *path, const source_config *sc, gpt2_error *err) {
    const gpt2_config *c = &sc->cfg;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "architectures"), cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(j, "model_type", "gpt2");
    cJSON_AddNumberToObject(j, "vocab_size", c->n_vocab);
    cJSON_AddNumberToObject(j, "n_positions", c->n_ctx);
    cJSON_AddNumberToObject(j, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(j, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(j, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(j, "n_head", c->n_head);
    if (sc->n_inner == 4 * c->n_embd) cJSON_AddNullToObject(j, "n_inner");
    else cJSON_AddNumberToObject(j, "n_inner", sc->n_inner);
    cJSON_AddStringToObject(j, "activation_function", sc->gelu_erf ? "gelu" : "gelu_new");
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", shortest(c->ln_eps));
    if (sc->dropout >= 0) { /* a trained model: how it was trained */
        cJSON_AddNumberToObject(j, "initializer_range", 0.02);
        cJSON_AddNumberToObject(j, "resid_pdrop", sc->dropout);
        cJSON_AddNumberToObject(j, "embd_pdrop", sc->dropout);
        cJSON_AddNumberToObject(j, "attn_pdrop", 0);
    }
    cJSON_AddBoolToObject(j, "tie_word_embeddings", sc->tied);
    if (sc->eot >= 0) {
        cJSON_AddNumberToObject(j, "bos_token_id", sc->eot);
        cJSON_AddNumberToObject(j, "eos_token_id", sc->eot);
    }
    cJSON_AddStringToObject(j, "torch_dtype",
                            sc->dtype == GPT2_DTYPE_F32 ? "float32" : sc->dtype == GPT2_DTYPE_F16 ? "float16" : "bfloat16");
    if (sc->converted_from) cJSON_AddStringToObject(j, "gptscope_converted_from", sc->converted_from);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    char *line = text ? realloc(text, strlen(text) + 2) : NULL;
    if (!line) {
        free(text);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    strcat(line, "\n");
    gpt2_status st = gpt2_fileio_write_bytes(path, line, strlen(line), err);
    free(line);
    return st;
}

/* --- sources ---------------------------------------------------------------- */

gpt2_status source_fit_vocab(model_source *src, const char *tok_path, gpt2_error *err) {
    const int tv = gpt2_tokenizer_n_vocab(src->tok);
    if (tv > src->vocab_rows)
        return gpt2_fail(err, GPT2_ERR_CONFIG,
                         "%s: the vocabulary has ids up to %d, but the model has only vocab_size %d rows", tok_path,
                         tv - 1, src->vocab_rows);
    src->cfg.n_vocab = tv;
    size_t n = strlen(src->desc);
    if (tv < src->vocab_rows)
        n += (size_t)snprintf(src->desc + n, sizeof src->desc - n, ", vocab padded %d \u2192 %d", src->vocab_rows, tv);
    if (src->tok_fallback && n < sizeof src->desc)
        snprintf(src->desc + n, sizeof src->desc - n, ", GPT-2's tokenizer from %.80s", src->gpt2_tok_dir);
    return GPT2_OK;
}

enum { GPT2_BPE_TOKENS = 50257 };

gpt2_status source_gpt2_tokenizer(model_source *src, char *tok_path, size_t cap, const char *lacks, gpt2_error *err) {
    if (src->vocab_rows < GPT2_BPE_TOKENS) /* a character-level model that lost its meta.pkl */
        return gpt2_fail(err, GPT2_ERR_IO, "%s carries no tokenizer, and its vocabulary of %d is too small for GPT-2's "
                         "(a character-level nanoGPT model needs the meta.pkl it was trained with)", src->path,
                         src->vocab_rows);
    if (!src->gpt2_tok_dir) return gpt2_fail(err, GPT2_ERR_IO, "%s: %s", src->path, lacks);
    gpt2_error inner;
    gpt2_status st = gpt2_tokenizer_load(src->gpt2_tok_dir, &src->tok, &inner);
    if (st) return gpt2_fail(err, st, "%s carries no tokenizer, and GPT-2's could not be read: %s", src->path, inner.msg);
    if (gpt2_tokenizer_n_vocab(src->tok) != GPT2_BPE_TOKENS)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %d tokens, not GPT-2's tokenizer (%d)", src->gpt2_tok_dir,
                         gpt2_tokenizer_n_vocab(src->tok), GPT2_BPE_TOKENS);
    src->tok_fallback = 1;
    snprintf(tok_path, cap, "%s", src->gpt2_tok_dir);
    return GPT2_OK;
}

gpt2_status source_hf_tokenizer(model_source *src, const char *dir, char *tok_path, size_t cap, gpt2_error *err) {
    static const char *const names[] = {"vocab.json", "encoder.json", "tokenizer.json"}; /* gpt2_tokenizer_load's */
    struct stat sb;
    for (int i = 0; i < 3; i++) {
        gpt2_status st = gpt2_fileio_join(tok_path, cap, dir, names[i], err);
        if (st) return st;
        if (stat(tok_path, &sb) == 0) {
            if ((st = gpt2_tokenizer_load(dir, &src->tok, err))) return st;
            return source_hf_chat(src, dir, err);
        }
    }
    if (src->cfg.n_vocab == GPT2_BPE_TOKENS)
        return source_gpt2_tokenizer(src, tok_path, cap, "no vocab.json + merges.txt (or encoder.json + vocab.bpe, "
                                     "or tokenizer.json) beside it, and no GPT-2 tokenizer directory given for its "
                                     "50257 tokens", err);
    return gpt2_tokenizer_load(dir, &src->tok, err); /* for its message */
}

void source_dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

const char *source_base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A Hugging Face directory: config.json, the weights and the tokenizer beside
 * them. The weights: one file (mapped: map, size), or, when index is given
 * (src->path is then the index, map NULL), the shards it names. */
static gpt2_status safetensors_source_open(model_source *src, void *map, size_t size, const cJSON *index,
                                           gpt2_error *err) {
    char dir[SOURCE_PATH_MAX], path[SOURCE_PATH_MAX];
    source_dir_of(src->path, dir, sizeof dir);
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "config.json", err);
    if (st || (st = source_parse_config(path, src, err))) {
        if (map) munmap(map, size);
        return st;
    }
    if ((st = index ? st_open_index(src->path, index, &src->st, err) : st_open_map(src->path, map, size, &src->st, err)))
        return st;
    if ((st = source_hf_tokenizer(src, dir, path, sizeof path, err))) return st;
    if (index)
        snprintf(src->desc, sizeof src->desc, "Hugging Face safetensors (%d shard%s, %.200s)", src->st.n_shards,
                 src->st.n_shards == 1 ? "" : "s", source_base_of(src->path));
    else
        snprintf(src->desc, sizeof src->desc, "Hugging Face safetensors (%.200s)", source_base_of(src->path));
    return source_fit_vocab(src, path, err);
}

/* Is path named as Hugging Face names a shard index ("model.safetensors.index.json",
 * "pytorch_model.bin.index.json")? Such a file is read as an index whatever its
 * bytes, so that a broken one is told what is wrong with it. */
static int index_named(const char *path) {
    const size_t n = strlen(path), k = strlen(".index.json");
    return n > k && strcmp(path + n - k, ".index.json") == 0;
}

/* A sharded PyTorch checkpoint (pytorch_model.bin.index.json, whose weight_map
 * names .bin shards): refused, pointing at what loads instead. torch_ckpt.c
 * reads one zip whose pickle holds the whole state dict; a state dict split
 * over several is another reader, and a repository with .bin shards often
 * has safetensors ones beside them. */
static gpt2_status refuse_sharded_torch(const char *path, const cJSON *root, gpt2_error *err) {
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    for (const cJSON *e = cJSON_IsObject(map) ? map->child : NULL; e; e = e->next) {
        const size_t n = cJSON_IsString(e) ? strlen(e->valuestring) : 0;
        if (n > 4 && strcmp(e->valuestring + n - 4, ".bin") == 0)
            return gpt2_fail(err, GPT2_ERR_FORMAT,
                             "%s: a sharded PyTorch checkpoint (.bin shards), which gptscope does not read: "
                             "it reads the same repository's safetensors files (model.safetensors.index.json and "
                             "its .safetensors shards) when it has them", path);
    }
    return GPT2_OK;
}

static gpt2_status refuse_format(const char *path, source_format fmt, void *map, size_t size, gpt2_error *err);

/* A JSON file (map, size; unmapped here): a shard index when it has a
 * weight_map or is named as one; any other JSON (a config.json named by -m) is
 * no model file. */
static gpt2_status index_source_open(model_source *src, void *map, size_t size, gpt2_error *err) {
    cJSON *root = NULL;
    gpt2_status st = size ? json_parse(src->path, map, size, GPT2_ERR_FORMAT, &root, err)
                          : gpt2_fail(err, GPT2_ERR_FORMAT, "%s: the file is empty, expected a JSON shard index", src->path);
    if (!st && !cJSON_GetObjectItemCaseSensitive(root, "weight_map") && !index_named(src->path)) {
        cJSON_Delete(root);
        return refuse_format(src->path, SOURCE_FMT_JSON, map, size, err);
    }
    if (map) munmap(map, size);
    if (!st && !(st = refuse_sharded_torch(src->path, root, err))) st = safetensors_source_open(src, NULL, 0, root, err);
    cJSON_Delete(root);
    return st;
}

/* The weights file of a directory: the first of these names present. A
 * single model.safetensors comes before an index: a repository holding both
 * (some keep the file they had before sharding) means the same weights, and
 * one file is one mapping. */
static gpt2_status find_weights(const char *dir, char *out, size_t cap, gpt2_error *err) {
    static const char *const names[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                        "pytorch_model.bin.index.json", "ckpt.pt"};
    struct stat sb;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        gpt2_status st = gpt2_fileio_join(out, cap, dir, names[i], err);
        if (st) return st;
        if (lstat(out, &sb) == 0) return GPT2_OK;
    }
    /* none: report the Hugging Face name, as the loader always has */
    return gpt2_fileio_join(out, cap, dir, names[0], err);
}

int source_has_weights(const char *dir) {
    char path[SOURCE_PATH_MAX];
    struct stat sb;
    return find_weights(dir, path, sizeof path, NULL) == GPT2_OK && lstat(path, &sb) == 0 &&
           strcmp(source_base_of(path), "pytorch_model.bin.index.json") != 0;
}

/* A file that is no model source: says what it is instead, or how it starts; unmaps it. */
static gpt2_status refuse_format(const char *path, source_format fmt, void *map, size_t size, gpt2_error *err) {
    char head[48] = " (the file is empty)";
    if (size) {
        int k = snprintf(head, sizeof head, " (it starts with");
        for (size_t i = 0; i < size && i < 4; i++)
            k += snprintf(head + k, sizeof head - (size_t)k, " %02X", ((const unsigned char *)map)[i]);
        snprintf(head + k, sizeof head - (size_t)k, ")");
    }
    if (map) munmap(map, size);
    if (fmt == SOURCE_FMT_LLMC_TOKENIZER)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: this is llm.c's tokenizer file, not a model (name the "
                         "model's .bin, e.g. gpt2_124M.bin)", path);
    if (fmt == SOURCE_FMT_PICKLE)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: a bare pickle (PyTorch's legacy format before 1.6, or a "
                         "meta.pkl), not a model file gptscope reads: re-save it with torch.save in PyTorch 1.6 or "
                         "later (a zip)", path);
    return gpt2_fail(err, GPT2_ERR_FORMAT,
                     "%s: not a model file gptscope knows: expected safetensors, a PyTorch zip checkpoint "
                     "(ckpt.pt, pytorch_model.bin), llm.c's .bin or GGUF%s", path, head);
}

gpt2_status source_open(const char *path, const char *gpt2_tok_dir, model_source *src, source_format *fmt,
                        gpt2_error *err) {
    memset(src, 0, sizeof *src);
    src->tied = -1;
    src->gpt2_tok_dir = gpt2_tok_dir && *gpt2_tok_dir ? gpt2_tok_dir : NULL;
    *fmt = SOURCE_FMT_UNKNOWN;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return gpt2_fail(err, GPT2_ERR_IO, "%s: not a model directory or file: %s", path, strerror(errno));
    gpt2_status st;
    int in_dir = S_ISDIR(sb.st_mode);
    if (in_dir) {
        if ((st = find_weights(path, src->path, sizeof src->path, err))) return st;
    } else if (strlen(path) >= sizeof src->path) {
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: path too long", path);
    } else {
        snprintf(src->path, sizeof src->path, "%s", path);
    }
    void *map;
    size_t size;
    if ((st = text_map_file(src->path, &map, &size, err))) return st;
    *fmt = source_sniff(map, size);
    switch (*fmt) {
    case SOURCE_FMT_GGUF: st = gguf_source_open(src, map, size, err); break;
    case SOURCE_FMT_ZIP: st = torch_source_open(src, map, size, err); break;
    case SOURCE_FMT_LLMC: st = llmc_source_open(src, map, size, err); break;
    case SOURCE_FMT_SAFETENSORS: st = safetensors_source_open(src, map, size, NULL, err); break;
    case SOURCE_FMT_JSON: st = index_source_open(src, map, size, err); break;
    default:
        /* model.safetensors in a directory is read as one, so that its defects get precise messages */
        if (in_dir && strcmp(source_base_of(src->path), "model.safetensors") == 0) {
            st = safetensors_source_open(src, map, size, NULL, err);
            break;
        }
        if (index_named(src->path)) { /* the same for an index, in a directory or named */
            st = index_source_open(src, map, size, err);
            break;
        }
        return refuse_format(src->path, *fmt, map, size, err);
    }
    if (st) source_close(src);
    return st;
}

void source_close(model_source *src) {
    st_close(&src->st);
    gpt2_tokenizer_free(src->tok);
    src->tok = NULL;
    free(src->chat_template), free(src->bos_text), free(src->eos_text);
    src->chat_template = src->bos_text = src->eos_text = NULL;
}

/* A special token in tokenizer_config.json: its text, or {"content": text} */
static gpt2_status token_text(const json_src *js, const cJSON *root, const char *key, char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!v || cJSON_IsNull(v)) return GPT2_OK;
    if (!cJSON_IsString(v)) return json_bad(js, key, "a string, {\"content\": string} or null", json_type_name(v));
    return (*out = strdup(v->valuestring)) ? GPT2_OK : gpt2_fail(js->err, GPT2_ERR_NOMEM, "out of memory");
}

/* chat_template: a string, or a list of {name, template} of which "default" (else the first) */
static gpt2_status chat_template_of(const json_src *js, const cJSON *root, char **out) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (cJSON_IsArray(t)) {
        const cJSON *pick = NULL;
        for (const cJSON *it = t->child; it; it = it->next) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
            if (!pick || (cJSON_IsString(name) && !strcmp(name->valuestring, "default"))) pick = it;
        }
        t = cJSON_GetObjectItemCaseSensitive(pick, "template");
    }
    if (!t || cJSON_IsNull(t)) return GPT2_OK;
    if (!cJSON_IsString(t)) return json_bad(js, "chat_template", "a string or a list of {name, template}", json_type_name(t));
    return (*out = strdup(t->valuestring)) ? GPT2_OK : gpt2_fail(js->err, GPT2_ERR_NOMEM, "out of memory");
}

gpt2_status source_hf_chat(model_source *src, const char *dir, gpt2_error *err) {
    char path[SOURCE_PATH_MAX];
    struct stat sb;
    cJSON *root;
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "tokenizer_config.json", err);
    if (!st && stat(path, &sb) == 0 &&
        !(st = json_read_file(path, (size_t)64 << 20, GPT2_ERR_TOKENIZER, "tokenizer_config.json", &root, err))) {
        json_src js = {path, NULL, GPT2_ERR_TOKENIZER, err};
        if (!(st = chat_template_of(&js, root, &src->chat_template)) && !(st = token_text(&js, root, "bos_token", &src->bos_text)))
            st = token_text(&js, root, "eos_token", &src->eos_text);
        cJSON_Delete(root);
    }
    if (!st && !src->chat_template && !(st = gpt2_fileio_join(path, sizeof path, dir, "chat_template.jinja", err)) &&
        stat(path, &sb) == 0) {
        size_t len;
        if ((st = text_read_file(path, (size_t)1 << 20, GPT2_ERR_TOKENIZER, "chat template", &src->chat_template, &len,
                                 err)))
            return st;
    }
    if (!st && !(st = gpt2_fileio_join(path, sizeof path, dir, "generation_config.json", err)) && stat(path, &sb) == 0 &&
        !(st = json_read_file(path, (size_t)1 << 20, GPT2_ERR_CONFIG, "generation_config.json", &root, err))) {
        add_end_ids(src, cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"));
        cJSON_Delete(root);
    }
    return st;
}
