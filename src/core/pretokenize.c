/* pretokenize.c — GPT-2's pre-tokenization pattern through PCRE2 (see pretokenize.h). */
#include "pretokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* The pre-tokenization pattern of encoder.py, with \s spelled out. Python's `regex` module
 * (which GPT-2 used) takes \s to be Unicode's White_Space property: TAB..CR, space, U+0085,
 * U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. PCRE2 10.42 with
 * PCRE2_UCP also matches U+180E (MONGOLIAN VOWEL SEPARATOR, a format char since Unicode 6.3),
 * and other PCRE2 versions have their own lists, so we write the class out in full.
 * U+001C..U+001F, U+200B and U+FEFF are not whitespace for either (Python's str.isspace()
 * would say otherwise for U+001C..U+001F, but the regex module does not use it). */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"
static const char PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
                              "|[" WS "]+(?![^" WS "])|[" WS "]+";

static pcre2_code *compile(const char *pattern, size_t len, const char *what, uint32_t options, gpt2_error *err) {
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | options,
                                   &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(code, msg, sizeof msg);
        gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: the pre-tokenizer pattern does not compile at offset %zu: %s", what,
                  (size_t)off, (char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
    return re;
}

pcre2_code *pretok_compile(gpt2_error *err) { return compile(PATTERN, sizeof PATTERN - 1, "GPT-2", 0, err); }

/* One escape the two dialects read differently, rewritten: \\s \\S (White_Space), \\h \\H
 * (Oniguruma: a hex digit; PCRE2: horizontal space). Returns the bytes written, 0 for an
 * escape that is the same in both, -1 for one that cannot be written inside a class. */
static int rewrite_escape(char c, int in_class, char *out) {
    const char *set = c == 's' || c == 'S' ? WS : c == 'h' || c == 'H' ? "0-9a-fA-F" : NULL;
    if (!set) return 0;
    const int neg = c == 'S' || c == 'H';
    if (neg && in_class) return -1;
    return sprintf(out, in_class ? "%s" : neg ? "[^%s]" : "[%s]", set);
}

pcre2_code *pretok_compile_pattern(const char *pattern, const char *what, gpt2_error *err) {
    const size_t n = strlen(pattern);
    char *out = malloc(n * (sizeof WS + 4) + 1); /* each 2-byte escape at most "[^" WS "]" */
    if (!out) {
        gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t k = 0;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < n && pattern[i + 1] == 'Q') { /* \\Q...\\E: literal, copied whole */
            const char *e = strstr(pattern + i + 2, "\\E");
            const size_t end = e ? (size_t)(e - pattern) + 2 : n;
            memcpy(out + k, pattern + i, end - i);
            k += end - i, i = end - 1;
            continue;
        }
        if (c == '\\' && i + 1 < n) {
            const int w = rewrite_escape(pattern[i + 1], in_class, out + k);
            if (w < 0) {
                free(out);
                gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: the pre-tokenizer pattern has \\%c inside a bracket class, "
                          "which gptscope cannot rewrite", what, pattern[i + 1]);
                return NULL;
            }
            if (w == 0) out[k++] = c, out[k++] = pattern[i + 1]; /* any other escape, copied whole */
            k += (size_t)(w > 0 ? w : 0), i++;
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && pattern[i + 1] == ':') { /* [:alpha:] inside a class */
            const char *e = strstr(pattern + i, ":]");
            const size_t end = e ? (size_t)(e - pattern) + 2 : i + 1;
            memcpy(out + k, pattern + i, end - i);
            k += end - i, i = end - 1;
            continue;
        }
        out[k++] = c;
        if (c == '[' && !in_class) { /* a ']' right after "[" or "[^" is a literal */
            in_class = 1;
            if (i + 1 < n && pattern[i + 1] == '^') out[k++] = pattern[++i];
            if (i + 1 < n && pattern[i + 1] == ']') out[k++] = pattern[++i];
        } else if (c == ']' && in_class) {
            in_class = 0;
        }
    }
    pcre2_code *re = compile(out, k, what, PCRE2_MULTILINE, err); /* Oniguruma's ^ and $ are line anchors */
    free(out);
    return re;
}

gpt2_status pretok_next(const pcre2_code *re, pcre2_match_data *md, const unsigned char *s,
                        size_t len, size_t pos, size_t *start, size_t *stop, gpt2_error *err) {
    /* never an empty match: a tokenizer.json's pattern may allow one, and it would not advance */
    int rc = pcre2_match(re, s, len, pos, PCRE2_NOTEMPTY, md, NULL);
    *start = *stop = len;
    if (rc >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        *start = ov[0];
        *stop = ov[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "pre-tokenizer failed at byte %zu: %s", pos,
                         (char *)msg);
    }
    return GPT2_OK;
}
