/*
 * comm_oneshot.c -- one value combined across ranks through their mailboxes (comm_oneshot.h): the offer,
 * the join, and a call's launch.
 *
 * A host is named by its host name and its kernel's boot id, so two containers or two "nodes" that share
 * neither are not taken for one. NCCL_P2P_DISABLE=1 (what the network transport's test sets) turns the
 * path off too: a job that asks NCCL not to go peer to peer is not sent that way behind its back.
 */
#include "multi/comm_oneshot.h"
#include "base/device.h"
#include "base/env.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gr_oneshot {
    int rank, size;
    void *box;                          /* this rank's mailbox (cudaMalloc) */
    void *opened[GR_ONESHOT_RANKS];     /* the other ranks' mailboxes as mapped here; NULL: not opened */
    unsigned long long **boxes;         /* device memory: every rank's mailbox, rank order */
    unsigned long long *reply;          /* pinned: the combined word, then 1, or 2 where late */
    unsigned long long epoch;           /* the last call's number */
};

typedef struct {
    int want;
    char host[124];
    unsigned char handle[GR_IPC_HANDLE_BYTES];
} record;
_Static_assert(sizeof(record) <= GR_ONESHOT_RECORD_BYTES, "a record fits its bytes");

static void host_name(char *out, size_t len) {
    char name[64] = "", boot[48] = "";
    gethostname(name, sizeof name - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = 0;
    snprintf(out, len, "%s/%s", name, boot);
}

static int wanted(int size) {
    const char *p2p = getenv("NCCL_P2P_DISABLE");
    return size >= 1 && size <= GR_ONESHOT_RANKS && gr_env_number_or(GR_ENV_COMM_ONESHOT, 1) != 0 &&
           !(p2p && strcmp(p2p, "1") == 0);
}

void gr_oneshot_offer(gr_context *on, int rank, int size, gr_oneshot **o, void *rec) {
    record r;
    memset(&r, 0, sizeof r);
    host_name(r.host, sizeof r.host);
    *o = NULL;
    gr_oneshot *s = wanted(size) ? calloc(1, sizeof *s) : NULL;
    if (s) {
        s->rank = rank, s->size = size;
        if (gr_dev_mailbox_new(&s->box, r.handle) != 0 ||
            gr_mem_alloc(on, GR_MEM_PINNED, 16, (void **)&s->reply) != GR_OK) {
            gr_oneshot_drop(on, s);
            s = NULL;
        }
    }
    r.want = s != NULL;
    *o = s;
    memset(rec, 0, GR_ONESHOT_RECORD_BYTES);
    memcpy(rec, &r, sizeof r);
}

/* Rank q's record among every rank's, GR_ONESHOT_RECORD_BYTES apart. */
static const record *record_of(const void *recs, int q) {
    return (const record *)((const char *)recs + (size_t)q * GR_ONESHOT_RECORD_BYTES);
}

int gr_oneshot_join(gr_context *on, gr_oneshot *o, const void *recs, int size) {
    if (!o || size != o->size) return 0;
    const record *mine = record_of(recs, o->rank);
    for (int q = 0; q < size; q++)
        if (!record_of(recs, q)->want || strncmp(record_of(recs, q)->host, mine->host, sizeof mine->host) != 0)
            return 0;
    void *all[GR_ONESHOT_RANKS];
    for (int q = 0; q < size; q++) {
        if (q == o->rank) all[q] = o->box;
        else if (gr_dev_ipc_open(record_of(recs, q)->handle, &o->opened[q]) != 0) return 0;
        else all[q] = o->opened[q];
    }
    if (gr_mem_alloc(on, GR_MEM_DEVICE, sizeof all, (void **)&o->boxes) != GR_OK) return 0;
    return gr_copy(on, o->boxes, all, (size_t)size * sizeof all[0], on->stream) == 0 &&
           gr_dev_stream_sync(on->stream) == 0;
}

void gr_oneshot_drop(gr_context *on, gr_oneshot *o) {
    if (!o) return;
    gr_dev_stream_sync(on->stream);
    for (int q = 0; q < GR_ONESHOT_RANKS; q++)
        if (o->opened[q]) gr_dev_ipc_close(o->opened[q]);
    if (o->box) gr_dev_mailbox_free(o->box);
    gr_mem_free(on, GR_MEM_DEVICE, o->boxes, GR_ONESHOT_RANKS * sizeof(void *));
    gr_mem_free(on, GR_MEM_PINNED, o->reply, 16);
    free(o);
}

gr_status gr_oneshot_queue(gr_context *on, gr_oneshot *o, const void *value, gr_dtype held, gr_dtype wire,
                           gr_comm_op op, double timeout) {
    o->reply[1] = 0;
    int rc = gr_dev_oneshot(o->boxes, o->rank, o->size, ++o->epoch, value, held, wire, op, o->reply, timeout,
                            on->stream);
    return rc ? gr_fail_dev(on, rc, "reduce: the one-shot combination") : GR_OK;
}

int gr_oneshot_result(const gr_oneshot *o, void *out) {
    if (((volatile unsigned long long *)o->reply)[1] != 1) return 0;
    memcpy(out, o->reply, 8);
    return 1;
}
