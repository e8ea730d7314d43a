/* pool.c — fixed thread pool: each thread takes its own run of chunks, then steals; workers spin then sleep. */
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

/* One thread's share of the current job: chunks [lo, hi) and the job's id in
 * one word, so claims are one compare-and-swap and a claim made against an
 * older job fails. Owner and thieves rarely touch the same slot, so each lives
 * on its own cache line. */
typedef struct {
    _Alignas(64) atomic_uint_fast64_t word; /* id (24 bits) | lo (20) | hi (20) */
} slot;

#define CHUNK_BITS 20
#define CHUNK_MASK ((1u << CHUNK_BITS) - 1)
#define ID_MASK 0xffffffu

struct gpt2_pool {
    int n_threads;
    worker *workers;           /* (n_threads - 1) */
    slot *slots;               /* (n_threads) */
    /* The current job; written by the caller only while no chunk is claimable. */
    pool_fn fn;
    void *arg;
    int n_chunks;
    atomic_int chunks_done;
    atomic_uint job;           /* id of the newest job; workers wait for it to change */
    atomic_int sleepers;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

static uint_fast64_t slot_word(unsigned id, unsigned lo, unsigned hi) {
    return (uint_fast64_t)(id & ID_MASK) << (2 * CHUNK_BITS) | (uint_fast64_t)lo << CHUNK_BITS | hi;
}

/* Claims the first chunk of a slot (its owner) or the last (a thief) for job
 * id; -1 when it has none left or belongs to another job. */
static int claim(slot *s, unsigned id, int last) {
    uint_fast64_t v = atomic_load_explicit(&s->word, memory_order_acquire);
    for (;;) {
        const unsigned lo = (unsigned)(v >> CHUNK_BITS) & CHUNK_MASK, hi = (unsigned)v & CHUNK_MASK;
        if ((unsigned)(v >> (2 * CHUNK_BITS)) != (id & ID_MASK) || lo >= hi) return -1;
        const uint_fast64_t taken = last ? slot_word(id, lo, hi - 1) : slot_word(id, lo + 1, hi);
        if (atomic_compare_exchange_weak_explicit(&s->word, &v, taken, memory_order_acq_rel, memory_order_acquire))
            return (int)(last ? hi - 1 : lo);
    }
}

/* Runs the chunks of job `id` this thread can get: its own share first, in
 * order, then the others' from their far ends. Each thread so reads one run
 * of consecutive chunks (consecutive weight panels are consecutive memory, and
 * a long run streams faster than many short ones when the host's bandwidth is
 * high), while a preempted thread's remainder is still taken over. The own
 * share's count is added once, as soon as it is done (not per chunk: the
 * counter's cache line would travel between cores each time); a stolen
 * chunk's, right after it. */
static void run_chunks(gpt2_pool *p, unsigned id, int ith) {
    const int nt = p->n_threads;
    int done = 0, c;
    while ((c = claim(&p->slots[ith], id, 0)) >= 0) {
        p->fn(p->arg, c, p->n_chunks, ith);
        done++;
    }
    if (done) atomic_fetch_add_explicit(&p->chunks_done, done, memory_order_release);
    for (int k = 1; k < nt; k++)
        while ((c = claim(&p->slots[(ith + k) % nt], id, 1)) >= 0) {
            p->fn(p->arg, c, p->n_chunks, ith);
            atomic_fetch_add_explicit(&p->chunks_done, 1, memory_order_release);
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
    p->slots = aligned_alloc(_Alignof(slot), (size_t)n_threads * sizeof *p->slots);
    if (!p->slots) {
        free(p);
        return NULL;
    }
    for (int i = 0; i < n_threads; i++) atomic_init(&p->slots[i].word, 0);
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
    free(p->slots);
    free(p);
}

int pool_n_threads(const gpt2_pool *p) { return p->n_threads; }

void pool_run(gpt2_pool *p, pool_fn fn, void *arg, int n_chunks) {
    if (n_chunks <= 0) return;
    /* inline: one thread, one chunk, or more chunks than a slot can count
     * (no engine job comes near 2^20) */
    if (p->n_threads == 1 || n_chunks == 1 || (unsigned)n_chunks > CHUNK_MASK) {
        for (int c = 0; c < n_chunks; c++) fn(arg, c, n_chunks, 0);
        return;
    }
    /* Every chunk of the previous job is done, so every slot is empty and no
     * claim can succeed while the fields change; the slots, written last with
     * release, publish them to whoever claims. */
    const unsigned id = atomic_load_explicit(&p->job, memory_order_relaxed) + 1;
    const int nt = p->n_threads;
    p->fn = fn;
    p->arg = arg;
    p->n_chunks = n_chunks;
    atomic_store_explicit(&p->chunks_done, 0, memory_order_relaxed);
    for (int i = 0; i < nt; i++) {
        int lo, hi;
        pool_share(n_chunks, 1, i, nt, &lo, &hi);
        atomic_store_explicit(&p->slots[i].word, slot_word(id, (unsigned)lo, (unsigned)hi), memory_order_release);
    }
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
