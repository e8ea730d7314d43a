/* test_pool.c — the engine's thread pool under stress: every chunk of every
 * job runs exactly once, with that job's function, argument and chunk count,
 * never after pool_run has returned. More threads than cores and jobs of
 * changing sizes make workers get preempted at every point of a claim. */
#include <stdatomic.h>
#include <stdint.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_chunk_once),
        cmocka_unit_test(test_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
