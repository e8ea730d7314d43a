/* test_pool.c — the engine's thread pool under stress: every chunk of every
 * job runs exactly once, with that job's function, argument and chunk count,
 * never after pool_run has returned. More threads than cores and jobs of
 * changing sizes make workers get preempted at every point of a claim. */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "core/pool.h"
#include "test_util.h"

enum { MAX_CHUNKS = 16 };

typedef struct {
    int tag; /* the job's number while it runs; -1 once pool_run returned */
    int n_chunks;
    atomic_int runs[MAX_CHUNKS];
    atomic_int bad; /* calls that saw a wrong tag, chunk or count */
} job;

static atomic_int g_late; /* calls that reached a finished job */

static void count_chunk(void *arg, int chunk, int n_chunks, int ith) {
    job *j = arg;
    (void)ith;
    if (j->tag < 0) {
        atomic_fetch_add(&g_late, 1);
        return;
    }
    if (n_chunks != j->n_chunks || chunk < 0 || chunk >= j->n_chunks) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    atomic_fetch_add(&j->runs[chunk], 1);
}

/* One job on this stack frame, as the kernels do; checked and poisoned after. */
static int run_one(gpt2_pool *p, int tag, int n_chunks) {
    job j = {.tag = tag, .n_chunks = n_chunks};
    for (int c = 0; c < MAX_CHUNKS; c++) atomic_init(&j.runs[c], 0);
    atomic_init(&j.bad, 0);
    pool_run(p, count_chunk, &j, n_chunks);
    int wrong = atomic_load(&j.bad);
    for (int c = 0; c < n_chunks; c++) wrong += atomic_load(&j.runs[c]) != 1;
    j.tag = -1;
    return wrong;
}

static void test_every_chunk_once(void **state) {
    (void)state;
    const int threads[] = {2, 3, 4};
    for (int ti = 0; ti < 3; ti++) {
        gpt2_pool *p = pool_new(threads[ti]);
        assert_non_null(p);
        assert_int_equal(pool_n_threads(p), threads[ti]);
        atomic_store(&g_late, 0);
        int wrong = 0;
        for (int i = 0; i < 200000; i++) wrong += run_one(p, i, 1 + (i * 7 + i / 3) % MAX_CHUNKS);
        print_message("%d threads: %d wrong jobs, %d late calls in 200000 jobs\n", threads[ti], wrong,
                      atomic_load(&g_late));
        assert_int_equal(wrong, 0);
        assert_int_equal(atomic_load(&g_late), 0);
        pool_free(p);
    }
}

/* pool_share splits n items into aligned contiguous pieces covering all. */
static void test_share(void **state) {
    (void)state;
    for (int n = 0; n < 300; n += 7)
        for (int k = 1; k <= 9; k++) {
            int prev = 0;
            for (int c = 0; c < k; c++) {
                int b, e;
                pool_share(n, 8, c, k, &b, &e);
                assert_int_equal(b, prev);
                assert_true(e >= b);
                assert_true(b % 8 == 0 || b == n);
                prev = e;
            }
            assert_int_equal(prev, n);
        }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A job whose worker stalls in the first chunk it gets until every other
 * chunk is done: only the caller taking over the worker's share (from its far
 * end) can finish them. The caller's own share runs first, in order. */
typedef struct {
    atomic_int runs[MAX_CHUNKS];
    atomic_int done;
    atomic_int worker_stalled; /* 1 once the worker began its first chunk */
    int timed_out;
    int caller_order[MAX_CHUNKS], n_caller;
} stall_job;

static void stall_chunk(void *arg, int chunk, int n_chunks, int ith) {
    stall_job *j = arg;
    (void)n_chunks;
    atomic_fetch_add(&j->runs[chunk], 1);
    if (ith == 0) {
        j->caller_order[j->n_caller++] = chunk;
        /* give the worker time to take its first chunk */
        const double t0 = now_s();
        while (chunk == 0 && !atomic_load(&j->worker_stalled) && now_s() - t0 < 2) continue;
    }
    if (ith == 1 && atomic_exchange(&j->worker_stalled, 1) == 0) {
        const double t0 = now_s();
        while (atomic_load(&j->done) < MAX_CHUNKS - 1)
            if (now_s() - t0 > 10) {
                j->timed_out = 1;
                break;
            }
    }
    atomic_fetch_add(&j->done, 1);
}

static void test_shares_and_stealing(void **state) {
    (void)state;
    gpt2_pool *p = pool_new(2);
    assert_non_null(p);
    int stalls = 0;
    for (int rep = 0; rep < 50; rep++) {
        stall_job j = {.n_caller = 0, .timed_out = 0};
        for (int c = 0; c < MAX_CHUNKS; c++) atomic_init(&j.runs[c], 0);
        atomic_init(&j.done, 0);
        atomic_init(&j.worker_stalled, 0);
        pool_run(p, stall_chunk, &j, MAX_CHUNKS);
        assert_false(j.timed_out);
        for (int c = 0; c < MAX_CHUNKS; c++) assert_int_equal(atomic_load(&j.runs[c]), 1);
        /* the caller's share is the first half, taken in order */
        assert_true(j.n_caller >= MAX_CHUNKS / 2);
        for (int i = 0; i < MAX_CHUNKS / 2; i++) assert_int_equal(j.caller_order[i], i);
        /* what it took over came from the far end of the worker's share, downwards */
        for (int i = MAX_CHUNKS / 2; i < j.n_caller; i++) assert_int_equal(j.caller_order[i], MAX_CHUNKS - 1 - (i - MAX_CHUNKS / 2));
        stalls += atomic_load(&j.worker_stalled);
    }
    print_message("the worker stalled in %d of 50 jobs; the caller finished its share each time\n", stalls);
    assert_true(stalls > 0); /* the takeover really ran */
    pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_chunk_once),
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_shares_and_stealing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
