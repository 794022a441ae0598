/*
 * clock.h -- the engine's one clock: monotonic wall time in milliseconds, for timeouts, compile times
 * and the cpu backend's bench. Inline: a timed interval holds no extra call.
 */
#ifndef GR_CLOCK_H
#define GR_CLOCK_H

#include <time.h>

static inline double gr_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#endif
