/* hugemem.h — large anonymous allocations backed by transparent huge pages
 * where the kernel allows (library-private).
 *
 * Decode streams every weight once per token; with 4 KiB pages the TLB misses
 * cost 15-45% of the read bandwidth on this class of machine, so big buffers
 * (random-model weights, the KV cache) ask for 2 MiB pages with
 * madvise(MADV_HUGEPAGE). Memory is zero-filled.
 */
#ifndef GPT2_CORE_HUGEMEM_H
#define GPT2_CORE_HUGEMEM_H

#include <stddef.h>

void *huge_alloc(size_t bytes);          /* NULL on failure */
void huge_free(void *p, size_t bytes);   /* bytes as passed to huge_alloc */

#endif
