/* Switch storm: P pairs of threads ping-ponging over pipes for S seconds.
 * Prints total round trips. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static volatile int stop;
struct pair { int a[2], b[2]; long trips; };
static void *pong(void *x) {
    struct pair *p = x; char c;
    while (read(p->a[0], &c, 1) == 1 && c) write(p->b[1], &c, 1);
    return 0;
}
static void *ping(void *x) {
    struct pair *p = x; char c = 'x';
    while (!stop) { write(p->a[1], &c, 1); read(p->b[0], &c, 1); p->trips++; }
    c = 0; write(p->a[1], &c, 1);
    return 0;
}
int main(int argc, char **argv) {
    int np = atoi(argv[1]); double secs = atof(argv[2]);
    struct pair *ps = calloc(np, sizeof *ps);
    pthread_t *t = calloc(2 * np, sizeof *t);
    for (int i = 0; i < np; i++) {
        pipe(ps[i].a); pipe(ps[i].b);
        pthread_create(&t[2 * i], 0, pong, &ps[i]);
        pthread_create(&t[2 * i + 1], 0, ping, &ps[i]);
    }
    struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&ts, 0);
    stop = 1;
    long total = 0;
    for (int i = 0; i < 2 * np; i++) pthread_join(t[i], 0);
    for (int i = 0; i < np; i++) total += ps[i].trips;
    printf("%ld\n", total);
    return 0;
}
