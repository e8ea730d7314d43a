/* ablate.c — `--ablate L.H[,L.H...]` (and `L.*`, a whole layer): the heads
 * zero-ablated by topk, generate, eval, attention, lens and heads. The option's
 * row checks the form when it is parsed; the ranges are checked against the
 * model once it is loaded (the shape is known only then). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* One number of an item: digits only, no sign or spaces. */
static int item_number(const char **s, long *v) {
    if (!isdigit((unsigned char)**s)) return 0;
    char *end;
    errno = 0;
    *v = strtol(*s, &end, 10);
    if (errno || *v > (1L << 20)) return 0;
    *s = end;
    return 1;
}

/* Walks spec: each item's layer and head (-1 for "*") to mask (n_layer,
 * n_head) when cfg is given. 0 with the reason in msg. */
static int walk(const char *spec, const gpt2_config *cfg, unsigned char *mask, char *msg, size_t cap) {
    for (const char *s = spec;;) {
        const char *item = s;
        size_t len = strcspn(item, ",");
        long layer, head = -1;
        int ok = item_number(&s, &layer) && *s++ == '.';
        if (ok && *s == '*') s++;
        else ok = ok && item_number(&s, &head);
        if (!ok || (size_t)(s - item) != len) {
            snprintf(msg, cap, "%s%.*s%s is not L.H or L.* (layer and head numbers from 0, items separated by commas)",
                     len ? "'" : "an empty item", (int)len, item, len ? "'" : "");
            return 0;
        }
        if (cfg && (layer >= cfg->n_layer || head >= cfg->n_head)) {
            snprintf(msg, cap, "%s %ld is out of range: the model has %d layers (0..%d) of %d heads (0..%d)",
                     layer >= cfg->n_layer ? "layer" : "head", layer >= cfg->n_layer ? layer : head, cfg->n_layer,
                     cfg->n_layer - 1, cfg->n_head, cfg->n_head - 1);
            return 0;
        }
        for (int h = 0; cfg && h < cfg->n_head; h++)
            if (head < 0 || h == head) mask[layer * cfg->n_head + h] = 1;
        if (*s == '\0') return 1;
        s++; /* the comma */
    }
}

int cli_ablation_parse(const char *spec, int n_layer, int n_head, unsigned char *mask, char *msg, size_t cap) {
    gpt2_config cfg = {.n_layer = n_layer, .n_head = n_head};
    return walk(spec, &cfg, mask, msg, cap);
}

int cli_opt_ablate(const cli_opt *o, const char *arg, void *value) {
    (void)o;
    char msg[512];
    if (!walk(arg, NULL, NULL, msg, sizeof msg)) {
        cli_error("--ablate %s: %s", arg, msg);
        return 0;
    }
    *(const char **)value = arg;
    return 1;
}

unsigned char *cli_ablation_mask(const gpt2_config *cfg, const char *spec) {
    char msg[512];
    unsigned char *mask = calloc((size_t)cfg->n_layer * cfg->n_head, 1);
    if (!mask) {
        cli_error("out of memory");
        return NULL;
    }
    if (!walk(spec, cfg, mask, msg, sizeof msg)) {
        cli_error("--ablate %s: %s", spec, msg);
        free(mask);
        return NULL;
    }
    return mask;
}

int cli_context_ablate(gpt2_context *ctx, const char *spec) {
    if (!spec) return 1;
    unsigned char *mask = cli_ablation_mask(gpt2_model_config(gpt2_context_model(ctx)), spec);
    gpt2_error err;
    int ok = mask && gpt2_context_set_ablation(ctx, mask, &err) == GPT2_OK;
    if (mask && !ok) cli_error("%s", err.msg);
    free(mask);
    return ok;
}
