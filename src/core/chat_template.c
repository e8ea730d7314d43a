/* chat_template.c — chat templates: the built-ins, checks, copies, and the
 * chat_template.json loader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "gpt2_fileio.h"
#include "jinja.h"
#include "json.h"
#include "chat_template_internal.h"
#include "textio.h"

static const char *const transcript_stop[] = {"\nUser:"};

static const gpt2_chat_template builtins[] = {
    {.name = "transcript",
     .description = "base GPT-2: a short preamble, then User:/Assistant: lines; the reply ends where the model "
                    "starts the user's next line",
     .preamble = "A conversation between a user and an assistant.\n\n",
     .user_prefix = "User: ",
     .user_suffix = "\n",
     .assistant_prefix = "Assistant:",
     .assistant_suffix = "\n",
     .stop = transcript_stop,
     .n_stop = 1,
     .eot_after_turn = 0},
    {.name = "dialogpt",
     .description = "DialoGPT: turns separated by <|endoftext|>, no prefixes; a reply ends at <|endoftext|>",
     .preamble = "",
     .user_prefix = "",
     .user_suffix = "",
     .assistant_prefix = "",
     .assistant_suffix = "",
     .stop = NULL,
     .n_stop = 0,
     .eot_after_turn = 1},
    {.name = "raw",
     .description = "no formatting: the model continues the text, stopping at <|endoftext|> or a limit",
     .preamble = "",
     .user_prefix = "",
     .user_suffix = "",
     .assistant_prefix = "",
     .assistant_suffix = "",
     .stop = NULL,
     .n_stop = 0,
     .eot_after_turn = 0},
};
enum { N_BUILTINS = sizeof builtins / sizeof builtins[0] };

const gpt2_chat_template *gpt2_chat_template_builtin(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_BUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0) return &builtins[i];
    return NULL;
}

const char *gpt2_chat_template_builtin_name(int i) { return i >= 0 && i < N_BUILTINS ? builtins[i].name : NULL; }

static const char *nz(const char *s) { return s ? s : ""; }

/* The rules, with messages that start with where and name the field. */
static gpt2_status check(const gpt2_chat_template *t, const char *where, gpt2_status bad, gpt2_error *err) {
    char shown[TEXT_SHOW_BUF];
    if (!t) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "chat template: NULL");
    const char *name = nz(t->name);
    size_t nl = strlen(name);
    if (nl == 0) return gpt2_fail(err, bad, "%sname: expected a non-empty string, found \"\"", where);
    if (nl >= GPT2_TEMPLATE_MAX_NAME)
        return gpt2_fail(err, bad, "%sname: expected at most %d bytes, found %zu", where, GPT2_TEMPLATE_MAX_NAME - 1,
                         nl);
    for (size_t i = 0; i < nl; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c == 0x7F)
            return gpt2_fail(err, bad, "%sname: expected no spaces or control characters, found \"%s\"", where,
                             text_show(name, nl, shown));
    }
    if (t->n_stop < 0 || t->n_stop > GPT2_TEMPLATE_MAX_STOPS)
        return gpt2_fail(err, bad, "%sstop: expected 0 to %d stop strings, found %d", where, GPT2_TEMPLATE_MAX_STOPS,
                         t->n_stop);
    if (t->n_stop > 0 && !t->stop) return gpt2_fail(err, bad, "%sstop: %d stop strings but no array", where, t->n_stop);
    if (t->jinja && t->jinja[0]) { /* parses, or says where it does not */
        jinja_template *jt;
        gpt2_error inner;
        if (jinja_parse("chat_template", t->jinja, strlen(t->jinja), &jt, &inner) != GPT2_OK)
            return gpt2_fail(err, bad, "%sjinja: %s", where, inner.msg);
        jinja_free(jt);
    }
    for (int i = 0; i < t->n_stop; i++) {
        size_t l = t->stop[i] ? strlen(t->stop[i]) : 0;
        if (l == 0) return gpt2_fail(err, bad, "%sstop[%d]: expected a non-empty string, found \"\"", where, i);
        if (l > GPT2_TEMPLATE_MAX_STOP_LEN)
            return gpt2_fail(err, bad, "%sstop[%d]: expected at most %d bytes, found %zu", where, i,
                             GPT2_TEMPLATE_MAX_STOP_LEN, l);
    }
    return GPT2_OK;
}

gpt2_status gpt2_chat_template_check(const gpt2_chat_template *t, gpt2_error *err) {
    return check(t, "chat template: ", GPT2_ERR_INVALID_ARG, err);
}

enum { N_STRINGS = 10 }; /* the struct's strings, in string_fields' order */

/* Layout of a copy: the struct, the stop pointer array, then every string. */
static gpt2_chat_template *copy_unchecked(const gpt2_chat_template *t) {
    const char *f[N_STRINGS] = {t->name, t->description, t->preamble, t->user_prefix, t->user_suffix,
                                t->assistant_prefix, t->assistant_suffix, t->jinja, t->bos_token, t->eos_token};
    size_t bytes = sizeof(gpt2_chat_template) + (size_t)t->n_stop * sizeof(char *);
    for (int i = 0; i < N_STRINGS; i++) bytes += strlen(nz(f[i])) + 1;
    for (int i = 0; i < t->n_stop; i++) bytes += strlen(t->stop[i]) + 1;
    gpt2_chat_template *c = malloc(bytes);
    if (!c) return NULL;
    const char **stops = (const char **)(c + 1);
    char *p = (char *)(stops + t->n_stop);
    const char *g[N_STRINGS];
    for (int i = 0; i < N_STRINGS; i++) {
        size_t l = strlen(nz(f[i])) + 1;
        memcpy(p, nz(f[i]), l);
        g[i] = p;
        p += l;
    }
    for (int i = 0; i < t->n_stop; i++) {
        size_t l = strlen(t->stop[i]) + 1;
        memcpy(p, t->stop[i], l);
        stops[i] = p;
        p += l;
    }
    *c = (gpt2_chat_template){.name = g[0],
                              .description = g[1],
                              .preamble = g[2],
                              .user_prefix = g[3],
                              .user_suffix = g[4],
                              .assistant_prefix = g[5],
                              .assistant_suffix = g[6],
                              .stop = t->n_stop ? stops : NULL,
                              .n_stop = t->n_stop,
                              .eot_after_turn = t->eot_after_turn ? 1 : 0,
                              .jinja = g[7],
                              .bos_token = g[8],
                              .eos_token = g[9]};
    return c;
}

gpt2_status gpt2_chat_template_copy(const gpt2_chat_template *t, gpt2_chat_template **out, gpt2_error *err) {
    *out = NULL;
    gpt2_status st = gpt2_chat_template_check(t, err);
    if (st != GPT2_OK) return st;
    if (!(*out = copy_unchecked(t))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a chat template");
    return GPT2_OK;
}

void gpt2_chat_template_free(gpt2_chat_template *t) { free(t); }

static const char *const string_fields[N_STRINGS] = {"name", "description", "preamble", "user_prefix",
                                                     "user_suffix", "assistant_prefix", "assistant_suffix",
                                                     "jinja", "bos_token", "eos_token"};

gpt2_status chat_template_from_json(const cJSON *obj, const json_src *src, gpt2_chat_template **out) {
    *out = NULL;
    char shown[TEXT_SHOW_BUF];
    const char *pre = src->prefix ? src->prefix : "";
    const cJSON *item;
    cJSON_ArrayForEach(item, obj) {
        const char *k = item->string ? item->string : "";
        int known = strcmp(k, "stop") == 0 || strcmp(k, "eot_after_turn") == 0;
        for (int i = 0; i < N_STRINGS && !known; i++) known = strcmp(k, string_fields[i]) == 0;
        if (strcmp(k, "chat_template") == 0)
            return gpt2_fail(src->err, src->code,
                             "%s: %schat_template: a Hugging Face Jinja template, which gptscope does not run; "
                             "expected gptscope's fields (name, preamble, user_prefix, user_suffix, "
                             "assistant_prefix, assistant_suffix, stop)",
                             src->path, pre);
        if (!known)
            return gpt2_fail(src->err, src->code,
                             "%s: %s%s: unknown field (expected name, description, preamble, user_prefix, "
                             "user_suffix, assistant_prefix, assistant_suffix, stop, eot_after_turn, jinja, "
                             "bos_token, eos_token)",
                             src->path, pre, text_show(k, strlen(k), shown));
    }
    const char *str[N_STRINGS];
    gpt2_status st = json_get_str(src, obj, "name", &str[0]);
    for (int i = 1; i < N_STRINGS && st == GPT2_OK; i++) {
        str[i] = "";
        if (cJSON_GetObjectItemCaseSensitive(obj, string_fields[i]))
            st = json_get_str(src, obj, string_fields[i], &str[i]);
    }
    if (st != GPT2_OK) return st;
    const char *stops[GPT2_TEMPLATE_MAX_STOPS];
    int n_stop = 0;
    const cJSON *js;
    if (cJSON_GetObjectItemCaseSensitive(obj, "stop")) {
        if ((st = json_get_array(src, obj, "stop", "an array of strings", &js)) != GPT2_OK) return st;
        int n = cJSON_GetArraySize(js);
        char want[48], found[32], key[32];
        if (n > GPT2_TEMPLATE_MAX_STOPS) {
            snprintf(want, sizeof want, "at most %d strings", GPT2_TEMPLATE_MAX_STOPS);
            snprintf(found, sizeof found, "%d", n);
            return json_bad(src, "stop", want, found);
        }
        cJSON_ArrayForEach(item, js) {
            snprintf(key, sizeof key, "stop[%d]", n_stop);
            if (!cJSON_IsString(item)) return json_bad(src, key, "a string", json_type_name(item));
            stops[n_stop++] = item->valuestring;
        }
    }
    int eot = 0;
    if (cJSON_GetObjectItemCaseSensitive(obj, "eot_after_turn") &&
        (st = json_get_bool(src, obj, "eot_after_turn", &eot)) != GPT2_OK)
        return st;
    gpt2_chat_template t = {.name = str[0],
                            .description = str[1],
                            .preamble = str[2],
                            .user_prefix = str[3],
                            .user_suffix = str[4],
                            .assistant_prefix = str[5],
                            .assistant_suffix = str[6],
                            .stop = stops,
                            .n_stop = n_stop,
                            .eot_after_turn = eot,
                            .jinja = str[7],
                            .bos_token = str[8],
                            .eos_token = str[9]};
    char where[600];
    snprintf(where, sizeof where, "%s: %s", src->path, pre);
    if ((st = check(&t, where, src->code, src->err)) != GPT2_OK) return st;
    if (!(*out = copy_unchecked(&t))) return gpt2_fail(src->err, GPT2_ERR_NOMEM, "out of memory for a chat template");
    return GPT2_OK;
}

int chat_template_to_json(const gpt2_chat_template *t, cJSON *obj) {
    const char *f[N_STRINGS] = {t->name, t->description, t->preamble, t->user_prefix, t->user_suffix,
                                t->assistant_prefix, t->assistant_suffix, t->jinja, t->bos_token, t->eos_token};
    for (int i = 0; i < N_STRINGS; i++) /* a Jinja template's fields only where it has them */
        if ((i < 7 || nz(f[i])[0]) && !cJSON_AddStringToObject(obj, string_fields[i], nz(f[i]))) return 0;
    cJSON *stop = cJSON_AddArrayToObject(obj, "stop");
    if (!stop) return 0;
    for (int i = 0; i < t->n_stop; i++) {
        cJSON *s = cJSON_CreateString(t->stop[i]);
        if (!s) return 0;
        cJSON_AddItemToArray(stop, s);
    }
    return cJSON_AddBoolToObject(obj, "eot_after_turn", t->eot_after_turn != 0) != NULL;
}

gpt2_status gpt2_chat_template_load(const char *path, gpt2_chat_template **out, gpt2_error *err) {
    *out = NULL;
    cJSON *root;
    gpt2_status st = json_read_file(path, (size_t)1 << 20, GPT2_ERR_FORMAT, "chat template", &root, err);
    if (st != GPT2_OK) return st;
    json_src src = {path, NULL, GPT2_ERR_FORMAT, err};
    st = chat_template_from_json(root, &src, out);
    cJSON_Delete(root);
    return st;
}

gpt2_status gpt2_chat_template_from_model(const gpt2_model *m, gpt2_chat_template **out, gpt2_error *err) {
    *out = NULL;
    const char *src = gpt2_model_chat_template(m);
    if (!src) return GPT2_OK;
    const gpt2_chat_template t = {.name = "model",
                                  .description = "the model's own chat template (Jinja)",
                                  .jinja = src,
                                  .bos_token = gpt2_model_bos_text(m),
                                  .eos_token = gpt2_model_eos_text(m)};
    gpt2_status st = check(&t, "the model's chat template: ", GPT2_ERR_FORMAT, err);
    if (st) return st;
    return (*out = copy_unchecked(&t)) ? GPT2_OK : gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a chat template");
}

gpt2_status gpt2_chat_template_of_model(const gpt2_model *m, const char *model_path, gpt2_chat_template **out,
                                        gpt2_error *err) {
    *out = NULL;
    char path[4096], dir[4096];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s", model_path);
    if (stat(model_path, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a weights file: its directory */
        char *slash = strrchr(dir, '/');
        if (slash) slash[slash == dir] = '\0';
        else snprintf(dir, sizeof dir, ".");
    }
    gpt2_status st = gpt2_fileio_join(path, sizeof path, dir, "chat_template.json", err);
    if (st) return st;
    if ((stat(path, &sb) == 0 || errno != ENOENT) || !gpt2_model_chat_template(m))
        return gpt2_chat_template_for_model(dir, out, err);
    return gpt2_chat_template_from_model(m, out, err);
}

gpt2_status gpt2_chat_template_for_model(const char *model_dir, gpt2_chat_template **out, gpt2_error *err) {
    *out = NULL;
    char path[4096], dir[4096];
    struct stat sb;
    if (stat(model_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a weights file (ckpt.pt): its directory */
        const char *slash = strrchr(model_dir, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - model_dir) + (slash == model_dir) : 1,
                 slash ? model_dir : ".");
        model_dir = dir;
    }
    gpt2_status st = gpt2_fileio_join(path, sizeof path, model_dir, "chat_template.json", err);
    if (st != GPT2_OK) return st;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return gpt2_chat_template_copy(gpt2_chat_template_builtin("transcript"), out, err);
    return gpt2_chat_template_load(path, out, err);
}
