/* torch_ckpt.c — PyTorch zip checkpoints (nanoGPT's ckpt.pt, HF's pytorch_model.bin). */
#include <sys/mman.h>

#include "error.h"
#include "model_source.h"

gpt2_status torch_source_open(model_source *src, void *map, size_t size, gpt2_error *err) {
    munmap(map, size);
    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: PyTorch checkpoints are not read yet", src->path);
}
