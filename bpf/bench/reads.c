/* N one-byte reads of /dev/zero (syscall-heavy, never blocks), or of a
 * regular file with pread (argv[2] = path). Prints elapsed ms. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    int fd = open(argc > 2 ? argv[2] : "/dev/zero", O_RDONLY);
    char c;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++)
        pread(fd, &c, 1, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* BENCH_OUT: a file instead of stdout (bpftrace -c loses the child's stdout). */
    FILE *out = getenv("BENCH_OUT") ? fopen(getenv("BENCH_OUT"), "w") : stdout;
    fprintf(out ? out : stdout, "%.1f\n", (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    return 0;
}
