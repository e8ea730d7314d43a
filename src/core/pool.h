/* pool.h — a small fixed thread pool: the one pool that does the engine's work
 * (library-private).
 *
 * pool_run(p, fn, arg, n_chunks) calls fn(arg, chunk, n_chunks, ith) once for
 * every chunk in [0, n_chunks), on any thread (the caller is ith 0). Thread i
 * first runs its own share, chunks [n i / nt, n (i + 1) / nt) in order, then
 * takes the chunks others have not reached from the far end of their shares:
 * each thread streams one run of consecutive weight panels, and a thread the
 * OS preempts delays at most the chunk it holds. Idle workers spin briefly (so the
 * back-to-back jobs of a token cost no wake-up), then sleep, so an idle pool
 * burns no CPU. OpenBLAS runs single-threaded inside the chunks, so two thread
 * pools never compete for the cores.
 */
#ifndef GPT2_CORE_POOL_H
#define GPT2_CORE_POOL_H

typedef struct gpt2_pool gpt2_pool;
typedef void (*pool_fn)(void *arg, int chunk, int n_chunks, int ith);

/* n_threads >= 1 (1 = no workers, jobs run inline). NULL on failure. */
gpt2_pool *pool_new(int n_threads);
void pool_free(gpt2_pool *p);
int pool_n_threads(const gpt2_pool *p);
void pool_run(gpt2_pool *p, pool_fn fn, void *arg, int n_chunks);

/* [*begin, *end) = chunk `chunk` of n items split into n_chunks contiguous
 * pieces, each a multiple of `align` items (the last takes the remainder). */
void pool_share(int n, int align, int chunk, int n_chunks, int *begin, int *end);

/* The number of online CPUs, at least 1. */
int pool_default_threads(void);

#endif
