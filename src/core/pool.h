/* pool.h — a small fixed thread pool: the one pool that does the engine's work
 * (library-private).
 *
 * pool_run(p, fn, arg) calls fn(arg, ith, nth) on every thread, the caller
 * being ith 0, and returns when all have finished. Idle workers spin briefly
 * (so back-to-back jobs of a token cost no wake-up) and then sleep, so an idle
 * pool burns no CPU. OpenBLAS runs single-threaded inside the jobs, so two
 * thread pools never compete for the cores.
 */
#ifndef GPT2_CORE_POOL_H
#define GPT2_CORE_POOL_H

typedef struct gpt2_pool gpt2_pool;
typedef void (*pool_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1 = no workers, jobs run inline). NULL on failure. */
gpt2_pool *pool_new(int n_threads);
void pool_free(gpt2_pool *p);
int pool_n_threads(const gpt2_pool *p);
void pool_run(gpt2_pool *p, pool_fn fn, void *arg);

/* [*begin, *end) = this thread's share of n items, in contiguous blocks of
 * `align` items (the last share takes the remainder). */
void pool_share(int n, int align, int ith, int nth, int *begin, int *end);

/* The number of online CPUs, at least 1. */
int pool_default_threads(void);

#endif
