/* cmd_template.c — `gptscope template`: the tokens a chat would feed the model,
 * shown as text, for a conversation given as JSON (or a short sample). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope template [-m DIR] [--template NAME|FILE] [--messages FILE.json] [--ids | --json]\n"
    "  Prints the conversation exactly as the chat feeds it to the model: the model's own\n"
    "  chat template (its Jinja, from tokenizer_config.json or the GGUF file), or its\n"
    "  chat_template.json, or --template's; special tokens shown as their text.\n"
    "  --messages F  a JSON list of {\"role\": \"user\" | \"assistant\", \"content\": \"...\"}\n"
    "                (the first may be {\"role\": \"system\", ...})\n"
    "                (default: a short sample of three turns); '-' reads stdin\n"
    "  --ids         the token ids instead, on one line\n"
    "  --json        {\"template\", \"text\", \"ids\", \"tokens\"}\n";

typedef struct {
    const char *model, *tmpl, *messages;
    int ids, json;
} template_opts;

enum { MAX_MESSAGES = 4096 };

typedef struct {
    gpt2_model *m;
    gpt2_chat_template *t;
    gpt2_role roles[MAX_MESSAGES];
    const char *texts[MAX_MESSAGES];
    int n;
    cJSON *doc; /* owns texts when read from a file */
    int32_t *ids;
    int n_ids;
} template_result;

static int template_parse(int argc, char **argv, template_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', template_opts, model)}, {CLI_STR("template", 0, template_opts, tmpl)},
        {CLI_STR("messages", 0, template_opts, messages)}, {CLI_FLAG("ids", 0, template_opts, ids)},
        {CLI_FLAG("json", 0, template_opts, json)},
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && cli_positional(usage_text, "template", argc, argv, 0, "") != EXIT_OK) rc = EXIT_USAGE;
    if (rc == CLI_PARSED && o->ids && o->json) rc = cli_usage_error(usage_text, "template: --ids and --json exclude each other");
    return rc;
}

/* --messages: a list of {role, content}, roles user and assistant, a system message first */
static int read_messages(const char *path, template_result *r) {
    size_t len;
    char *text = strcmp(path, "-") ? cli_read_all(NULL, path, CLI_TEXT_MAX, &len) : cli_read_all(stdin, NULL, CLI_TEXT_MAX, &len);
    if (!text) return 0;
    r->doc = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsArray(r->doc)) {
        cli_error("%s: expected a JSON list of {\"role\", \"content\"} messages", path);
        return 0;
    }
    for (const cJSON *it = r->doc->child; it; it = it->next) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        const char *name = cJSON_IsString(role) ? role->valuestring : "";
        const int user = !strcmp(name, "user"), system = !strcmp(name, "system") && r->n == 0;
        if (!user && !system && strcmp(name, "assistant")) {
            cli_error("%s: messages[%d].role: expected \"user\" or \"assistant\"%s", path, r->n,
                      r->n == 0 ? ", or \"system\"" : !strcmp(name, "system") ? " (a system message only first)" : "");
            return 0;
        }
        if (!cJSON_IsString(content)) {
            cli_error("%s: messages[%d].content: expected a string", path, r->n);
            return 0;
        }
        if (r->n == MAX_MESSAGES) {
            cli_error("%s: more than %d messages", path, MAX_MESSAGES);
            return 0;
        }
        r->roles[r->n] = user ? GPT2_ROLE_USER : system ? GPT2_ROLE_SYSTEM : GPT2_ROLE_ASSISTANT;
        r->texts[r->n++] = content->valuestring;
    }
    return 1;
}

static int template_run(const template_opts *o, template_result *r) {
    static const char *const sample[] = {"Hello! Who are you?", "I am a language model. How can I help?",
                                         "Tell me a short joke."};
    const char *dir = cli_model_dir(o->model);
    if (!dir || !(r->m = cli_load_model(dir))) return EXIT_ERR;
    gpt2_error err;
    gpt2_status st;
    const gpt2_chat_template *b = o->tmpl ? gpt2_chat_template_builtin(o->tmpl) : NULL;
    if (b) st = gpt2_chat_template_copy(b, &r->t, &err);
    else if (o->tmpl) st = gpt2_chat_template_load(o->tmpl, &r->t, &err);
    else st = gpt2_chat_template_of_model(r->m, dir, &r->t, &err);
    if (st != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    if (o->messages && !read_messages(o->messages, r)) return EXIT_ERR;
    if (!o->messages)
        for (int i = 0; i < 3; i++) r->roles[i] = i % 2 ? GPT2_ROLE_ASSISTANT : GPT2_ROLE_USER, r->texts[i] = sample[i];
    if (!o->messages) r->n = 3;
    if (gpt2_session_render(r->m, r->t, r->roles, r->texts, r->n, &r->ids, &r->n_ids, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    return EXIT_OK;
}

static int template_report(const template_opts *o, const template_result *r) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(r->m);
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "template", r->t->name);
        size_t cap = 1, at = 0, l;
        for (int i = 0; i < r->n_ids; i++) gpt2_tokenizer_token_bytes(tok, r->ids[i], &l), cap += l;
        char *text = malloc(cap);
        if (!text) return cJSON_Delete(root), EXIT_ERR;
        for (int i = 0; i < r->n_ids; i++) {
            const char *b = gpt2_tokenizer_token_bytes(tok, r->ids[i], &l);
            memcpy(text + at, b, l), at += l;
        }
        text[at] = '\0';
        cJSON_AddStringToObject(root, "text", text);
        free(text);
        viz_json_tokens(root, tok, r->ids, (size_t)r->n_ids);
        return cli_json_print(root);
    }
    for (int i = 0; i < r->n_ids; i++) {
        if (o->ids) {
            printf(i ? " %d" : "%d", r->ids[i]);
            continue;
        }
        size_t l;
        const char *b = gpt2_tokenizer_token_bytes(tok, r->ids[i], &l);
        fwrite(b, 1, l, stdout);
    }
    if (o->ids) putchar('\n');
    return cli_stdout_flush() ? EXIT_ERR : EXIT_OK;
}

int cmd_template(int argc, char **argv) {
    template_opts o = {0};
    template_result *r = calloc(1, sizeof *r);
    if (!r) return EXIT_ERR;
    int rc = template_parse(argc, argv, &o);
    if (rc == CLI_PARSED && (rc = template_run(&o, r)) == EXIT_OK) rc = template_report(&o, r);
    free(r->ids);
    cJSON_Delete(r->doc);
    gpt2_chat_template_free(r->t);
    gpt2_model_free(r->m);
    free(r);
    return rc;
}
