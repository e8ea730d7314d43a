/* pretokenize.h — GPT-2's pre-tokenization: the regex that cuts text into the pieces BPE
 * works inside (library-private). Shared by the tokenizer (encoding) and the BPE trainer,
 * so the two can never disagree on where a piece ends.
 *
 *     pcre2_code *re = pretok_compile(&err);
 *     pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
 *     for (size_t pos = 0, start, stop; pos < len; pos = stop) {
 *         if (pretok_next(re, md, s, len, pos, &start, &stop, &err) != GPT2_OK) ...;
 *         // [pos, start): a run of invalid UTF-8 (a piece of its own when non-empty)
 *         // [start, stop): a regex match (a piece when non-empty)
 *     }
 */
#ifndef GPT2_CORE_PRETOKENIZE_H
#define GPT2_CORE_PRETOKENIZE_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stddef.h>

#include "gpt2_status.h"

/* Compiles GPT-2's pattern (UTF, Unicode properties, invalid UTF-8 allowed; JIT when
 * available). NULL with GPT2_ERR_TOKENIZER in err if PCRE2 refuses it. Free with
 * pcre2_code_free(). */
pcre2_code *pretok_compile(gpt2_error *err);

/* The same for another split pattern (a tokenizer.json's Split regex, in the Ruby syntax
 * of Hugging Face's Oniguruma), rewritten where PCRE2 reads it otherwise: \s and \S as
 * Unicode's White_Space list (PCRE2's own \s differs by version), \h and \H as hex digits,
 * ^ and $ at every line; \S and \H inside a bracket class are refused. what names the
 * pattern's source in messages. */
pcre2_code *pretok_compile_pattern(const char *pattern, const char *what, gpt2_error *err);

/* The next piece boundary at or after pos (< len) in s[0, len): *start and *stop delimit the
 * next regex match, or are both len when there is none. Bytes in [pos, *start) can only be
 * invalid UTF-8: every valid character matches one of the pattern's last alternatives, and
 * PCRE2_MATCH_INVALID_UTF makes a match stop at an invalid byte. The caller continues from
 * *stop. GPT2_ERR_TOKENIZER if PCRE2 fails (e.g. a resource limit). */
gpt2_status pretok_next(const pcre2_code *re, pcre2_match_data *md, const unsigned char *s,
                        size_t len, size_t pos, size_t *start, size_t *stop, gpt2_error *err);

#endif
