/* gguf_stub.c — GGUF's place in the loader until the GGUF reader is merged:
 * model_source.c hands a file starting with "GGUF" to gguf_model_load. The
 * GGUF branch defines it (and deletes this file). */
#include "error.h"
#include "model_source.h"

gpt2_status gguf_model_load(const char *path, struct gpt2_model *m, gpt2_error *err) {
    (void)m;
    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: a GGUF file: GGUF support is not built in this branch", path);
}
