/* Two threads ping-pong one byte over two pipes: 2 context switches per
 * round trip when both run on one CPU (taskset -c 0). Prints elapsed ms.
 *   pingpong [ROUND_TRIPS] [WORK]
 * WORK: iterations of a dependent multiply-add chain each thread runs
 * after receiving the byte and before passing it on (0: pure switching),
 * which sets the switch rate; `pingpong --calibrate` prints the ns one
 * iteration takes here, so that bench/run.sh can choose WORK for a rate. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static int a[2], b[2], n;
static long work_iters;
static volatile unsigned long sink;
static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
/* An LCG step per iteration: each depends on the previous one, so the
 * compiler can neither drop nor vectorise it. */
static void work(long iters) {
    unsigned long x = sink;
    for (long i = 0; i < iters; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}
static void *pong(void *x) {
    char c;
    for (int i = 0; i < n; i++) {
        read(a[0], &c, 1);
        work(work_iters);
        write(b[1], &c, 1);
    }
    return 0;
}
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--calibrate")) {
        /* Best of 5 runs of 10M iterations. */
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            double t0 = now_ns();
            work(10000000);
            double t = (now_ns() - t0) / 1e7;
            best = t < best ? t : best;
        }
        printf("%.4f\n", best);
        return 0;
    }
    n = argc > 1 ? atoi(argv[1]) : 200000;
    work_iters = argc > 2 ? atol(argv[2]) : 0;
    pipe(a);
    pipe(b);
    pthread_t t;
    pthread_create(&t, 0, pong, 0);
    double t0 = now_ns();
    char c = 'x';
    for (int i = 0; i < n; i++) {
        write(a[1], &c, 1);
        read(b[0], &c, 1);
        work(work_iters);
    }
    double t1 = now_ns();
    pthread_join(t, 0);
    /* BENCH_OUT: a file instead of stdout (bpftrace -c loses the child's stdout). */
    FILE *out = getenv("BENCH_OUT") ? fopen(getenv("BENCH_OUT"), "w") : stdout;
    fprintf(out ? out : stdout, "%.1f\n", (t1 - t0) / 1e6);
    return 0;
}
