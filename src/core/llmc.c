/* llmc.c — llm.c's model files (gpt2_124M.bin, gpt2_124M_bf16.bin) and gpt2_tokenizer.bin. */
#include <sys/mman.h>

#include "error.h"
#include "model_source.h"

gpt2_status llmc_source_open(model_source *src, void *map, size_t size, gpt2_error *err) {
    munmap(map, size);
    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: llm.c models are not read yet", src->path);
}
