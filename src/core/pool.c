/* pool.c — fixed thread pool: chunks claimed from an atomic counter, workers spin then sleep. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
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
    worker *workers;           /* (n_threads - 1) */
    /* The current job; written by the caller only while no chunk is claimable. */
    pool_fn fn;
    void *arg;
    atomic_int n_chunks;
    atomic_uint_fast64_t next; /* job id << 32 | next unclaimed chunk, or CLOSED */
    atomic_int chunks_done;
    atomic_uint job;           /* id of the newest job; workers wait for it to change */
    atomic_int sleepers;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

/* The chunk field of `next` while pool_run sets up a job: nothing to claim. */
#define CLOSED 0xffffffffu

/* Claims and runs chunks of job `id` until none are left. A worker that wakes
 * late, after the job is over (or a newer one has begun), claims nothing: its
 * compare-and-swap needs `next` unchanged since it read it, and pool_run
 * closes `next` before it touches the job's fields. */
static void run_chunks(gpt2_pool *p, unsigned id, int ith) {
    uint_fast64_t v = atomic_load_explicit(&p->next, memory_order_acquire);
    for (;;) {
        if ((unsigned)(v >> 32) != id ||
            (uint32_t)v >= (uint32_t)atomic_load_explicit(&p->n_chunks, memory_order_relaxed))
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->next, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->arg, (int)(v & 0xffffffffu), atomic_load_explicit(&p->n_chunks, memory_order_relaxed), ith);
        atomic_fetch_add_explicit(&p->chunks_done, 1, memory_order_release);
        v = atomic_load_explicit(&p->next, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    gpt2_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned id;
        int spins = 0;
        while ((id = atomic_load_explicit(&p->job, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ROUNDS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->job) == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        seen = id;
        if (p->stop) return NULL;
        run_chunks(p, id, w->ith);
    }
}

gpt2_pool *pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    gpt2_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    atomic_init(&p->next, 0);
    atomic_init(&p->n_chunks, 0);
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
        atomic_fetch_add(&p->job, 1);
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

void pool_run(gpt2_pool *p, pool_fn fn, void *arg, int n_chunks) {
    if (n_chunks <= 0) return;
    if (p->n_threads == 1 || n_chunks == 1) {
        for (int c = 0; c < n_chunks; c++) fn(arg, c, n_chunks, 0);
        return;
    }
    /* Every chunk of the previous job is done, but a worker may still hold the
     * `next` it read last, about to try one more claim against the old chunk
     * count. Close `next` first, so that claim fails, then change the fields:
     * nobody can claim a chunk of a job while it is being set up. */
    const unsigned id = atomic_load_explicit(&p->job, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->next, (uint_fast64_t)id << 32 | CLOSED, memory_order_seq_cst);
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->n_chunks, n_chunks, memory_order_relaxed);
    atomic_store_explicit(&p->chunks_done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->next, (uint_fast64_t)id << 32, memory_order_release);
    atomic_store_explicit(&p->job, id, memory_order_seq_cst);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_chunks(p, id, 0);
    /* Chunks claimed by others may still run; yield the core now and then in
     * case their thread was preempted on this one. */
    for (int spins = 0; atomic_load_explicit(&p->chunks_done, memory_order_acquire) < n_chunks; spins++) {
        if (spins % 1024 == 1023) sched_yield();
        else cpu_relax();
    }
}

void pool_share(int n, int align, int chunk, int n_chunks, int *begin, int *end) {
    int blocks = (n + align - 1) / align;
    int b0 = (int)((long)blocks * chunk / n_chunks), b1 = (int)((long)blocks * (chunk + 1) / n_chunks);
    *begin = b0 * align < n ? b0 * align : n;
    *end = b1 * align < n ? b1 * align : n;
}

int pool_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
