/* gpt2.h — the whole public API of libgpt2 (gptscope's core library). */
#ifndef GPT2_H
#define GPT2_H
#include "gpt2_status.h"
#include "gpt2_tokenizer.h"
#include "gpt2_train.h"
#include "gpt2_model.h"
#include "gpt2_context.h"
#include "gpt2_sampler.h"
#include "gpt2_speculative.h"
#include "gpt2_inspect.h"
#include "gpt2_chat_template.h"
#include "gpt2_session.h"
#include "gpt2_bpe_train.h"
#include "gpt2_fileio.h"
#endif
