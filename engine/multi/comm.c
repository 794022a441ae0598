/*
 * comm.c -- communicators across processes (and nodes) through NCCL, opened with dlopen on first use.
 *
 * NCCL's types are declared here, not taken from nccl.h (which includes the CUDA runtime's headers):
 * a communicator is an opaque pointer, a result and the enums ints with NCCL's documented values, and
 * the configuration is the layout NCCL 2.14 introduced (NCCL reads a configuration by its `size` and
 * `version`, so later libraries accept it). Where the library is looked for, in order:
 *   1. GPUREDUCE_NCCL, a path -- when set, the only place tried;
 *   2. the toolkit the module was built against (GR_NCCL_DEFAULT, set by the Makefile: lib64, then lib);
 *   3. libnccl.so.2 through the loader's search path (LD_LIBRARY_PATH, the system's libraries).
 *
 * Every communicator is non-blocking (config.blocking = 0): its creation and each collective return
 * at once and are polled, with a deadline, so that a rank that never joins, or stops taking part,
 * ends in a clear error and ncclCommAbort instead of a hang.
 *
 * c:reduce reduces on each rank with the engine's own kernels, then combines the results: one value
 * (kept on the device between the two where the local run ends there, so that the call waits once) through
 * the ranks' mailboxes where they took them (comm_oneshot.h) or by ncclAllReduce, or the result buffer of a
 * reduction along axes, all-reduced in place.
 *
 * A borrowed communicator (gr_comm_borrow) is the host application's: its collectives run and are
 * waited for the same way, but it is never finalized, destroyed or aborted here -- a failure only
 * retires the wrapper, and its owner decides what happens to the communicator. Joining from a
 * launcher's environment is comm_env.c's (it calls gr_comm_create).
 */
#include "gr.h"
#include "base/clock.h"
#include "base/device.h"
#include "base/dtype.h"
#include "core/context.h"
#include "base/error.h"
#include "base/library.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/exec.h"
#include "core/plan.h"
#include "core/pool.h"
#include "multi/comm_axes.h"
#include "multi/comm_oneshot.h"
#include "multi/comm_parts.h"
#include "ops/convert_element.h"
#include "ops/ops.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- NCCL, as declared by nccl.h ------------------------------------------------------------------ */

typedef struct { char internal[128]; } nccl_id;      /* ncclUniqueId */
enum { NCCL_OK = 0, NCCL_IN_PROGRESS = 7 };           /* ncclSuccess, ncclInProgress */
/* ncclDataType_t: a column of GR_DTYPE_LIST (gr_dtype_nccl) */
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3, NCCL_AVG = 4 };

typedef struct {            /* ncclConfig_t of NCCL 2.14 */
    size_t size;
    unsigned magic, version;
    int blocking, cga_cluster_size, min_ctas, max_ctas;
    const char *net_name;
} nccl_config;
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_VERSION 21400u                    /* NCCL_VERSION(2, 14, 0) */
#define NCCL_UNDEF_INT (-2147483647 - 1)              /* NCCL_CONFIG_UNDEF_INT: NCCL's default */

#define GR_NCCL_FUNCS(X)                                                                              \
    X(int, ncclGetVersion, (int *version))                                                            \
    X(const char *, ncclGetErrorString, (int result))                                                 \
    X(int, ncclGetUniqueId, (nccl_id *id))                                                            \
    X(int, ncclCommInitRankConfig, (void **comm, int nranks, nccl_id id, int rank, nccl_config *config)) \
    X(int, ncclCommGetAsyncError, (void *comm, int *state))                                           \
    X(int, ncclCommFinalize, (void *comm))                                                            \
    X(int, ncclCommDestroy, (void *comm))                                                             \
    X(int, ncclCommAbort, (void *comm))                                                               \
    X(int, ncclCommUserRank, (void *comm, int *rank))                                                 \
    X(int, ncclCommCount, (void *comm, int *count))                                                   \
    X(int, ncclCommCuDevice, (void *comm, int *device))                                               \
    X(int, ncclAllReduce, (const void *send, void *recv, size_t count, int dtype, int op, void *comm,  \
                           void *stream))                                                              \
    X(int, ncclAllGather, (const void *send, void *recv, size_t count, int dtype, void *comm, void *stream))

static struct {
#define GR_NCCL_FIELD_(ret, fn, params) ret(*fn) params;
    GR_NCCL_FUNCS(GR_NCCL_FIELD_)
#undef GR_NCCL_FIELD_
    int loaded, version;
    char why[1024];         /* every place tried and why it failed, when none served */
} nc;

static pthread_once_t nc_once = PTHREAD_ONCE_INIT;

static void why_more(const char *what) {
    size_t used = strlen(nc.why);
    snprintf(nc.why + used, sizeof nc.why - used, "%s%s", strchr(nc.why, ':') ? "; " : ": ", what);
}

static int nc_open(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        why_more(dlerror());
        return 0;
    }
#define GR_NCCL_TAKE_(ret, fn, params)                         \
    if (!(nc.fn = (ret(*) params)dlsym(lib, #fn))) {           \
        char what[256];                                        \
        snprintf(what, sizeof what, "%s has no %s", path, #fn); \
        why_more(what);                                        \
        dlclose(lib);                                          \
        return 0;                                              \
    }
    GR_NCCL_FUNCS(GR_NCCL_TAKE_)
#undef GR_NCCL_TAKE_
    nc.ncclGetVersion(&nc.version);
    return 1;
}

static void nc_load(void) {
    static const char *const candidates[] = {
#ifdef GR_NCCL_DEFAULT
        GR_NCCL_DEFAULT,    /* the toolkit the module was built against */
#endif
        "libnccl.so.2", "libnccl.so",
    };
    nc.loaded = gr_library_search("NCCL", "GPUREDUCE_NCCL", "install it, or set GPUREDUCE_NCCL to the path of "
                                  "libnccl.so.2", candidates, sizeof candidates / sizeof candidates[0], nc_open,
                                  nc.why, sizeof nc.why);
}

/* NCCL, or GR_ENODEV saying why not (also on the cpu backend: NCCL moves device memory). */
static gr_status need_nccl(gr_context *ctx) {
    if (ctx->base.backend != GR_BACKEND_CUDA)
        return gr_fail(ctx, GR_ENODEV, "communicators need NCCL and a CUDA device (backend is cpu)");
    pthread_once(&nc_once, nc_load);
    return nc.loaded ? GR_OK : gr_fail(ctx, GR_ENODEV, "%s", nc.why);
}

int gr_nccl_version(void) {
    pthread_once(&nc_once, nc_load);
    return nc.loaded ? nc.version : 0;
}

/* ---- the communicator ----------------------------------------------------------------------------- */

struct gr_comm {
    void *nccl;             /* ncclComm_t; NULL once destroyed or aborted (borrowed: given up) */
    int rank, size;
    int borrowed;           /* the host application's (gr_comm_borrow): never finalized, destroyed, aborted */
    gr_context *on;         /* the context of its device */
    double timeout;         /* seconds any one wait may take */
    void *dev, *host;       /* 16 bytes each, device and pinned: c:reduce's value, the barrier's word */
    int oneshot_asked;      /* whether the ranks have decided how one value is combined (oneshot_ready) */
    gr_oneshot *oneshot;    /* where they took the mailboxes (comm_oneshot.h), else NULL: ncclAllReduce */
};

/* Aborts the communicator (it cannot be used again) and fails with "rank r of k: <what>". A borrowed one
 * is not aborted: the wrapper is retired and its owner told. */
static gr_status give_up(gr_context *ctx, gr_comm *c, gr_status st, const char *what) {
    if (c->nccl && !c->borrowed) nc.ncclCommAbort(c->nccl);
    c->nccl = NULL;
    return gr_fail(ctx, st, "rank %d of %d: %s%s", c->rank, c->size, what, c->borrowed ? " (the borrowed "
                   "communicator was not aborted: its owner decides, with ncclCommAbort)" : "");
}

static gr_status nccl_failed(gr_context *ctx, gr_comm *c, const char *what, int rc) {
    char msg[384];
    snprintf(msg, sizeof msg, "%s: %s (NCCL error %d)", what, nc.ncclGetErrorString(rc), rc);
    return give_up(ctx, c, GR_ECUDA, msg);
}

/* One turn of a wait that began at t0: past the timeout, aborts with "<late> within T s" and returns 1;
 * else spins (the first millisecond: collectives mostly end within it) or sleeps a little. */
static int overdue(gr_context *ctx, gr_comm *c, double t0, const char *late, gr_status *st) {
    double t = (gr_now_ms() - t0) / 1e3;
    if (t > c->timeout) {
        char msg[320];
        snprintf(msg, sizeof msg, "%s within %g s", late, c->timeout);
        *st = give_up(ctx, c, GR_ETIMEOUT, msg);
        return 1;
    }
    if (t > 1e-3) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Waits until NCCL's work on the communicator is issued (rc from the call that started it). */
static gr_status settle(gr_context *ctx, gr_comm *c, int rc, const char *what, const char *late) {
    double t0 = gr_now_ms();
    gr_status st;
    while (rc == NCCL_IN_PROGRESS) {
        if (overdue(ctx, c, t0, late, &st)) return st;
        if (nc.ncclCommGetAsyncError(c->nccl, &rc) != NCCL_OK) break;
    }
    return rc == NCCL_OK ? GR_OK : nccl_failed(ctx, c, what, rc);
}

/* Waits for the collectives queued on the device's stream, watching NCCL's own errors. */
static gr_status finish(gr_context *ctx, gr_comm *c, const char *what) {
    double t0 = gr_now_ms();
    char late[128];
    snprintf(late, sizeof late, "%s did not complete (does every rank take part?)", what);
    for (gr_status st;;) {
        int q = gr_dev_stream_query(c->on->stream);
        if (q == 0) return GR_OK;
        if (q > 1) return gr_fail_dev(ctx, q, what);
        int state = NCCL_OK;
        nc.ncclCommGetAsyncError(c->nccl, &state);
        if (state != NCCL_OK && state != NCCL_IN_PROGRESS) return nccl_failed(ctx, c, what, state);
        if (overdue(ctx, c, t0, late, &st)) return st;
    }
}

/* ---- the unique id: hex text, passed as a string or through a file -------------------------------- */

static void to_hex(const nccl_id *id, char hex[GR_COMM_ID_CHARS + 1]) {
    for (int i = 0; i < 128; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id->internal[i]);
}

static int from_hex(const char *hex, nccl_id *id) {
    if (strlen(hex) != GR_COMM_ID_CHARS) return 0;
    for (int i = 0; i < 128; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
        id->internal[i] = (char)v;
    }
    return strspn(hex, "0123456789abcdefABCDEF") == GR_COMM_ID_CHARS;
}

gr_status gr_comm_id(gr_context *ctx, char hex[GR_COMM_ID_CHARS + 1]) {
    gr_status st = need_nccl(ctx);
    if (st != GR_OK) return st;
    nccl_id id;
    int rc = nc.ncclGetUniqueId(&id);
    if (rc != NCCL_OK) return gr_fail(ctx, GR_ECUDA, "ncclGetUniqueId: %s", nc.ncclGetErrorString(rc));
    to_hex(&id, hex);
    return GR_OK;
}

/* Rank 0 writes the id to a temporary file beside the path and renames it there (readers never see a
 * part of it); the others wait for the file until the deadline. */
static gr_status exchange_id(gr_context *ctx, const char *path, int rank, double timeout, nccl_id *id) {
    char hex[GR_COMM_ID_CHARS + 2];
    if (rank == 0) {
        gr_status st = gr_comm_id(ctx, hex);
        if (st != GR_OK) return st;
        from_hex(hex, id);
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
        FILE *f = fopen(tmp, "w");
        int ok = f && fputs(hex, f) >= 0;
        if (f && fclose(f) != 0) ok = 0;
        if (!ok || rename(tmp, path) != 0) {
            int e = errno;
            remove(tmp);
            return gr_fail_arg(ctx, GR_EINVAL, "id", "cannot write the id file '%s': %s", path, strerror(e));
        }
        return GR_OK;
    }
    double t0 = gr_now_ms();
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            size_t got = fread(hex, 1, GR_COMM_ID_CHARS, f);
            fclose(f);
            hex[got] = '\0';
            if (got == GR_COMM_ID_CHARS && from_hex(hex, id)) return GR_OK;
            return gr_fail_arg(ctx, GR_EINVAL, "id", "'%s' does not hold a communicator id (%d hex digits from "
                               "rank 0 or gr.comm_id())", path, GR_COMM_ID_CHARS);
        }
        if ((gr_now_ms() - t0) / 1e3 > timeout)
            return gr_fail(ctx, GR_ETIMEOUT, "rank %d: rank 0 did not write the id file '%s' within %g s", rank, path,
                           timeout);
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

gr_status gr_comm_create(gr_context *ctx, const gr_comm_spec *spec, gr_comm **out) {
    *out = NULL;
    if (spec->size < 1)
        return gr_fail_arg(ctx, GR_EINVAL, "size", "must be at least 1 (got %d)", spec->size);
    if (spec->rank < 0 || spec->rank >= spec->size)
        return gr_fail_arg(ctx, GR_EINVAL, "rank", "must be 0 to %d for a size of %d (got %d)", spec->size - 1,
                           spec->size, spec->rank);
    if (!spec->id || !*spec->id)
        return gr_fail_arg(ctx, GR_EINVAL, "id", "expected a file path or the string of gr.comm_id()");
    if (!(spec->timeout > 0))
        return gr_fail_arg(ctx, GR_EINVAL, "timeout", "must be a positive number of seconds (got %g)", spec->timeout);
    gr_status st = need_nccl(ctx);
    if (st != GR_OK) return st;
    gr_context *on;
    if ((st = gr_context_on(ctx, spec->device ? spec->device - 1 : gr_ctx_root(ctx)->device, &on)) != GR_OK) return st;

    nccl_id id;
    int is_file = !from_hex(spec->id, &id);
    if (is_file && (st = exchange_id(on, spec->id, spec->rank, spec->timeout, &id)) != GR_OK) return st;
    gr_comm *c = calloc(1, sizeof *c);
    if (!c) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    *c = (gr_comm){NULL, spec->rank, spec->size, 0, on, spec->timeout, NULL, NULL, 0, NULL};
    st = gr_mem_alloc(on, GR_MEM_DEVICE, 16, &c->dev);
    if (st == GR_OK) st = gr_mem_alloc(on, GR_MEM_PINNED, 16, &c->host);
    if (st == GR_OK) {
        nccl_config cfg = {sizeof cfg, NCCL_CONFIG_MAGIC, NCCL_CONFIG_VERSION, 0, NCCL_UNDEF_INT, NCCL_UNDEF_INT,
                           NCCL_UNDEF_INT, NULL};
        int rc = nc.ncclCommInitRankConfig(&c->nccl, spec->size, id, spec->rank, &cfg);
        if (rc != NCCL_OK && rc != NCCL_IN_PROGRESS && !c->nccl) {
            st = gr_fail(on, GR_ECUDA, "rank %d of %d: ncclCommInitRankConfig: %s", spec->rank, spec->size,
                         nc.ncclGetErrorString(rc));
        } else {
            char late[96];
            snprintf(late, sizeof late, "%s joined", spec->size == 2 ? "the other rank never" : "not every rank");
            st = settle(on, c, rc, "ncclCommInitRankConfig", late);
        }
    }
    if (st == GR_OK && is_file && spec->rank == 0) remove(spec->id);    /* every rank has read it */
    if (st != GR_OK) {
        gr_comm_destroy(ctx, c);
        return st;
    }
    *out = c;
    return GR_OK;
}

void gr_comm_destroy(gr_context *ctx, gr_comm *c) {
    (void)ctx;
    if (!c) return;
    gr_context *on = gr_ctx_enter(c->on);
    if (c->borrowed) {
        /* Ours is only the wrapper. After a collective that timed out, work may still wait on the stream
         * until the owner aborts the communicator: the 32 bytes it may touch are left, not waited for. */
        if (c->nccl) {
            gr_dev_stream_sync(on->stream);
            gr_oneshot_drop(on, c->oneshot);
            gr_mem_free(on, GR_MEM_DEVICE, c->dev, 16);
            gr_mem_free(on, GR_MEM_PINNED, c->host, 16);
        }
        free(c);
        return;
    }
    if (c->nccl) {
        gr_dev_stream_sync(on->stream);
        int rc = nc.ncclCommFinalize(c->nccl);
        if (settle(on, c, rc, "ncclCommFinalize", "finalizing did not end") == GR_OK) nc.ncclCommDestroy(c->nccl);
        c->nccl = NULL;
    }
    gr_oneshot_drop(on, c->oneshot);
    gr_mem_free(on, GR_MEM_DEVICE, c->dev, 16);
    gr_mem_free(on, GR_MEM_PINNED, c->host, 16);
    free(c);
}

/* Waits (up to timeout) for a non-blocking communicator that is still joining; then reads what NCCL
 * knows of it and wraps it as one of ours, marked borrowed. */
gr_status gr_comm_borrow(gr_context *ctx, void *handle, double timeout, gr_comm **out) {
    *out = NULL;
    if (!handle) return gr_fail_arg(ctx, GR_EINVAL, "handle", "expected an ncclComm_t, got NULL");
    if (!(timeout > 0))
        return gr_fail_arg(ctx, GR_EINVAL, "timeout", "must be a positive number of seconds (got %g)", timeout);
    gr_status st = need_nccl(ctx);
    if (st != GR_OK) return st;
    double t0 = gr_now_ms();
    int state = NCCL_IN_PROGRESS, rc;
    while ((rc = nc.ncclCommGetAsyncError(handle, &state)) == NCCL_OK && state == NCCL_IN_PROGRESS) {
        if ((gr_now_ms() - t0) / 1e3 > timeout)
            return gr_fail(ctx, GR_ETIMEOUT, "the borrowed communicator did not finish joining within %g s", timeout);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (rc == NCCL_OK) rc = state;
    int rank = -1, size = 0, cu = -1;
    const char *what = "ncclCommGetAsyncError";
    if (rc == NCCL_OK && (rc = nc.ncclCommUserRank(handle, &rank)) != NCCL_OK) what = "ncclCommUserRank";
    if (rc == NCCL_OK && (rc = nc.ncclCommCount(handle, &size)) != NCCL_OK) what = "ncclCommCount";
    if (rc == NCCL_OK && (rc = nc.ncclCommCuDevice(handle, &cu)) != NCCL_OK) what = "ncclCommCuDevice";
    if (rc != NCCL_OK)
        return gr_fail_arg(ctx, GR_EINVAL, "handle", "the borrowed communicator is not usable: %s: %s (NCCL error %d)",
                           what, nc.ncclGetErrorString(rc), rc);
    int count = gr_device_count(ctx);
    if (cu < 0 || cu >= count)
        return gr_fail_arg(ctx, GR_EINVAL, "handle", "the borrowed communicator drives CUDA device %d, and %d "
                           "device%s visible here", cu, count, count == 1 ? " is" : "s are");
    gr_context *on;
    if ((st = gr_context_on(ctx, cu, &on)) != GR_OK) return st;
    gr_comm *c = calloc(1, sizeof *c);
    if (!c) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    *c = (gr_comm){handle, rank, size, 1, on, timeout, NULL, NULL, 0, NULL};
    st = gr_mem_alloc(on, GR_MEM_DEVICE, 16, &c->dev);
    if (st == GR_OK) st = gr_mem_alloc(on, GR_MEM_PINNED, 16, &c->host);
    if (st != GR_OK) {
        gr_comm_destroy(ctx, c);
        return st;
    }
    *out = c;
    return GR_OK;
}

void *gr_comm_handle(const gr_comm *c) { return c->nccl; }
int gr_comm_rank(const gr_comm *c) { return c->rank; }
int gr_comm_size(const gr_comm *c) { return c->size; }
int gr_comm_device(const gr_comm *c) { return c->on->device + 1; }
int gr_comm_oneshot(const gr_comm *c) { return c->oneshot ? 1 : c->oneshot_asked ? 0 : -1; }

static gr_status usable(gr_context *ctx, gr_comm *c) {
    if (c->nccl) return GR_OK;
    if (c->borrowed)
        return gr_fail(ctx, GR_EINVAL, "rank %d of %d: the wrapper of the borrowed communicator was retired after an "
                       "earlier failure (the communicator is its owner's); borrow it again", c->rank, c->size);
    return gr_fail(ctx, GR_EINVAL, "rank %d of %d: the communicator was aborted after an earlier failure; make a new "
                   "one", c->rank, c->size);
}

/* NCCL's type for the elements of b, or GR_EINVAL naming b where NCCL has none. */
static gr_status nccl_type(gr_context *ctx, const gr_buffer *b, int *code) {
    *code = gr_dtype_nccl(b->dtype);
    return *code >= 0 ? GR_OK : gr_fail_arg(ctx, GR_EINVAL, "b", "NCCL has no type for %s elements",
                                            gr_dtype_name(b->dtype));
}

/* GR_OK when b is a device buffer of the communicator's device; else GR_EINVAL naming `arg`. */
static gr_status on_comm_device(gr_context *ctx, const gr_comm *c, const gr_buffer *b, const char *arg) {
    if (gr_buffer_where(b) == GR_DEVICE && gr_buffer_device(b) == gr_comm_device(c)) return GR_OK;
    return gr_fail_arg(ctx, GR_EINVAL, arg, "the buffer is %s %d, the communicator's device is %d (it reduces device "
                       "buffers of its own device)", gr_buffer_where(b) == GR_HOST ? "host memory of device" : "on device",
                       gr_buffer_device(b), gr_comm_device(c));
}

static const int nccl_ops[GR_COMM_OP_COUNT] = {NCCL_SUM, NCCL_PROD, NCCL_MIN, NCCL_MAX, NCCL_AVG};
const char *const gr_comm_op_names[GR_COMM_OP_COUNT + 1] = {"sum", "prod", "min", "max", "avg", NULL};

/* One all-reduce queued on the communicator's stream, issued (not yet finished). */
static gr_status queue(gr_context *ctx, gr_comm *c, void *p, size_t n, int dtype, gr_comm_op op) {
    int rc = nc.ncclAllReduce(p, p, n, dtype, nccl_ops[op], c->nccl, c->on->stream);
    return settle(ctx, c, rc, "ncclAllReduce", "ncclAllReduce was not issued");
}

gr_status gr_comm_allreduce(gr_context *ctx, gr_comm *c, gr_buffer *b, gr_comm_op op) {
    gr_status st = usable(ctx, c);
    if (st == GR_OK) st = gr_buffer_check_compact(ctx, b, "b");
    if (st != GR_OK) return st;
    if ((unsigned)op >= GR_COMM_OP_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: sum, prod, min, max, avg)");
    if ((st = on_comm_device(ctx, c, b, "b")) != GR_OK) return st;
    int type;
    if ((st = nccl_type(ctx, b, &type)) != GR_OK) return st;
    gr_context *on = gr_ctx_enter(c->on);
    if ((st = gr_storage_quiesce(on, b->st)) != GR_OK) return st;
    if (b->n == 0) return GR_OK;
    if ((st = queue(on, c, gr_buffer_data(b), b->n, type, op)) != GR_OK) return st;
    return finish(on, c, "allreduce");
}

/* ---- c:reduce: a reduction on each rank, its results combined across the ranks ---------------------- */

/* How each op's results meet across ranks; and/or as the min/max of their 0/1 flags. */
static const struct { gr_op op; gr_comm_op across; } across_ops[] = {
    {GR_SUM, GR_COMM_SUM}, {GR_PROD, GR_COMM_PROD}, {GR_MIN, GR_COMM_MIN}, {GR_MAX, GR_COMM_MAX},
    {GR_AND, GR_COMM_MIN}, {GR_OR, GR_COMM_MAX}, {GR_COUNT, GR_COMM_SUM}, {GR_SUMSQ, GR_COMM_SUM},
    {GR_NANSUM, GR_COMM_SUM}, {GR_NANMIN, GR_COMM_MIN}, {GR_NANMAX, GR_COMM_MAX}, {GR_ABSMAX, GR_COMM_MAX},
    {GR_ASUM, GR_COMM_SUM},
};

static gr_status across_of(gr_context *ctx, const gr_options *o, gr_comm_op *out) {
    for (size_t i = 0; i < sizeof across_ops / sizeof across_ops[0]; i++)
        if (across_ops[i].op == o->op) {
            *out = across_ops[i].across;
            return GR_OK;
        }
    return gr_fail_arg(ctx, GR_EINVAL, "op", "'%s' across ranks is not built (accepted: sum, prod, min, max, and, or, "
                       "count, sumsq, nansum, nanmin, nanmax, absmax, asum)", gr_op_name(o->op));
}

/* The dtype a one-value result is combined in, by its kind: float64, int64, uint64, uint8 (and/or). */
static gr_dtype wire_of(int kind) {
    return kind == GR_SCALAR_FLOAT ? GR_FLOAT64 : kind == GR_SCALAR_UINT ? GR_UINT64
           : kind == GR_SCALAR_INT ? GR_INT64 : GR_UINT8;
}

/* Whether an element of `held` is already one of `wire` (the same bytes: integers of one width are
 * combined by NCCL the same way whatever their sign for sums and products, and a bool is a uint8). */
static int same_bytes(gr_dtype held, gr_dtype wire) {
    if (held == wire) return 1;
    return gr_dtype_size(held) == gr_dtype_size(wire) && !gr_dtype_is_float(held) && !gr_dtype_is_float(wire);
}

/* The local value read back from the combined one (c->host), in the local result's kind. */
static void combined_value(const gr_comm *c, gr_scalar *v) {
    if (v->kind == GR_SCALAR_BOOL) v->v.b = *(const unsigned char *)c->host != 0;
    else memcpy(&v->v, c->host, sizeof v->v);
}

static gr_status gather_bytes(gr_context *on, gr_comm *c, const void *mine, size_t bytes, void *all, const char *what);

/* Decides with every rank, at the first one-value combination, whether the values go through the ranks'
 * mailboxes (comm_oneshot.h) or ncclAllReduce: two gathers, each waited for; every rank decides the same. */
static gr_status oneshot_ready(gr_context *on, gr_comm *c) {
    if (c->oneshot_asked) return GR_OK;
    gr_oneshot *o = NULL;
    unsigned char mine[GR_ONESHOT_RECORD_BYTES], ok = 0, *oks = malloc((size_t)c->size);
    char *recs = malloc((size_t)c->size * GR_ONESHOT_RECORD_BYTES);
    gr_status st = recs && oks ? GR_OK : gr_fail(on, GR_ENOMEM, "out of host memory");
    gr_oneshot_offer(on, c->rank, c->size, &o, mine);
    if (st == GR_OK) st = gather_bytes(on, c, mine, sizeof mine, recs, "mailbox record");
    if (st == GR_OK) ok = (unsigned char)gr_oneshot_join(on, o, recs, c->size);
    if (st == GR_OK) st = gather_bytes(on, c, &ok, 1, oks, "mailbox answer");
    for (int q = 0; q < c->size && st == GR_OK; q++) ok &= oks[q];
    if (st == GR_OK) c->oneshot_asked = 1;
    if (st == GR_OK && ok) c->oneshot = o;
    else gr_oneshot_drop(on, o);
    free(recs);
    free(oks);
    return st;
}

/* c->dev's 8-byte word of dtype wire combined across the ranks by op, queued on the communicator's stream:
 * through the mailboxes (oneshot_ready first), or all-reduced in place and copied to c->host. Through the
 * mailboxes the value may be at `value` as dtype held, widened by their kernel. */
static gr_status combine_queue(gr_context *on, gr_comm *c, const void *value, gr_dtype held, gr_dtype wire,
                               gr_comm_op across) {
    if (c->oneshot) return gr_oneshot_queue(on, c->oneshot, value, held, wire, across, c->timeout);
    gr_status st = queue(on, c, c->dev, 1, gr_dtype_nccl(wire), across);
    if (st != GR_OK) return st;
    int rc = gr_copy(on, c->host, c->dev, 8, on->stream);
    return rc ? gr_fail_dev(on, rc, "reduce: copy from the device") : GR_OK;
}

/* After the stream is done: the mailboxes' word in c->host, or a failure naming the late ranks' absence
 * (the communicator is aborted, as after an all-reduce that did not complete). */
static gr_status combined_arrived(gr_context *on, gr_comm *c) {
    if (!c->oneshot || gr_oneshot_result(c->oneshot, c->host)) return GR_OK;
    char msg[160];
    snprintf(msg, sizeof msg, "reduce: not every rank's value came (does every rank take part?) within %g s",
             c->timeout);
    return give_up(on, c, GR_ETIMEOUT, msg);
}

/* The host path: gr_reduce (waited for), the value to the device, the all-reduce, the value back. */
static gr_status reduce_through_host(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o,
                                     gr_comm_op across, gr_result *out) {
    gr_result local;
    gr_status st = gr_reduce(ctx, b, o, &local);
    if (st != GR_OK) return st;
    gr_context *on = gr_ctx_enter(c->on);
    gr_scalar *v = &local.value[0];
    memcpy(c->host, &v->v, sizeof v->v);
    if (v->kind == GR_SCALAR_BOOL) *(unsigned char *)c->host = (unsigned char)(v->v.b != 0);
    int rc = gr_copy(on, c->dev, c->host, 8, on->stream);
    if (rc) return gr_fail_dev(on, rc, "reduce: copy to the device");
    if ((st = oneshot_ready(on, c)) != GR_OK) return st;
    if ((st = combine_queue(on, c, c->dev, wire_of(v->kind), wire_of(v->kind), across)) != GR_OK) return st;
    if ((st = finish(on, c, "reduce")) != GR_OK) return st;
    if ((st = combined_arrived(on, c)) != GR_OK) return st;
    combined_value(c, v);
    *out = local;
    return GR_OK;
}

/* The run gr_reduce makes of b, when it can leave its value on the device: device passes of a catalogue
 * kernel that end in one accumulator which is the result itself (sum, min, the flags of and/or, ...). */
static int stays_on_device(gr_context *on, const gr_comm *c, const gr_buffer *b, const gr_options *o, gr_run *run) {
    if (o->stream || o->user || o->cpu || o->kernel || b->n == 0 || gr_buffer_where(b) != GR_DEVICE ||
        gr_buffer_device(b) != gr_comm_device(c))
        return 0;
    if (gr_plan_run(on, b->n, b->dtype, GR_DEVICE, o, run) != GR_OK) return 0;     /* gr_reduce says why */
    const gr_plan *p = &run->plan;
    const gr_op_desc *d = gr_op_desc_get(p->op);
    if (p->npasses == 0 || !run->row || run->image || run->fold || run->device_combine ||
        d->family != GR_FAMILY_VALUE || p->acc_size != gr_dtype_size(p->acc))
        return 0;
    for (int k = 0; k < p->npasses; k++)
        if (p->pass[k].on_host) return 0;
    return 1;
}

/* The device path, one wait: the run's last pass writes its accumulator to c->dev (a single pass's
 * epilogue straight there; other runs through the pinned value, a copy on the stream), widened to the
 * host path's type (by the mailboxes' kernel where it can), combined across the ranks and brought back.
 * The same values are combined as on the host path. */
static gr_status reduce_on_device(gr_context *on, gr_comm *c, gr_buffer *b, const gr_run *run, gr_comm_op across,
                                  gr_result *out) {
    const gr_plan *p = &run->plan;
    unsigned char zero[GR_ACC_MAX] = {0};
    gr_result local = gr_op_result(p->op, zero, p->acc, b->dtype, b->n, p->ddof);    /* its kind */
    gr_dtype held = gr_op_result_dtype(p->op, b->dtype, p->acc, 0), wire = wire_of(local.value[0].kind);
    int widen = !same_bytes(held, wire);
    char *acc = (char *)c->dev + (widen ? 8 : 0);
    gr_slot *slot;
    gr_status st = gr_slot_acquire(on, p->dev_bytes, p->host_bytes, &slot);
    if (st != GR_OK) return st;
    void *stream = on->stream;
    gr_inputs in;
    gr_inputs_one(&in, gr_buffer_data(b), b->dtype, b->n);
    int rc = 0, marked = 0;         /* marked: the local passes are queued and slot->done follows them */
    if (run->epilogue && p->npasses == 1) {
        st = gr_exec_single_to(on, &in, 0, run, slot->dev, slot->counter, acc, stream);
        if (st == GR_OK && (rc = gr_dev_event_record(slot->done, stream)) != 0) st = gr_fail_dev(on, rc, "event record");
        marked = st == GR_OK;
    } else {
        st = gr_exec_start(on, &in, 0, run, slot, stream, 0);
        marked = st == GR_OK;
        if (st == GR_OK && (rc = gr_copy(on, acc, gr_run_value(run, slot), p->acc_size, stream)) != 0)
            st = gr_fail_dev(on, rc, "reduce: the value to the device");
    }
    /* the mailboxes' kernel widens the common results itself: one launch fewer */
    if (st == GR_OK) st = oneshot_ready(on, c);
    int in_kernel = st == GR_OK && c->oneshot && widen && gr_dev_oneshot_widens(held, wire);
    if (st == GR_OK && widen && !in_kernel &&
        (rc = gr_dev_convert(c->dev, wire, acc, held, 1, GR_CV_WRITE, NULL, stream)) != 0)
        st = gr_fail_dev(on, rc, "reduce: widening the value");
    if (st == GR_OK) st = combine_queue(on, c, in_kernel ? acc : c->dev, in_kernel ? held : wire, wire, across);
    if (st == GR_OK) st = finish(on, c, "reduce");
    if (st == GR_OK) st = combined_arrived(on, c);
    /* the scratch goes back once the local passes are over: waited for by their event (not behind a
     * collective that failed), or by the stream where their launch failed part-way */
    if (marked) gr_dev_event_sync(slot->done);
    else gr_dev_stream_sync(stream);
    gr_slot_release(on, slot);
    if (st != GR_OK) return st;
    combined_value(c, &local.value[0]);
    *out = local;
    return GR_OK;
}

/* Every rank's `bytes` bytes at `mine` gathered to every rank into `all` (rank 0's first), through a slot's
 * memory: one ncclAllGather, waited for. `what` names them in a failure ("record", "head"). */
static gr_status gather_bytes(gr_context *on, gr_comm *c, const void *mine, size_t bytes, void *all, const char *what) {
    size_t total = bytes * (size_t)c->size, send = (bytes + 255) / 256 * 256;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(on, send + total, total, &slot);
    if (st != GR_OK) return st;
    void *stream = on->stream, *recv = (char *)slot->dev + send;
    char said[64];
    memcpy(slot->host, mine, bytes);
    int rc = gr_copy(on, slot->dev, slot->host, bytes, stream);
    if (rc) st = gr_fail_dev(on, rc, (snprintf(said, sizeof said, "reduce: the %s to the device", what), said));
    if (st == GR_OK) st = settle(on, c, nc.ncclAllGather(slot->dev, recv, bytes, gr_dtype_nccl(GR_UINT8), c->nccl,
                                                         stream), "ncclAllGather", "ncclAllGather was not issued");
    if (st == GR_OK && (rc = gr_copy(on, slot->host, recv, total, stream)) != 0)
        st = gr_fail_dev(on, rc, (snprintf(said, sizeof said, "reduce: the %ss to the host", what), said));
    if (st == GR_OK) st = finish(on, c, "reduce");
    if (st != GR_OK) gr_dev_stream_sync(stream);        /* the slot is reused: nothing may still write it */
    else memcpy(all, slot->host, total);
    gr_slot_release(on, slot);
    return st;
}

/* A failure of this rank's own, kept (its argument and words) across collectives that may set messages of
 * their own, and raised after them. */
typedef struct {
    gr_status st;
    char arg[64], said[GR_ERR_BYTES];
} own_failure;

static void keep_failure(gr_context *ctx, gr_status st, own_failure *f) {
    f->st = st;
    f->arg[0] = f->said[0] = 0;
    if (st == GR_OK) return;
    snprintf(f->arg, sizeof f->arg, "%s", gr_errarg(ctx));
    snprintf(f->said, sizeof f->said, "%s", gr_errmsg(ctx) + (*f->arg ? strlen(f->arg) + 2 : 0));
}

static gr_status raise_failure(gr_context *ctx, const own_failure *f) {
    return gr_set_error(ctx, f->st, *f->arg ? f->arg : NULL, f->said);
}

/* The ops whose results one all-reduce cannot combine (mean, var, argmin, ...; every op at gpu_to_gpu):
 * each rank's record of its accumulator (comm_parts.c) gathered to every rank by one ncclAllGather and
 * merged there in rank order. A rank whose own reduction failed still sends its record, which says so:
 * the others fail at once, naming it, instead of waiting out the timeout. */
static gr_status reduce_gathered(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, gr_result *out) {
    size_t bytes = gr_part_bytes(o);
    char *mine = malloc(bytes), *recs = malloc(bytes * (size_t)c->size);
    gr_status st = mine && recs ? GR_OK : gr_fail(ctx, GR_ENOMEM, "out of host memory");
    own_failure own = {GR_OK, "", ""};
    if (st == GR_OK) keep_failure(ctx, gr_part_make(ctx, b, o, mine), &own);
    if (st == GR_OK) st = gather_bytes(gr_ctx_enter(c->on), c, mine, bytes, recs, "record");
    if (st == GR_OK) st = own.st != GR_OK ? raise_failure(ctx, &own) : gr_part_merge(ctx, recs, bytes, c->size, out);
    free(mine);
    free(recs);
    return st;
}

gr_status gr_comm_reduce(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, gr_result *out) {
    gr_status st = usable(ctx, c);
    if (st == GR_OK) st = gr_buffer_check_compact(ctx, b, "b");
    if (st == GR_OK && gr_part_gathered(o)) return reduce_gathered(ctx, c, b, o, out);
    gr_comm_op across;
    if (st == GR_OK) st = across_of(ctx, o, &across);
    if (st != GR_OK) return st;
    gr_context *on = gr_ctx_enter(c->on);
    gr_run run;
    if (stays_on_device(on, c, b, o, &run)) return reduce_on_device(on, c, b, &run, across, out);
    return reduce_through_host(ctx, c, b, o, across, out);
}

/* The dtype a result buffer of dtype t is combined in by NCCL: its own, a bool's bytes as uint8, and a
 * wider one for the dtypes NCCL lacks or has only lately (int16, uint16; FP8 from NCCL 2.24 on sm_90),
 * which are results of min, max and the like here: exact in the wider type and back. */
static gr_dtype wire_of_buffer(gr_dtype t) {
    switch (t) {
    case GR_BOOL: return GR_UINT8;
    case GR_INT16: return GR_INT64;
    case GR_UINT16: return GR_UINT64;
    case GR_FLOAT8_E4M3: case GR_FLOAT8_E5M2: return GR_FLOAT32;
    case GR_INT8: case GR_UINT8: case GR_INT32: case GR_UINT32: case GR_INT64: case GR_UINT64: case GR_FLOAT32:
    case GR_FLOAT64: case GR_FLOAT16: case GR_BFLOAT16: case GR_DTYPE_COUNT:
        break;
    }
    return t;
}

/* Along axes, the ops that have no partial results (comm_axes.c: norm, nanmean, var/std of integers, every
 * op at gpu_to_gpu): every rank's elements gathered to every rank -- one ncclAllGather of the longest rank's
 * share, each rank's elements at the front of its own --, put one after another along the first reduced
 * axis and reduced there as one buffer, so every rank gets one GPU's bits for the whole (a compact
 * array's). One rank reduces its own b, as gr.reduce does (a strided view as it lies). */
static gr_status reduce_axes_whole(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, unsigned axes,
                                   const gr_axes_head *heads, gr_buffer *out[2]) {
    if (c->size == 1) return gr_reduce_axes(ctx, b, o, axes, out);
    gr_context *on = gr_ctx_enter(c->on);
    size_t size = (size_t)c->size, es = gr_dtype_size(b->dtype), most = 0;
    for (size_t r = 0; r < size; r++)
        if (heads[r].R > 0 && heads[r].K * heads[r].R > most) most = (size_t)(heads[r].K * heads[r].R);
    gr_buffer *all = NULL, *whole = NULL, **share = calloc(size, sizeof *share);
    gr_status st = share ? gr_buffer_new_unset_on(on, size * most, b->dtype, GR_DEVICE, gr_comm_device(c), &all)
                         : gr_fail(ctx, GR_ENOMEM, "out of host memory");
    /* share[r]: rank r's array, of its shape, at the front of its share of `all` */
    for (size_t r = 0; r < size && st == GR_OK; r++) {
        if (heads[r].R == 0) continue;
        size_t shape[GR_MAX_DIMS];
        for (int d = 0; d < heads[r].ndim; d++) shape[d] = (size_t)heads[r].shape[d];
        gr_buffer *flat = NULL;
        st = gr_buffer_slice(on, all, r * most, (size_t)(heads[r].K * heads[r].R), &flat);
        if (st == GR_OK) st = gr_buffer_view(on, flat, heads[r].ndim, shape, &share[r]);
        gr_buffer_free(on, flat);
    }
    if (st == GR_OK && heads[c->rank].R > 0) st = gr_buffer_copy(on, share[c->rank], b);     /* waited for */
    on = gr_ctx_enter(c->on);
    if (st == GR_OK)
        st = settle(on, c, nc.ncclAllGather((char *)gr_buffer_data(all) + (size_t)c->rank * most * es,
                                            gr_buffer_data(all), most * es, gr_dtype_nccl(GR_UINT8), c->nccl,
                                            on->stream), "ncclAllGather", "ncclAllGather was not issued");
    if (st == GR_OK) st = finish(on, c, "reduce");
    if (st == GR_OK) st = gr_axes_concat(on, heads, c->size, share, b, &whole);
    if (st == GR_OK) st = gr_reduce_axes(ctx, whole, o, axes, out);
    if (st != GR_OK) gr_dev_stream_sync(on->stream);   /* nothing may still write the buffers freed below */
    for (size_t r = 0; share && r < size; r++) gr_buffer_free(on, share[r]);
    free(share);
    gr_buffer_free(on, whole);
    gr_buffer_free(on, all);
    gr_ctx_enter(c->on);
    return st;
}

/* Along axes, the ops whose ranks' partial results are gathered (comm_axes.c): this rank's parts made, the
 * heads gathered and checked alike on every rank (so all go on, or none), then every rank's partial
 * results, merged in rank order into out (for the ops without parts, every rank's elements instead). A
 * rank whose own reduction failed still sends its head: the others fail at once, naming it. */
static gr_status reduce_axes_gathered(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, unsigned axes,
                                      gr_buffer *out[2]) {
    gr_axes_parts M;
    gr_axes_rank me;
    own_failure own;
    /* an op this rank cannot gather (its dtype's) is its own failure too: the others learn it from its head */
    gr_status st = gr_axes_rank_plan(ctx, o, b->dtype, &M);
    if (st == GR_OK) {
        st = gr_axes_rank_make(ctx, b, o, axes, &M, &me);
    } else {
        memset(&me, 0, sizeof me);
        me.head = (gr_axes_head){.status = st, .op = o->op, .dtype = b->dtype, .ddof = o->ddof};
    }
    keep_failure(ctx, st, &own);
    gr_context *on = gr_ctx_enter(c->on);
    gr_axes_head *heads = calloc((size_t)c->size, sizeof *heads);
    gr_buffer *recv[2][2] = {{NULL, NULL}, {NULL, NULL}};
    char *all[2][2] = {{NULL, NULL}, {NULL, NULL}};
    uint64_t total = 0;
    st = heads ? gather_bytes(on, c, &me.head, sizeof me.head, heads, "head")
               : gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (st == GR_OK && own.st != GR_OK) st = raise_failure(ctx, &own);
    else if (st == GR_OK) st = gr_axes_heads_check(ctx, heads, c->size, M.nparts == 0, &total);
    size_t K = st == GR_OK ? me.head.K : 0, size = (size_t)c->size;
    if (st == GR_OK && K > 0 && total == 0) {
        st = gr_reduce_axes(ctx, b, o, axes, out);      /* every rank empty along the axes: its own results */
    } else if (st == GR_OK && K > 0 && M.nparts == 0) {
        st = reduce_axes_whole(ctx, c, b, o, axes, heads, out);
    } else if (st == GR_OK && K > 0) {
        for (int p = 0; p < M.nparts && st == GR_OK; p++)
            for (int r = 0; r < M.nres[p] && st == GR_OK; r++) {
                size_t es = gr_dtype_size(M.dt[p][r]);
                st = gr_buffer_new_unset_on(on, size * K, M.dt[p][r], GR_DEVICE, gr_comm_device(c), &recv[p][r]);
                if (st == GR_OK)
                    st = settle(on, c, nc.ncclAllGather(gr_buffer_data(me.res[p][r]), gr_buffer_data(recv[p][r]),
                                                        K * es, gr_dtype_nccl(GR_UINT8), c->nccl, on->stream),
                                "ncclAllGather", "ncclAllGather was not issued");
            }
        if (st == GR_OK) st = finish(on, c, "reduce");
        for (int p = 0; p < M.nparts && st == GR_OK; p++)
            for (int r = 0; r < M.nres[p] && st == GR_OK; r++) {
                if (!(all[p][r] = malloc(size * K * gr_dtype_size(M.dt[p][r])))) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
                if (st == GR_OK) st = gr_buffer_read(on, recv[p][r], 0, all[p][r], size * K);
            }
        if (st == GR_OK) st = gr_axes_ranks_merge(on, o, &M, heads, c->size, all, out);
    }
    if (st != GR_OK) gr_dev_stream_sync(on->stream);   /* nothing may still write the buffers freed below */
    for (int p = 0; p < 2; p++)
        for (int r = 0; r < 2; r++) {
            gr_buffer_free(on, recv[p][r]);
            free(all[p][r]);
        }
    gr_axes_rank_free(ctx, &me);
    free(heads);
    gr_ctx_enter(c->on);
    return st;
}

gr_status gr_comm_reduce_axes(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, unsigned axes,
                              gr_buffer *out[2]) {
    gr_status st = usable(ctx, c);
    gr_comm_op across = GR_COMM_SUM;
    int gathered = gr_part_gathered(o);      /* the same ops as for one value */
    if (st == GR_OK && !gathered) st = across_of(ctx, o, &across);
    if (st == GR_OK) st = on_comm_device(ctx, c, b, "b");
    if (st == GR_OK && o->stream)
        st = gr_fail_arg(ctx, GR_EINVAL, "stream", "c:reduce runs on the communicator's stream (leave it out)");
    if (st != GR_OK) return st;
    gr_context *on = gr_ctx_enter(c->on);
    /* the axes and the result buffer are checked before anything is reduced or made */
    if ((st = gr_segment_outs_ready(on, b, o, NULL, axes, out)) != GR_OK) return st;
    if (gathered) return reduce_axes_gathered(ctx, c, b, o, axes, out);
    gr_dtype t = gr_buffer_dtype(out[0]), wire = wire_of_buffer(t);
    size_t k = gr_buffer_size(out[0]);
    int code = gr_dtype_nccl(wire);
    gr_buffer *wide = NULL;
    if (wire != t && !same_bytes(t, wire) &&
        (st = gr_buffer_new_unset_on(on, k, wire, GR_DEVICE, gr_comm_device(c), &wide)) != GR_OK)
        return st;
    gr_pending *p;
    if ((st = gr_reduce_axes_async(on, b, o, axes, out, &p)) != GR_OK) {
        gr_buffer_free(on, wide);
        return st;
    }
    on = gr_ctx_enter(c->on);
    void *stream = on->stream, *data = gr_buffer_data(out[0]);
    int rc = 0;
    if (k > 0 && wide) {
        /* out -> wide, combined there, wide -> out: queued behind the local reduction on one stream */
        rc = gr_dev_convert(gr_buffer_data(wide), wire, data, t, k, GR_CV_WRITE, NULL, stream);
        if (rc) st = gr_fail_dev(on, rc, "reduce: widening the results");
        if (st == GR_OK) st = queue(on, c, gr_buffer_data(wide), k, code, across);
        if (st == GR_OK && (rc = gr_dev_convert(data, t, gr_buffer_data(wide), wire, k, GR_CV_WRITE, NULL, stream)) != 0)
            st = gr_fail_dev(on, rc, "reduce: narrowing the results");
    } else if (k > 0) {
        st = queue(on, c, data, k, code, across);
    }
    if (st == GR_OK) st = finish(on, c, "reduce");
    gr_result unused;
    gr_status local = gr_pending_wait(on, p, &unused);      /* over by now: it only gives its scratch back */
    gr_pending_free(on, p);
    gr_buffer_free(on, wide);
    gr_ctx_enter(c->on);
    return st != GR_OK ? st : local;
}

gr_status gr_comm_barrier(gr_context *ctx, gr_comm *c) {
    gr_status st = usable(ctx, c);
    if (st != GR_OK) return st;
    gr_context *on = gr_ctx_enter(c->on);
    if ((st = queue(on, c, c->dev, 1, gr_dtype_nccl(GR_INT32), GR_COMM_SUM)) != GR_OK) return st;
    return finish(on, c, "barrier");
}

gr_status gr_comm_bench_raw(gr_context *ctx, gr_comm *c, gr_buffer *b, gr_comm_op op, int reps, int sync_each,
                            double *seconds) {
    *seconds = 0;
    gr_status st = usable(ctx, c);
    if (st == GR_OK) st = gr_buffer_check_compact(ctx, b, "b");
    if (st != GR_OK) return st;
    if (gr_buffer_where(b) != GR_DEVICE || gr_buffer_device(b) != gr_comm_device(c) || reps < 1)
        return gr_fail_arg(ctx, GR_EINVAL, "b", "expected a device buffer of the communicator's device and reps >= 1");
    int type;
    if ((st = nccl_type(ctx, b, &type)) != GR_OK) return st;
    gr_context *on = gr_ctx_enter(c->on);
    double t0 = gr_now_ms();
    for (int i = 0; i < reps && st == GR_OK; i++) {
        st = queue(on, c, gr_buffer_data(b), b->n, type, op);
        if (st == GR_OK && (sync_each || i == reps - 1)) st = finish(on, c, "allreduce");
    }
    *seconds = (gr_now_ms() - t0) / 1e3 / reps;
    return st;
}
