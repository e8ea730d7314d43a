/* version.c — the library's version, as built (gpt2.h's GPT2_VERSION). */
#include "gpt2.h"

const char *gpt2_version(void) { return GPT2_VERSION; }
