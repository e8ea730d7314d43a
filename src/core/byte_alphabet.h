/* byte_alphabet.h — GPT-2's byte <-> character alphabet (library-private), shared by the
 * tokenizer (reading vocab.json / merges.txt) and the BPE trainer (writing them).
 *
 * bytes_to_unicode(): the 188 printable bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF)
 * stand for themselves; the other 68 map, in byte order, to U+0100..U+0143. The same order,
 * printable bytes first, gives the ids 0..255 of GPT-2's vocabulary. */
#ifndef GPT2_CORE_BYTE_ALPHABET_H
#define GPT2_CORE_BYTE_ALPHABET_H

#include <stdint.h>

static inline int byte_is_printable(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The byte a character of the alphabet stands for, or -1. */
static inline int char_to_byte(uint32_t c) {
    if (c < 0x100) return byte_is_printable((int)c) ? (int)c : -1;
    if (c > 0x143) return -1;
    int n = (int)(c - 0x100); /* the n-th non-printable byte */
    for (int b = 0; b < 256; b++)
        if (!byte_is_printable(b) && n-- == 0) return b;
    return -1;
}

/* The character standing for byte b: below U+0144, so one or two bytes of UTF-8. */
static inline uint32_t byte_to_char(int b) {
    if (byte_is_printable(b)) return (uint32_t)b;
    uint32_t c = 0x100;
    for (int i = 0; i < b; i++) c += !byte_is_printable(i);
    return c;
}

#endif
