/* hugemem.c — 2 MiB-aligned anonymous mappings with MADV_HUGEPAGE. */
#include "hugemem.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

static size_t round_up(size_t n) { return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1); }

void *huge_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    size_t size = round_up(bytes), span = size + HUGE_PAGE;
    if (size < bytes || span < size) return NULL;
    /* Map one huge page extra, then trim so the start is 2 MiB-aligned. */
    uint8_t *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + span - (p + size));
    if (tail) munmap(p + size, tail);
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE); /* advice only: fine if refused */
#endif
    return p;
}

void huge_free(void *p, size_t bytes) {
    if (p) munmap(p, round_up(bytes ? bytes : 1));
}
