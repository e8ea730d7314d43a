/* gpt2.h — the whole public API of libgpt2 (gptscope's core library). */
#ifndef GPT2_H
#define GPT2_H

/* The version these headers describe; gpt2_version() is the library's own
 * (the two differ when a program runs against another build). */
#define GPT2_VERSION_MAJOR 0
#define GPT2_VERSION_MINOR 1
#define GPT2_VERSION_PATCH 0
#define GPT2_VERSION "0.1.0"
#include "gpt2_status.h"
#include "gpt2_tokenizer.h"
#include "gpt2_train.h"
#include "gpt2_model.h"
#include "gpt2_context.h"
#include "gpt2_sampler.h"
#include "gpt2_speculative.h"
#include "gpt2_inspect.h"
#include "gpt2_attribute.h"
#include "gpt2_patch.h"
#include "gpt2_chat_template.h"
#include "gpt2_session.h"
#include "gpt2_bpe_train.h"
#include "gpt2_fileio.h"

#ifdef __cplusplus
extern "C" {
#endif
/* "MAJOR.MINOR.PATCH" of the library linked in. */
const char *gpt2_version(void);
#ifdef __cplusplus
}
#endif
#endif
