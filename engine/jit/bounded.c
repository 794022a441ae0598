/*
 * bounded.c -- work in a child process with a wall-time limit (bounded.h).
 *
 * The child writes an 8-byte length, then its bytes, and exits. The parent reads until the pipe closes
 * or the deadline passes (poll), then reaps the child. Whether the work finished is read from the bytes
 * (the length and the count received agree), not from the exit status: a host application's SIGCHLD
 * handler may reap the child before waitpid sees it.
 */
#include "jit/bounded.h"
#include "base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_all(int fd, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return -1;
        p += put;
        n -= (size_t)put;
    }
    return 0;
}

/* The child's address space may grow by `most` bytes over the parent's, which it starts as a copy of:
 * work that wants more fails as out of memory instead of taking the machine's. */
static void limit_growth(size_t most) {
#ifdef __linux__
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    int got = f && fscanf(f, "%lu", &pages) == 1;
    if (f) fclose(f);
    if (!got) return;
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0) return;
    rlim_t want = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)most;
    if (r.rlim_max == RLIM_INFINITY || want < r.rlim_max) r.rlim_cur = want;
    setrlimit(RLIMIT_AS, &r);
#else
    (void)most;
#endif
}

/* In the child: the work, its result down the pipe, and out. */
static void child(int fd, void (*work)(void *, unsigned char **, size_t *), void *arg, size_t memory) {
    signal(SIGPIPE, SIG_DFL);       /* a parent that gave up: end quietly */
    limit_growth(memory);
    unsigned char *bytes = NULL;
    size_t len = 0;
    work(arg, &bytes, &len);
    unsigned char head[8];
    for (int b = 0; b < 8; b++) head[b] = (unsigned char)((uint64_t)len >> (8 * b));
    int ok = write_all(fd, head, 8) == 0 && (len == 0 || write_all(fd, bytes, len) == 0);
    _exit(ok ? 0 : 1);
}

/* Reads what the child writes until the pipe closes (0), the deadline passes (1), more than `most`
 * bytes come (2) or memory runs out (3). */
static int read_until(int fd, double deadline, size_t most, unsigned char **buf, size_t *len) {
    size_t cap = 0;
    for (;;) {
        double left = deadline - gr_now_ms();
        if (left <= 0) return 1;
        struct pollfd p = {fd, POLLIN, 0};
        int ready = poll(&p, 1, left > 1e9 ? 1000000000 : (int)left + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) continue;       /* the deadline is checked above */
        if (ready < 0) return 0;        /* cannot wait: what came is all there is */
        if (*len == cap) {
            if (cap >= most + 8) return 2;
            size_t grown = cap ? 2 * cap : 1 << 16;
            if (grown > most + 8) grown = most + 8;
            unsigned char *bigger = realloc(*buf, grown);
            if (!bigger) return 3;
            *buf = bigger;
            cap = grown;
        }
        ssize_t got = read(fd, *buf + *len, cap - *len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return 0;
        *len += (size_t)got;
    }
}

void gr_bounded_run(void (*work)(void *arg, unsigned char **bytes, size_t *len), void *arg, unsigned seconds,
                    size_t memory, size_t most, gr_bounded_result *out) {
    memset(out, 0, sizeof *out);
    out->status = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        out->end = GR_BOUNDED_NO_START;
        out->err = errno;
        return;
    }
    double deadline = gr_now_ms() + 1e3 * (double)seconds;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], work, arg, memory);
    }
    close(fds[1]);
    if (pid < 0) {
        out->end = GR_BOUNDED_NO_START;
        out->err = errno;
        close(fds[0]);
        return;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    int why = read_until(fds[0], deadline, most, &buf, &len);
    close(fds[0]);
    if (why != 0) kill(pid, SIGKILL);
    int status;
    pid_t reaped;
    while ((reaped = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    uint64_t said = 0;
    for (int b = 7; len >= 8 && b >= 0; b--) said = said << 8 | buf[b];
    if (why == 0 && len >= 8 && said == len - 8) {
        memmove(buf, buf + 8, len - 8);
        out->end = GR_BOUNDED_DONE;
        out->bytes = buf;
        out->len = len - 8;
        return;
    }
    free(buf);
    out->end = why == 1 ? GR_BOUNDED_TIMEOUT : why == 2 ? GR_BOUNDED_TOO_LARGE : why == 3 ? GR_BOUNDED_NO_START
                                                                                         : GR_BOUNDED_DIED;
    if (why == 3) out->err = ENOMEM;
    if (reaped == pid && WIFSIGNALED(status)) out->signal = WTERMSIG(status);
    else if (reaped == pid && WIFEXITED(status)) out->status = WEXITSTATUS(status);
}
