/* export.c — the microscope's tables (viz/export.h): candidates ranked once,
 * then each table as a JSON document and as CSV, written atomically. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpt2_fileio.h"
#include "viz/export.h"
#include "viz/json.h"

gpt2_status viz_fail(gpt2_error *err, gpt2_status status, const char *fmt, ...) {
    if (err) {
        char raw[GPT2_ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        err->status = status;
        gpt2_text_escape(raw, strlen(raw), err->msg, sizeof err->msg);
    }
    return status;
}

/* --- candidates ------------------------------------------------------------ */

/* Highest logit first, NaN last (so that the order stays total), ties by id. */
static int before(float xl, int32_t xi, float yl, int32_t yi) {
    const int xn = isnan(xl), yn = isnan(yl);
    if (xn != yn) return xn < yn;
    if (!xn && xl != yl) return xl > yl;
    return xi < yi;
}

static int by_rank(const void *a, const void *b) {
    const viz_candidate *x = a, *y = b;
    return before(x->logit, x->id, y->logit, y->id) ? -1 : before(y->logit, y->id, x->logit, x->id) ? 1 : 0;
}

/* softmax(logits) at temperature 1: p_i = exp(l_i - max) / sum */
static void softmax_norm(const float *logits, int V, double *max, double *sum) {
    *max = logits[0], *sum = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > *max) *max = logits[i];
    for (int i = 0; i < V; i++) *sum += exp((double)logits[i] - *max);
}

long viz_top_candidates(const float *logits, int V, long k, viz_candidate *top) {
    viz_candidate *all = malloc((size_t)V * sizeof *all);
    if (!all) return -1;
    double max, sum;
    softmax_norm(logits, V, &max, &sum);
    for (int i = 0; i < V; i++) all[i] = (viz_candidate){i, logits[i], 0, 0};
    qsort(all, (size_t)V, sizeof *all, by_rank);
    const long n = k > V ? V : k;
    for (long i = 0; i < n; i++) {
        top[i] = all[i];
        top[i].prob = exp((double)all[i].logit - max) / sum;
        top[i].rank = i + 1;
    }
    free(all);
    return n;
}

viz_candidate viz_candidate_of(const float *logits, int V, int32_t id) {
    double max, sum;
    softmax_norm(logits, V, &max, &sum);
    viz_candidate c = {id, logits[id], exp((double)logits[id] - max) / sum, 1};
    for (int i = 0; i < V; i++) c.rank += before(logits[i], i, logits[id], id);
    return c;
}

/* --- JSON ------------------------------------------------------------------ */

static void json_int(cJSON *obj, const char *key, long v) { viz_json_number(obj, key, (double)v); }

/* A score: null where undefined (NaN), no sibling: undefined is not an overflow. */
static void json_score(cJSON *obj, const char *key, double v) {
    if (isnan(v)) viz_json_null(obj, key);
    else viz_json_number(obj, key, v);
}

static void json_candidate(cJSON *obj, const gpt2_tokenizer *tok, const viz_candidate *c, int with_rank) {
    json_int(obj, "id", c->id);
    viz_json_token(obj, "token", tok, c->id);
    if (with_rank) json_int(obj, "rank", c->rank);
    viz_json_number(obj, "logit", c->logit);
    viz_json_number(obj, "prob", c->prob);
}

static cJSON *json_candidates(const gpt2_tokenizer *tok, const viz_candidate *top, int k) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < k; i++) json_candidate(viz_json_new_object(arr), tok, &top[i], 0);
    return arr;
}

static cJSON *json_ablated(const unsigned char *mask, int n_layer, int n_head);

void viz_ablation_text(viz_ablation ab, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int l = 0; ab.mask && l < ab.n_layer; l++) {
        const unsigned char *row = ab.mask + (size_t)l * ab.n_head;
        int n = 0;
        for (int h = 0; h < ab.n_head; h++) n += row[h] != 0;
        if (n == ab.n_head && o < cap) o += (size_t)snprintf(buf + o, cap - o, "%s%d.*", o ? " " : "", l);
        for (int h = 0; n < ab.n_head && h < ab.n_head && o < cap; h++)
            if (row[h]) o += (size_t)snprintf(buf + o, cap - o, "%s%d.%d", o ? " " : "", l, h);
    }
}

cJSON *viz_attention_json(const viz_attention *a) {
    cJSON *root = cJSON_CreateObject();
    if (a->model) viz_json_text(root, "model", a->model, strlen(a->model));
    json_int(root, "layer", a->layer);
    if (a->head >= 0) json_int(root, "head", a->head);
    else viz_json_null(root, "head");
    viz_json_add(root, "ablated", json_ablated(a->ablated.mask, a->ablated.n_layer, a->ablated.n_head));
    viz_json_tokens(root, a->tok, a->ids, (size_t)a->T);
    viz_json_matrix(root, "weights", a->w, a->T, a->T);
    return root;
}

cJSON *viz_heads_json(const viz_heads *h) {
    cJSON *root = cJSON_CreateArray();
    for (int i = 0; root && i < h->n; i++) {
        const viz_head_row *r = &h->rows[i];
        cJSON *e = viz_json_new_object(root);
        json_int(e, "layer", r->layer);
        json_int(e, "head", r->head);
        json_score(e, "prev_token", r->s.prev_token);
        json_score(e, "first_token", r->s.first_token);
        json_score(e, "self", r->s.self);
        json_score(e, "entropy", r->s.entropy);
        json_score(e, "induction", r->s.induction);
        json_int(e, "n_induction", r->s.n_induction);
        viz_json_add(e, "ablated", cJSON_CreateBool(r->ablated));
    }
    return root;
}

/* [[layer, head], ...] of an (n_layer, n_head) mask */
static cJSON *json_ablated(const unsigned char *mask, int n_layer, int n_head) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && mask && i < n_layer * n_head; i++) {
        if (!mask[i]) continue;
        const int pair[2] = {i / n_head, i % n_head};
        viz_json_append(arr, cJSON_CreateIntArray(pair, 2));
    }
    return arr;
}

cJSON *viz_lens_json(const viz_lens *l) {
    cJSON *root = cJSON_CreateObject();
    viz_json_tokens(root, l->tok, l->ids, (size_t)l->T);
    json_int(root, "pos", l->pos);
    cJSON *pred = cJSON_CreateObject();
    viz_json_add(root, "predicted", pred);
    if (l->n_layer > 0) {
        json_int(pred, "id", l->rows[l->n_layer - 1].predicted.id);
        viz_json_token(pred, "token", l->tok, l->rows[l->n_layer - 1].predicted.id);
    }
    viz_json_add(root, "ablated", json_ablated(l->ablated, l->n_layer, l->n_head));
    cJSON *layers = cJSON_CreateArray();
    viz_json_add(root, "layers", layers);
    for (int i = 0; layers && i < l->n_layer; i++) {
        const viz_lens_row *r = &l->rows[i];
        cJSON *e = viz_json_new_object(layers);
        json_int(e, "layer", r->layer);
        viz_json_add(e, "top", json_candidates(l->tok, r->top, r->k));
        json_int(e, "predicted_rank", r->predicted.rank);
        viz_json_number(e, "predicted_prob", r->predicted.prob);
        viz_json_number(e, "predicted_logit", r->predicted.logit);
    }
    return root;
}

cJSON *viz_history_json(const viz_history *h) {
    cJSON *root = cJSON_CreateObject();
    viz_json_tokens(root, h->tok, h->ids, (size_t)h->T);
    viz_json_add(root, "ablated", json_ablated(h->ablated.mask, h->ablated.n_layer, h->ablated.n_head));
    cJSON *rows = cJSON_CreateArray();
    viz_json_add(root, "positions", rows);
    for (int i = 0; rows && i < h->T; i++) {
        const viz_history_row *r = &h->rows[i];
        cJSON *e = viz_json_new_object(rows);
        json_int(e, "pos", r->pos);
        viz_json_add(e, "top", json_candidates(h->tok, r->top, r->k));
        if (r->next.id < 0) {
            viz_json_null(e, "next");
            continue;
        }
        cJSON *next = cJSON_CreateObject();
        viz_json_add(e, "next", next);
        json_candidate(next, h->tok, &r->next, 1);
    }
    return root;
}

/* {"id", "token"} of id, or null for -1 */
static void json_token_ref(cJSON *obj, const char *key, const gpt2_tokenizer *tok, int32_t id) {
    if (id < 0) {
        viz_json_null(obj, key);
        return;
    }
    cJSON *e = cJSON_CreateObject();
    viz_json_add(obj, key, e);
    json_int(e, "id", id);
    viz_json_token(e, "token", tok, id);
}

static cJSON *json_doubles(const double *v, int n) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) viz_json_append(arr, cJSON_CreateNumber(v[i]));
    return arr;
}

cJSON *viz_attribution_json(const viz_attribution *v) {
    const gpt2_attribution *a = v->a;
    cJSON *root = cJSON_CreateObject();
    if (v->model) viz_json_text(root, "model", v->model, strlen(v->model));
    viz_json_tokens(root, v->tok, v->ids, (size_t)v->T);
    viz_json_add(root, "ablated", json_ablated(v->ablated.mask, v->ablated.n_layer, v->ablated.n_head));
    json_int(root, "pos", a->pos);
    json_token_ref(root, "target", v->tok, a->target);
    json_token_ref(root, "baseline", v->tok, a->baseline);
    viz_json_text(root, "norm", a->rms_norm ? "rms" : "layer", a->rms_norm ? 3 : 5);
    viz_json_number(root, "scale", a->scale);
    viz_json_number(root, "logit", a->logit);
    viz_json_number(root, "embed", a->embed);
    cJSON *heads = cJSON_CreateArray();
    viz_json_add(root, "heads", heads);
    for (int l = 0; heads && l < a->n_layer; l++)
        viz_json_append(heads, json_doubles(a->heads + (size_t)l * a->n_head, a->n_head));
    viz_json_add(root, "attn_bias", json_doubles(a->attn_bias, a->n_layer));
    viz_json_add(root, "mlp", json_doubles(a->mlp, a->n_layer));
    viz_json_number(root, "ln_f_bias", a->ln_f_bias);
    viz_json_number(root, "sum", a->sum);
    return root;
}

/* {"ids", "tokens"} of a prompt under key */
static void json_prompt(cJSON *obj, const char *key, const gpt2_tokenizer *tok, const int32_t *ids, int n) {
    cJSON *e = cJSON_CreateObject();
    viz_json_add(obj, key, e);
    if (e) viz_json_tokens(e, tok, ids, (size_t)n);
}

cJSON *viz_patch_json(const viz_patch *v) {
    const gpt2_patch_result *r = v->r;
    cJSON *root = cJSON_CreateObject();
    if (v->model) viz_json_text(root, "model", v->model, strlen(v->model));
    json_prompt(root, "clean", v->tok, v->clean, r->n_tokens);
    json_prompt(root, "corrupt", v->tok, v->corrupt, r->n_tokens);
    viz_json_add(root, "ablated", json_ablated(v->ablated.mask, v->ablated.n_layer, v->ablated.n_head));
    json_token_ref(root, "answer", v->tok, r->answer);
    json_token_ref(root, "wrong", v->tok, r->wrong);
    viz_json_number(root, "ld_clean", r->ld_clean);
    viz_json_number(root, "ld_corrupt", r->ld_corrupt);
    const char *what = gpt2_patch_what_name(r->what), *cols = r->what == GPT2_PATCH_HEADS ? "head" : "pos";
    viz_json_text(root, "what", what, strlen(what));
    viz_json_text(root, "rows", "layer", 5);
    viz_json_text(root, "cols", cols, strlen(cols));
    json_int(root, "first_diff", r->first_diff);
    const char *keys[2] = {"scores", "ld"};
    const double *grids[2] = {r->scores, r->ld};
    for (int g = 0; g < 2; g++) {
        cJSON *rows = cJSON_CreateArray();
        viz_json_add(root, keys[g], rows);
        for (int l = 0; rows && l < r->rows; l++) viz_json_append(rows, json_doubles(grids[g] + (size_t)l * r->cols, r->cols));
    }
    json_int(root, "runs", r->n_runs);
    json_int(root, "positions", r->n_positions);
    return root;
}

/* --- CSV ------------------------------------------------------------------- */

/* The cell prefix + s[0, n); prefix holds none of the characters that need quoting. */
static void csv_cell_after(FILE *f, const char *prefix, const char *s, size_t n) {
    int quote = 0;
    for (size_t i = 0; i < n && !quote; i++) quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if (quote) fputc('"', f);
    fputs(prefix, f);
    for (size_t i = 0; i < n; i++) {
        if (quote && s[i] == '"') fputc('"', f);
        fputc(s[i], f);
    }
    if (quote) fputc('"', f);
}

void viz_csv_cell(FILE *f, const char *s, size_t n) { csv_cell_after(f, "", s, n); }

/* token id's bytes as a cell, after prefix */
static void csv_token(FILE *f, const char *prefix, const gpt2_tokenizer *tok, int32_t id) {
    size_t n = 0;
    const char *b = gpt2_tokenizer_token_bytes(tok, id, &n);
    csv_cell_after(f, prefix, b ? b : "", b ? n : 0);
}

/* ",%.9g", or "," alone for an undefined number */
static void csv_number(FILE *f, double v) {
    if (isnan(v)) fputc(',', f);
    else fprintf(f, ",%.9g", v);
}

/* ",SET\r\n": a row's last cell, the ablated heads (no character there needs quoting) */
static void csv_end_row(FILE *f, const char *ablated) { fprintf(f, ",%s\r\n", ablated); }

static void csv_attention(FILE *f, const viz_attention *a) {
    char ab[1024];
    viz_ablation_text(a->ablated, ab, sizeof ab);
    fputs("query_pos,query_token", f);
    for (int j = 0; j < a->T; j++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%d:", j);
        fputc(',', f);
        csv_token(f, prefix, a->tok, a->ids[j]);
    }
    csv_end_row(f, "ablated");
    for (int i = 0; i < a->T; i++) {
        fprintf(f, "%d,", i);
        csv_token(f, "", a->tok, a->ids[i]);
        for (int j = 0; j < a->T; j++) csv_number(f, a->w[(size_t)i * a->T + j]);
        csv_end_row(f, ab);
    }
}

static void csv_heads(FILE *f, const viz_heads *h) {
    fputs("layer,head,prev_token,first_token,self,entropy,induction,n_induction,ablated\r\n", f);
    for (int i = 0; i < h->n; i++) {
        const viz_head_row *r = &h->rows[i];
        fprintf(f, "%d,%d", r->layer, r->head);
        const double v[] = {r->s.prev_token, r->s.first_token, r->s.self, r->s.entropy, r->s.induction};
        for (int k = 0; k < 5; k++) csv_number(f, v[k]);
        fprintf(f, ",%d,%d\r\n", r->s.n_induction, r->ablated);
    }
}

/* One candidate row: "LEAD,[LEAD_TOKEN,]rank,id,token,logit,prob,mark,ablated" (lead_tok -1: none) */
static void csv_candidate(FILE *f, int lead, int32_t lead_tok, const gpt2_tokenizer *tok, const viz_candidate *c,
                          int mark, const char *ablated) {
    fprintf(f, "%d,", lead);
    if (lead_tok >= 0) csv_token(f, "", tok, lead_tok), fputc(',', f);
    fprintf(f, "%ld,%d,", c->rank, c->id);
    csv_token(f, "", tok, c->id);
    fprintf(f, ",%.9g,%.9g,%d", c->logit, c->prob, mark);
    csv_end_row(f, ablated);
}

/* top's rows, then marked's when it is not among them (marked.id -1: none) */
static void csv_candidates(FILE *f, int lead, int32_t lead_tok, const gpt2_tokenizer *tok, const viz_candidate *top,
                           int k, const viz_candidate *marked, const char *ablated) {
    int seen = 0;
    for (int i = 0; i < k; i++) {
        const int mark = top[i].id == marked->id;
        seen |= mark;
        csv_candidate(f, lead, lead_tok, tok, &top[i], mark, ablated);
    }
    if (!seen && marked->id >= 0) csv_candidate(f, lead, lead_tok, tok, marked, 1, ablated);
}

static void csv_lens(FILE *f, const viz_lens *l) {
    char ab[1024];
    viz_ablation_text((viz_ablation){l->ablated, l->n_layer, l->n_head}, ab, sizeof ab);
    fputs("layer,rank,id,token,logit,prob,predicted,ablated\r\n", f);
    for (int i = 0; i < l->n_layer; i++)
        csv_candidates(f, l->rows[i].layer, -1, l->tok, l->rows[i].top, l->rows[i].k, &l->rows[i].predicted, ab);
}

static void csv_history(FILE *f, const viz_history *h) {
    char ab[1024];
    viz_ablation_text(h->ablated, ab, sizeof ab);
    fputs("pos,token,rank,id,candidate,logit,prob,next,ablated\r\n", f);
    for (int i = 0; i < h->T; i++) {
        const viz_history_row *r = &h->rows[i];
        csv_candidates(f, r->pos, h->ids[r->pos], h->tok, r->top, r->k, &r->next, ab);
    }
}

/* An attribution's rows: the leading cells model,prompt,pos,target,baseline
 * (the prompt the bytes of its tokens), then the part's. */
typedef struct {
    FILE *f;
    const viz_attribution *v;
    const char *prompt, *ablated;
    size_t prompt_len;
} csv_attr;

/* layer, head: -1 for an empty cell */
static void csv_part(const csv_attr *c, const char *part, int layer, int head, double v) {
    const char *model = c->v->model ? c->v->model : "";
    viz_csv_cell(c->f, model, strlen(model));
    fputc(',', c->f);
    viz_csv_cell(c->f, c->prompt, c->prompt_len);
    fprintf(c->f, ",%d,", c->v->a->pos);
    csv_token(c->f, "", c->v->tok, c->v->a->target);
    fputc(',', c->f);
    if (c->v->a->baseline >= 0) csv_token(c->f, "", c->v->tok, c->v->a->baseline);
    fprintf(c->f, ",%s,", part);
    if (layer >= 0) fprintf(c->f, "%d", layer);
    fputc(',', c->f);
    if (head >= 0) fprintf(c->f, "%d", head);
    csv_number(c->f, v);
    csv_end_row(c->f, c->ablated);
}

static gpt2_status csv_attribution(FILE *f, const viz_attribution *v, gpt2_error *err) {
    const gpt2_attribution *a = v->a;
    char ab[1024];
    viz_ablation_text(v->ablated, ab, sizeof ab);
    size_t total = 0, n = 0;
    for (int i = 0; i < v->T; i++) total += gpt2_tokenizer_token_bytes(v->tok, v->ids[i], &n) ? n : 0;
    char *text = malloc(total + 1);
    if (!text) return viz_fail(err, GPT2_ERR_NOMEM, "out of memory for the prompt's %zu bytes", total);
    csv_attr c = {f, v, text, ab, 0};
    for (int i = 0; i < v->T; i++) {
        const char *b = gpt2_tokenizer_token_bytes(v->tok, v->ids[i], &n);
        if (b) memcpy(text + c.prompt_len, b, n), c.prompt_len += n;
    }
    fputs("model,prompt,pos,target,baseline,part,layer,head,value,ablated\r\n", f);
    csv_part(&c, "embed", -1, -1, a->embed);
    for (int l = 0; l < a->n_layer; l++)
        for (int h = 0; h < a->n_head; h++) csv_part(&c, "head", l, h, a->heads[(size_t)l * a->n_head + h]);
    for (int l = 0; l < a->n_layer; l++) csv_part(&c, "attn_bias", l, -1, a->attn_bias[l]);
    for (int l = 0; l < a->n_layer; l++) csv_part(&c, "mlp", l, -1, a->mlp[l]);
    csv_part(&c, "ln_f_bias", -1, -1, a->ln_f_bias);
    csv_part(&c, "sum", -1, -1, a->sum);
    csv_part(&c, "logit", -1, -1, a->logit);
    free(text);
    return GPT2_OK;
}

static void csv_patch(FILE *f, const viz_patch *v) {
    const gpt2_patch_result *r = v->r;
    char ab[1024];
    viz_ablation_text(v->ablated, ab, sizeof ab);
    const char *model = v->model ? v->model : "", *what = gpt2_patch_what_name(r->what);
    const int heads = r->what == GPT2_PATCH_HEADS;
    fputs("model,what,layer,pos,head,clean_token,corrupt_token,score,ld,ablated\r\n", f);
    for (int l = 0; l < r->rows; l++)
        for (int c = 0; c < r->cols; c++) {
            viz_csv_cell(f, model, strlen(model));
            fprintf(f, ",%s,%d,", what, l);
            if (heads) fprintf(f, ",%d,,", c);
            else {
                fprintf(f, "%d,,", c);
                csv_token(f, "", v->tok, v->clean[c]);
                fputc(',', f);
                csv_token(f, "", v->tok, v->corrupt[c]);
            }
            csv_number(f, r->scores[(size_t)l * r->cols + c]);
            csv_number(f, r->ld[(size_t)l * r->cols + c]);
            csv_end_row(f, ab);
        }
}

/* --- files ----------------------------------------------------------------- */

viz_format viz_format_of(const char *path) {
    static const struct {
        const char *ext;
        viz_format f;
    } ends[] = {{".json", VIZ_FORMAT_JSON}, {".csv", VIZ_FORMAT_CSV}, {".svg", VIZ_FORMAT_SVG}, {".png", VIZ_FORMAT_PNG}};
    const size_t n = strlen(path);
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        const size_t e = strlen(ends[i].ext);
        if (n > e && path[n - e - 1] != '/' && strcasecmp(path + n - e, ends[i].ext) == 0) return ends[i].f;
    }
    return VIZ_FORMAT_UNKNOWN;
}

static gpt2_status put_csv(FILE *f, void *user, gpt2_error *err) {
    const viz_table *t = user;
    switch (t->kind) {
    case VIZ_TABLE_ATTENTION: csv_attention(f, t->attention); break;
    case VIZ_TABLE_HEADS: csv_heads(f, t->heads); break;
    case VIZ_TABLE_LENS: csv_lens(f, t->lens); break;
    case VIZ_TABLE_HISTORY: csv_history(f, t->history); break;
    case VIZ_TABLE_ATTRIBUTION: return csv_attribution(f, t->attribution, err);
    case VIZ_TABLE_PATCH: csv_patch(f, t->patch); break;
    }
    return GPT2_OK;
}

static gpt2_status put_text(FILE *f, void *user, gpt2_error *err) {
    fputs(user, f);
    fputc('\n', f);
    return GPT2_OK;
}

static cJSON *table_json(const viz_table *t) {
    switch (t->kind) {
    case VIZ_TABLE_ATTENTION: return viz_attention_json(t->attention);
    case VIZ_TABLE_HEADS: return viz_heads_json(t->heads);
    case VIZ_TABLE_LENS: return viz_lens_json(t->lens);
    case VIZ_TABLE_HISTORY: return viz_history_json(t->history);
    case VIZ_TABLE_ATTRIBUTION: return viz_attribution_json(t->attribution);
    case VIZ_TABLE_PATCH: return viz_patch_json(t->patch);
    }
    return NULL;
}

gpt2_status viz_export(const char *path, const viz_table *t, gpt2_error *err) {
    const viz_format fmt = viz_format_of(path);
    if (fmt == VIZ_FORMAT_CSV) return gpt2_fileio_write_atomic(path, put_csv, (void *)t, err);
    if (fmt != VIZ_FORMAT_JSON)
        return viz_fail(err, GPT2_ERR_INVALID_ARG, "%s: a table is written as .json or .csv (the name's ending says which)",
                        path);
    cJSON *doc = table_json(t);
    char *text = doc && !viz_json_failed() ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (!text) return viz_fail(err, GPT2_ERR_NOMEM, "%s: out of memory building the JSON document", path);
    gpt2_status st = gpt2_fileio_write_atomic(path, put_text, text, err);
    cJSON_free(text);
    return st;
}
