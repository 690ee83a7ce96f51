/* Blocks in nanosleep below a function inlined into another (the tests of
 * DWARF source lines: symbols/tests/lines.rs, tests/lines.rs). The tests
 * find each expected line by its marker comment, never by its number.
 * A frame-pointer walk from inside libc skips libc's direct caller (`nap`):
 * the inlined function is one frame further out, where a walk sees it.
 * No function takes an argument, so none is cloned under another name. */
#include <time.h>

volatile long nap_ns = 20000000;

__attribute__((noinline)) void nap(void)
{
    struct timespec t = {0, nap_ns};
    nanosleep(&t, 0); /* @nap */
    __asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void nap_inlined(void)
{
    nap(); /* @inlined-call */
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void nap_outer(void)
{
    nap_inlined(); /* @inline-site */
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void nap_caller(void)
{
    for (int i = 0; i < 10; i++)
        nap_outer(); /* @outer-call */
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    nap_caller(); /* @caller-call */
    return 0;
}
