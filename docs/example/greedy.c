/* greedy.c — libgpt2 from a program of your own: load a model, encode a
 * prompt, and decode greedily, printing the text as it comes.
 *
 *   cc greedy.c $(pkg-config --cflags --libs gpt2) -o greedy
 *   ./greedy /usr/local/share/gptscope/models/shakespeare "ROMEO:" 40
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpt2.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL PROMPT N\n", argv[0]);
        return 2;
    }
    gpt2_error err;
    gpt2_model *m = NULL;
    gpt2_context *ctx = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 1;
    if (gpt2_model_load(argv[1], &m, &err) != GPT2_OK) goto fail;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    const int V = gpt2_model_config(m)->n_vocab;
    if (gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err) != GPT2_OK ||
        gpt2_tokenizer_encode(tok, argv[2], strlen(argv[2]), 0, &ids, &n, &err) != GPT2_OK ||
        gpt2_context_eval(ctx, ids, (int)n, &err) != GPT2_OK)
        goto fail;
    for (int i = 0; i < atoi(argv[3]); i++) {
        const float *logits = gpt2_context_logits(ctx); /* (n_vocab) after the last token */
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        size_t len;
        const char *bytes = gpt2_tokenizer_token_bytes(tok, best, &len);
        fwrite(bytes, 1, len, stdout);
        fflush(stdout);
        if (gpt2_context_eval(ctx, &best, 1, &err) != GPT2_OK) goto fail;
    }
    printf("\n(libgpt2 %s)\n", gpt2_version());
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "greedy: %s\n", err.msg);
done:
    free(ids);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return rc;
}
