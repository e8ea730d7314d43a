/* pool.c — fixed thread pool with spin-then-sleep workers. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spins before a worker sleeps: ~50-100 us, longer than the gap between the
 * jobs of one token, far shorter than a human notices. */
#define SPIN_ROUNDS 20000

typedef struct {
    gpt2_pool *pool;
    int ith;
    pthread_t thread;
} worker;

struct gpt2_pool {
    int n_threads;
    worker *workers;          /* (n_threads - 1) */
    pool_fn fn;
    void *arg;
    atomic_uint generation;   /* bumped once per job */
    atomic_int pending;       /* workers still running the current job */
    atomic_int sleepers;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

static void *worker_main(void *p) {
    worker *w = p;
    gpt2_pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ROUNDS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->sleepers, 1);
            while (atomic_load(&pool->generation) == seen && !pool->stop) pthread_cond_wait(&pool->wake, &pool->mu);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->mu);
            spins = 0;
        }
        seen = gen;
        if (pool->stop) return NULL;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
}

gpt2_pool *pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    gpt2_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            pool_free(p);
            return NULL;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->workers[i] = (worker){.pool = p, .ith = i + 1};
            if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
                p->n_threads = i + 1; /* run with the workers we got */
                break;
            }
        }
    }
    return p;
}

void pool_free(gpt2_pool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        atomic_fetch_add(&p->generation, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->workers[i].thread, NULL);
        free(p->workers);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int pool_n_threads(const gpt2_pool *p) { return p->n_threads; }

void pool_run(gpt2_pool *p, pool_fn fn, void *arg) {
    if (p->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n_threads);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
}

void pool_share(int n, int align, int ith, int nth, int *begin, int *end) {
    int blocks = (n + align - 1) / align;
    int b0 = (int)((long)blocks * ith / nth), b1 = (int)((long)blocks * (ith + 1) / nth);
    *begin = b0 * align < n ? b0 * align : n;
    *end = b1 * align < n ? b1 * align : n;
}

int pool_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
