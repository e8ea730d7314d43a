/* viz/export.h — the microscope's tables as JSON documents and CSV files:
 * one head's attention matrix, every head's scores, the logit lens, and the
 * per-token top-k history. The CLI prints the JSON documents (--json) and
 * writes them or their CSV form to files (--export FILE); the chat can write
 * the same files from its store. No curses, no printing.
 *
 *     viz_heads h = {.tok = tok, .rows = rows, .n = n_layer * n_head};
 *     cJSON *doc = viz_heads_json(&h);          // what `heads --json` prints
 *     gpt2_error err;
 *     if (viz_export(path, &(viz_table){VIZ_TABLE_HEADS, .heads = &h}, &err) != GPT2_OK)
 *         fprintf(stderr, "%s\n", err.msg);     // path is as it was
 *
 * Files are written whole through gpt2_fileio_write_atomic: a failure leaves
 * the old file. The format comes from the name's ending, .json or .csv.
 *
 * CSV (RFC 4180): a header row, comma-separated cells, rows ending in CRLF; a
 * cell holding a comma, a double quote, CR or LF is quoted with its double
 * quotes doubled. Token texts are their exact bytes (bytes that are not UTF-8
 * included); an undefined number is an empty cell. Numbers print with 9
 * significant digits (a float comes back exactly).
 */
#ifndef GPTSCOPE_VIZ_EXPORT_H
#define GPTSCOPE_VIZ_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "gpt2.h"
#include "gpt2_inspect.h"

/* A next-token candidate: softmax(logits) at temperature 1. rank counts from 1. */
typedef struct {
    int32_t id;
    float logit;
    double prob;
    long rank;
} viz_candidate;

/* The k most probable entries of logits (V), most probable first (ties: the
 * lower id first; NaN last), into top (room for k; k > V gives V). Returns
 * how many, or -1 when out of memory. */
long viz_top_candidates(const float *logits, int V, long k, viz_candidate *top);
/* Entry id of logits (V) as a candidate: its rank in the same order, its probability. */
viz_candidate viz_candidate_of(const float *logits, int V, int32_t id);

/* The heads zeroed while the numbers were computed (--ablate, /ablate). */
typedef struct {
    const unsigned char *mask; /* (n_layer, n_head), or NULL: none */
    int n_layer, n_head;
} viz_ablation;
/* "0.* 3.1" (a whole layer as L.*) into buf; "" for none. */
void viz_ablation_text(viz_ablation ab, char *buf, size_t cap);

/* One head's attention over a prompt. head -1: the mean of the layer's heads. */
typedef struct {
    const gpt2_tokenizer *tok;
    const char *model; /* a name for titles and files; may be NULL */
    const int32_t *ids;
    int T, layer, head;
    const float *w; /* (T, T), row q = query q over keys 0..q, 0 above the diagonal */
    viz_ablation ablated;
} viz_attention;

/* Every head's scores (gpt2_inspect.h), layer by layer. */
typedef struct {
    int layer, head, ablated;
    gpt2_head_scores s;
} viz_head_row;
typedef struct {
    const gpt2_tokenizer *tok;
    const viz_head_row *rows;
    int n;
} viz_heads;

/* The logit lens at position pos: per layer the top candidates and the
 * final prediction's (the last layer's top-1) candidate. */
typedef struct {
    int layer, k;
    const viz_candidate *top;  /* (k) */
    viz_candidate predicted;
} viz_lens_row;
typedef struct {
    const gpt2_tokenizer *tok;
    const int32_t *ids;
    int T, pos, n_layer;
    const viz_lens_row *rows; /* (n_layer) */
    const unsigned char *ablated; /* (n_layer, n_head) mask, or NULL */
    int n_head;
} viz_lens;

/* The next-token distribution after each token of a text: per position its
 * top candidates and the candidate of the token that actually follows. */
typedef struct {
    int pos, k;
    const viz_candidate *top; /* (k) */
    viz_candidate next;       /* next.id -1 at the last position */
} viz_history_row;
typedef struct {
    const gpt2_tokenizer *tok;
    const int32_t *ids;
    int T;
    const viz_history_row *rows; /* (T) */
    viz_ablation ablated;
} viz_history;

/* Direct logit attribution (gpt2_attribute.h) at one position of a prompt. */
typedef struct {
    const gpt2_tokenizer *tok;
    const char *model; /* may be NULL */
    const int32_t *ids;
    int T;
    const gpt2_attribution *a;
    viz_ablation ablated;
} viz_attribution;

/* Activation patching (gpt2_patch.h): the two prompts and the grid. */
typedef struct {
    const gpt2_tokenizer *tok;
    const char *model; /* may be NULL */
    const int32_t *clean, *corrupt;
    const gpt2_patch_result *r;
    viz_ablation ablated;
} viz_patch;

/* The JSON documents (NULL or a partial document when out of memory:
 * viz_json_failed says so):
 *   attention: {"model", "layer", "head" (null for the mean), "ablated": [[l, h], ...], "ids", "tokens",
 *               "weights": [[...]]}
 *   heads:     [{"layer", "head", "prev_token", "first_token", "self", "entropy",
 *                "induction", "n_induction", "ablated"}, ...], null where a score is undefined
 *   lens:      {"ids", "tokens", "pos", "predicted": {"id", "token"}, "ablated": [[l, h], ...],
 *               "layers": [{"layer", "top": [{"id", "token", "logit", "prob"}, ...],
 *                           "predicted_rank", "predicted_prob", "predicted_logit"}, ...]}
 *   history:   {"ids", "tokens", "ablated": [[l, h], ...], "positions": [{"pos", "top": [...],
 *               "next": {"id", "token", "rank", "logit", "prob"} or null}, ...]}
 *   attribution: {"model", "ids", "tokens", "ablated", "pos", "target": {"id", "token"},
 *               "baseline": {"id", "token"} or null, "norm": "layer" or "rms", "scale", "logit",
 *               "embed", "heads": [[...n_head...], ...n_layer], "attn_bias": [...], "mlp": [...],
 *               "ln_f_bias", "sum"}
 *   patch:     {"model", "clean": {"ids", "tokens"}, "corrupt": {"ids", "tokens"}, "ablated",
 *               "answer": {"id", "token"}, "wrong": {"id", "token"}, "ld_clean", "ld_corrupt",
 *               "what": "resid" | "mlp" | "heads", "rows": "layer", "cols": "pos" | "head",
 *               "first_diff", "scores": [[...cols...], ...rows], "ld": [[...]], "runs", "positions"} */
cJSON *viz_attention_json(const viz_attention *a);
cJSON *viz_heads_json(const viz_heads *h);
cJSON *viz_lens_json(const viz_lens *l);
cJSON *viz_history_json(const viz_history *h);
cJSON *viz_attribution_json(const viz_attribution *a);
cJSON *viz_patch_json(const viz_patch *p);

/* The CSV files' rows (header first):
 *   attention: query_pos,query_token,"0:TOKEN",...,ablated then one row per query
 *              (key j's column named by its position and text)
 * (attention, lens, history: the last column, ablated, holds the ablated
 * heads as viz_ablation_text writes them on every row, "" for none)
 *   heads:     layer,head,prev_token,first_token,self,entropy,induction,n_induction,ablated
 *   lens:      layer,rank,id,token,logit,prob,predicted,ablated  (the top k of each layer, then the
 *              prediction's row where it is not among them; predicted 1 on its rows)
 *   history:   pos,token,rank,id,candidate,logit,prob,next,ablated  (next 1 on the row of the
 *              token that follows; that row added where it is not in the top k)
 *   attribution: model,prompt,pos,target,baseline,part,layer,head,value,ablated  (part embed,
 *              head (layer and head set), attn_bias, mlp (layer set), ln_f_bias, then sum and
 *              logit; prompt the text of the ids, target and baseline token texts)
 *   patch:     model,what,layer,pos,head,clean_token,corrupt_token,score,ld,ablated  (one row a
 *              cell: pos and the tokens for resid and mlp, head for heads; the other empty) */
typedef enum {
    VIZ_TABLE_ATTENTION, VIZ_TABLE_HEADS, VIZ_TABLE_LENS, VIZ_TABLE_HISTORY, VIZ_TABLE_ATTRIBUTION, VIZ_TABLE_PATCH
} viz_table_kind;
typedef struct {
    viz_table_kind kind;
    const viz_attention *attention;
    const viz_heads *heads;
    const viz_lens *lens;
    const viz_history *history;
    const viz_attribution *attribution;
    const viz_patch *patch;
} viz_table;

/* The file formats, from a name's ending (case-insensitive). */
typedef enum { VIZ_FORMAT_UNKNOWN, VIZ_FORMAT_JSON, VIZ_FORMAT_CSV, VIZ_FORMAT_SVG, VIZ_FORMAT_PNG } viz_format;
viz_format viz_format_of(const char *path);

/* Writes t to path as JSON or CSV (by the name). GPT2_ERR_INVALID_ARG for
 * another ending, GPT2_ERR_IO naming the path when it cannot be written,
 * GPT2_ERR_NOMEM; the file is then as it was. */
gpt2_status viz_export(const char *path, const viz_table *t, gpt2_error *err);

/* A CSV cell: the n bytes of s, quoted when needed (see above). */
void viz_csv_cell(FILE *f, const char *s, size_t n);

/* Fills err (when not NULL) with status and the message; returns status. */
gpt2_status viz_fail(gpt2_error *err, gpt2_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
