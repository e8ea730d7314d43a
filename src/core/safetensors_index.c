/* safetensors_index.c — Hugging Face's sharded safetensors (st_open_index in
 * safetensors.h): model.safetensors.index.json's weight_map and the shards it
 * names, each opened by st_open, merged into one st_file whose tensors still
 * point into their own shard's mapping (nothing copied). */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "gpt2_fileio.h"
#include "json.h"
#include "textio.h"

typedef struct {
    const char *name; /* the tensor's, as the index writes it (the cJSON's string) */
    int shard;        /* into the sorted shard names */
} index_entry;

/* A tensor some shard holds, with that shard. */
typedef struct {
    st_tensor *t;
    int shard;
} held;

/* What st_open_index builds, freed in one place on every path. */
typedef struct {
    const char *path;      /* the index, first in messages */
    const char *base;      /* its file name */
    char dir[4096];        /* its directory, where every shard must lie */
    index_entry *entries;  /* weight_map, sorted by tensor name */
    int n_entries;
    const char **names;    /* the distinct shard names, sorted */
    int n_names;
    int *listed;           /* tensors the index lists in each shard, for messages */
    st_file *parts;        /* each shard as st_open opened it */
    int n_parts;
    held *all;             /* every tensor of every shard, sorted by name, then shard */
    int n_all;
    gpt2_error *err;
} index_build;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const index_entry *)a)->name, ((const index_entry *)b)->name);
}

static int cmp_held(const void *a, const void *b) {
    const held *x = a, *y = b;
    const int c = strcmp(x->t->name, y->t->name);
    return c ? c : (x->shard > y->shard) - (x->shard < y->shard);
}

static const char *shown(const char *s, char buf[TEXT_SHOW_BUF]) { return text_show(s, strlen(s), buf); }

/* A shard is a plain file name in the index's directory: the index must not
 * reach files elsewhere (an absolute path, a directory part, "..") just by
 * naming them. */
static gpt2_status check_shard_name(const index_build *b, const char *tensor, const char *name) {
    char ts[TEXT_SHOW_BUF], ns[TEXT_SHOW_BUF];
    int control = 0; /* messages print a shard's path as it is: no byte may move the terminal */
    for (const char *c = name; *c; c++) control |= (unsigned char)*c < 0x20 || *c == 0x7f;
    const char *why = !*name                                      ? "is empty"
                      : name[0] == '/'                            ? "is an absolute path"
                      : strchr(name, '/')                         ? "has a directory part"
                      : !strcmp(name, ".") || !strcmp(name, "..") ? "is not a file name"
                      : control                                   ? "has a control character"
                                                                  : NULL;
    if (!why) return GPT2_OK;
    return gpt2_fail(b->err, GPT2_ERR_FORMAT,
                     "%s: weight_map[\"%s\"]: the shard \"%s\" %s, expected a file name in the index's directory",
                     b->path, shown(tensor, ts), shown(name, ns), why);
}

/* weight_map into b->entries (sorted by tensor name) and b->names (the distinct shards, sorted). */
static gpt2_status read_weight_map(index_build *b, const cJSON *root) {
    const cJSON *map = NULL;
    json_src js = {b->path, NULL, GPT2_ERR_FORMAT, b->err};
    if (!cJSON_IsObject(root))
        return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: expected a JSON object, found %s", b->path, json_type_name(root));
    gpt2_status st = json_get(&js, root, "weight_map", "an object of tensor name: shard file", &map);
    if (st) return st;
    if (!cJSON_IsObject(map)) return json_bad(&js, "weight_map", "an object of tensor name: shard file", json_type_name(map));
    const int n = cJSON_GetArraySize(map);
    if (n == 0) return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: weight_map lists no tensors", b->path);
    b->entries = malloc((size_t)n * sizeof *b->entries);
    b->names = malloc((size_t)n * sizeof *b->names);
    if (!b->entries || !b->names) return gpt2_fail(b->err, GPT2_ERR_NOMEM, "%s: out of memory", b->path);
    for (const cJSON *e = map->child; e; e = e->next) {
        char ts[TEXT_SHOW_BUF];
        if (!cJSON_IsString(e))
            return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: weight_map[\"%s\"]: expected a shard file name (a string), found %s",
                             b->path, shown(e->string, ts), json_type_name(e));
        if ((st = check_shard_name(b, e->string, e->valuestring))) return st;
        b->entries[b->n_entries++] = (index_entry){e->string, -1};
        b->names[b->n_names++] = e->valuestring;
    }
    qsort(b->entries, (size_t)b->n_entries, sizeof *b->entries, cmp_entry);
    for (int i = 1; i < b->n_entries; i++) /* json_parse refuses a key twice; a root from elsewhere may not */
        if (!strcmp(b->entries[i - 1].name, b->entries[i].name)) {
            char ts[TEXT_SHOW_BUF];
            return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: weight_map lists tensor '%s' twice", b->path,
                             shown(b->entries[i].name, ts));
        }
    qsort(b->names, (size_t)b->n_names, sizeof *b->names, cmp_str);
    int k = 0;
    for (int i = 0; i < b->n_names; i++)
        if (!k || strcmp(b->names[k - 1], b->names[i])) b->names[k++] = b->names[i];
    b->n_names = k;
    if (!(b->listed = calloc((size_t)k, sizeof *b->listed)))
        return gpt2_fail(b->err, GPT2_ERR_NOMEM, "%s: out of memory", b->path);
    for (const cJSON *e = map->child; e; e = e->next) { /* each entry's shard, by name */
        const char *key = e->valuestring;
        const char **at = bsearch(&key, b->names, (size_t)k, sizeof *b->names, cmp_str);
        index_entry probe = {e->string, 0}, *ent = bsearch(&probe, b->entries, (size_t)b->n_entries, sizeof probe, cmp_entry);
        ent->shard = (int)(at - b->names);
        b->listed[ent->shard]++;
    }
    return GPT2_OK;
}

/* Each shard, in name order, through st_open (its messages name the shard). */
static gpt2_status open_shards(index_build *b) {
    if (!(b->parts = calloc((size_t)b->n_names, sizeof *b->parts)))
        return gpt2_fail(b->err, GPT2_ERR_NOMEM, "%s: out of memory", b->path);
    char path[4096];
    struct stat sb;
    for (int i = 0; i < b->n_names; i++) {
        gpt2_status st = gpt2_fileio_join(path, sizeof path, b->dir, b->names[i], b->err);
        if (st) return st;
        if (stat(path, &sb) != 0 && errno == ENOENT)
            return gpt2_fail(b->err, GPT2_ERR_IO, "%s: no such shard, and %s lists %d tensor%s in it", path,
                             b->base, b->listed[i], b->listed[i] == 1 ? "" : "s");
        if ((st = st_open(path, &b->parts[i], b->err))) return st;
        b->n_parts++;
    }
    return GPT2_OK;
}

/* Every shard's tensors in one list sorted by name; a name in two shards is refused. */
static gpt2_status gather(index_build *b) {
    size_t n = 0;
    for (int i = 0; i < b->n_parts; i++) n += (size_t)b->parts[i].n_tensors;
    if (!(b->all = malloc((n ? n : 1) * sizeof *b->all))) return gpt2_fail(b->err, GPT2_ERR_NOMEM, "%s: out of memory", b->path);
    for (int i = 0; i < b->n_parts; i++)
        for (int k = 0; k < b->parts[i].n_tensors; k++) b->all[b->n_all++] = (held){&b->parts[i].tensors[k], i};
    qsort(b->all, (size_t)b->n_all, sizeof *b->all, cmp_held);
    for (int i = 1; i < b->n_all; i++)
        if (!strcmp(b->all[i - 1].t->name, b->all[i].t->name)) {
            char ts[TEXT_SHOW_BUF], s1[TEXT_SHOW_BUF], s2[TEXT_SHOW_BUF];
            return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: tensor '%s' is in two shards, %s and %s, expected in one",
                             b->path, shown(b->all[i].t->name, ts), shown(b->names[b->all[i - 1].shard], s1),
                             shown(b->names[b->all[i].shard], s2));
        }
    return GPT2_OK;
}

/* The index's tensors, each from the shard it names, into f (both lists
 * sorted by name: one walk); the names move from the parts to f. */
static gpt2_status merge(index_build *b, st_file *f) {
    if (!(f->tensors = calloc((size_t)b->n_entries, sizeof *f->tensors)))
        return gpt2_fail(b->err, GPT2_ERR_NOMEM, "%s: out of memory", b->path);
    int h = 0;
    for (int i = 0; i < b->n_entries; i++) {
        const index_entry *e = &b->entries[i];
        while (h < b->n_all && strcmp(b->all[h].t->name, e->name) < 0) h++; /* held but not listed: ignored */
        char ts[TEXT_SHOW_BUF], s1[TEXT_SHOW_BUF], s2[TEXT_SHOW_BUF];
        if (h == b->n_all || strcmp(b->all[h].t->name, e->name))
            return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: tensor '%s' is in no shard (the index lists it in %s)",
                             b->path, shown(e->name, ts), shown(b->names[e->shard], s1));
        if (b->all[h].shard != e->shard)
            return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: tensor '%s' is listed in %s, but that shard does not hold it "
                             "(%s does)", b->path, shown(e->name, ts), shown(b->names[e->shard], s1),
                             shown(b->names[b->all[h].shard], s2));
        f->tensors[f->n_tensors++] = *b->all[h].t;
        b->all[h++].t->name = NULL; /* f owns it now */
    }
    return GPT2_OK;
}

/* The shards' mappings move to f; what the parts keep (unlisted tensors) is freed. */
static gpt2_status take_maps(index_build *b, st_file *f) {
    if (!(f->shards = calloc((size_t)b->n_parts, sizeof *f->shards)))
        return gpt2_fail(b->err, GPT2_ERR_NOMEM, "%s: out of memory", b->path);
    for (int i = 0; i < b->n_parts; i++) {
        st_file *p = &b->parts[i];
        f->shards[f->n_shards++] = (st_shard){(char *)p->path, p->map, p->map_size};
        p->path = NULL, p->map = NULL, p->map_size = 0;
    }
    return GPT2_OK;
}

gpt2_status st_open_index(const char *index_path, const struct cJSON *root, st_file *f, gpt2_error *err) {
    memset(f, 0, sizeof *f);
    index_build b = {.path = index_path, .err = err};
    const char *slash = strrchr(index_path, '/');
    b.base = slash ? slash + 1 : index_path;
    if (!slash) snprintf(b.dir, sizeof b.dir, ".");
    else if (slash == index_path) snprintf(b.dir, sizeof b.dir, "/");
    else snprintf(b.dir, sizeof b.dir, "%.*s", (int)(slash - index_path), index_path);
    gpt2_status st = GPT2_OK;
    if (!(f->path = strdup(index_path))) st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", index_path);
    if (!st) st = read_weight_map(&b, root);
    if (!st) st = open_shards(&b);
    if (!st) st = gather(&b);
    if (!st) st = merge(&b, f);
    if (!st) st = take_maps(&b, f);
    for (int i = 0; i < b.n_parts; i++) st_close(&b.parts[i]);
    free(b.parts), free(b.all), free(b.entries), free(b.names), free(b.listed);
    if (st) st_close(f);
    return st;
}
