/*
 * bounded.h -- work run in a child process with a limit on its wall time (bounded.c), for what the
 * engine cannot stop from inside: an NVRTC compile of a user's text, which has no cancellation and can
 * take minutes and gigabytes (a few hundred calls of sin in a field, nested templates of a kernel
 * source). A child can be killed, and everything it took goes with it.
 *
 * The child is a fork of this process that runs one function, with a cap on the memory it may add,
 * and hands its result back as bytes through a pipe, then ends with _exit: no atexit handler, destructor or stdio buffer of the parent
 * runs twice. It must not touch the CUDA runtime, which a forked child cannot use. Only the forking
 * thread lives on in the child: a lock another thread held at that moment (the dynamic loader's, while
 * it opened a library) stays held there, and work that waits for it waits until the limit ends it.
 */
#ifndef GR_BOUNDED_H
#define GR_BOUNDED_H

#include <stddef.h>

typedef enum gr_bounded_end {
    GR_BOUNDED_DONE,            /* the child handed back its bytes */
    GR_BOUNDED_TIMEOUT,         /* it ran past the limit and was killed */
    GR_BOUNDED_DIED,            /* it ended before handing back all its bytes: a signal, or an exit */
    GR_BOUNDED_TOO_LARGE,       /* it handed back more than the most asked for (killed) */
    GR_BOUNDED_NO_START         /* no pipe or no process (errno in err), or no memory for the result */
} gr_bounded_end;

typedef struct gr_bounded_result {
    gr_bounded_end end;
    unsigned char *bytes;       /* GR_BOUNDED_DONE: the child's result, malloc'd (the caller frees it) */
    size_t len;
    int signal;                 /* GR_BOUNDED_DIED: the signal that ended it, else 0 */
    int status;                 /* GR_BOUNDED_DIED without a signal: its exit status, -1 when unknown */
    int err;                    /* GR_BOUNDED_NO_START: the errno */
} gr_bounded_result;

/* Runs work(arg, &bytes, &len) in a child process. In the child, whose address space may grow by at
 * most `memory` bytes over this process's (Linux; elsewhere no limit), work returns its result
 * (malloc'd; NULL with len 0 for none) and the child hands it back. The parent waits at most `seconds`
 * (killing the child then) and takes at most `most` bytes. */
void gr_bounded_run(void (*work)(void *arg, unsigned char **bytes, size_t *len), void *arg, unsigned seconds,
                    size_t memory, size_t most, gr_bounded_result *out);

#endif
