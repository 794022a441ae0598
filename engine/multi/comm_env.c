/*
 * comm_env.c -- a communicator from a launcher's environment (gr_comm_from_env): who this process is,
 * which GPU it drives and where the ranks meet, read from the variables torchrun, mpirun and Slurm set.
 *
 * Who: the first family with its rank or size variable set, in this order --
 *   torchrun  RANK, WORLD_SIZE, LOCAL_RANK
 *   mpirun    OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
 *   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 * The later families are not compared with the chosen one: launchers nest (mpirun or torchrun inside a
 * Slurm allocation inherit the allocation's SLURM_* values, which then differ from their own), and the
 * inner launcher is the one that describes this process. Within the family every value must be a whole
 * number, 0 <= rank < size and local rank < size; the local rank may be missing only for one rank.
 * Which GPU: device local rank + 1 (CUDA ordinal local rank of the visible devices).
 *
 * Where: NCCL's own bootstrap, no protocol of ours. What NCCL does (NVIDIA/nccl, src/bootstrap.cc and
 * src/init.cc, read at 2.30.7; the same logic in 2.x before it): when NCCL_COMM_ID=host:port is set,
 * ncclGetUniqueId does not start a root listener -- bootstrapGetUniqueId parses the address into the id
 * and gives it NCCL's fixed magic, so every process that calls it gets the same id by itself -- and
 * ncclCommInitRank on rank 0 (ncclCommInitRankDev) starts the root listener at that address
 * (bootstrapCreateRoot) before joining; the other ranks connect to it. bootstrapNetInit, once per
 * process, also picks the interface on the address's subnet. So the address must be one of rank 0's
 * and its port free there. In order:
 *   1. NCCL_COMM_ID, when set, as it is;
 *   2. GPUREDUCE_COMM_ID, an id file path (or gr_comm_id's hex) as gr_comm_spec.id takes it: rank 0 writes
 *      a fresh id there, the others read it (a filesystem every rank sees);
 *   3. MASTER_ADDR:MASTER_PORT (torchrun's), set as NCCL_COMM_ID while the communicator forms and put
 *      back as it was after. Under torchrun's static rendezvous its agent's store already listens on
 *      MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so the port after it is taken there
 *      (experiments/multi_gpu/launch.lua's agent-store job holds MASTER_PORT to show it).
 * Then gr_comm_id (NCCL derives the id from the address) and gr_comm_create, which waits, with the
 * timeout, for every rank.
 *
 * GPUREDUCE_COMM_ID is read here with the launcher's variables, not by base/env.c: it is a rendezvous
 * address like them, any non-empty text, and only this call reads it.
 */
#include "gr.h"
#include "base/error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct family {
    const char *launcher, *rank, *size, *local;
} families[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};
#define FAMILIES (sizeof families / sizeof families[0])

/* A variable's value; NULL when unset or empty (an empty value is no value). */
static const char *var(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Whether text is a whole number from 0 to INT_MAX, digits only (into *out). */
static int parse_whole(const char *text, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!(*text >= '0' && *text <= '9') || *end || errno || v > INT_MAX) return 0;
    *out = (int)v;
    return 1;
}

/* The whole number in variable `name` into *out, or GR_EINVAL naming the variable. */
static gr_status whole(gr_context *ctx, const char *name, const char *text, int *out) {
    return parse_whole(text, out) ? GR_OK : gr_fail(ctx, GR_EINVAL, "%s='%.64s' is not a whole number from 0", name,
                                                     text);
}

/* Who this process is: rank, size and local rank from the first family set (*fam). */
static gr_status who(gr_context *ctx, const struct family **fam, int *rank, int *size, int *local) {
    const struct family *f = NULL;
    for (size_t i = 0; i < FAMILIES && !f; i++)
        if (var(families[i].rank) || var(families[i].size)) f = &families[i];
    *fam = f;
    if (!f) {
        char names[320] = "";
        for (size_t i = 0; i < FAMILIES; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s, %s, %s (%s)", i ? "; " : "", families[i].rank,
                     families[i].size, families[i].local, families[i].launcher);
        }
        return gr_fail(ctx, GR_EINVAL, "no launcher variables are set: looked for %s; without a launcher give "
                       "rank, size and id", names);
    }
    const char *r = var(f->rank), *s = var(f->size), *l = var(f->local);
    if (!r || !s)
        return gr_fail(ctx, GR_EINVAL, "%s is set but %s is not (a %s launch sets %s, %s and %s)",
                       r ? f->rank : f->size, r ? f->size : f->rank, f->launcher, f->rank, f->size, f->local);
    gr_status st;
    if ((st = whole(ctx, f->rank, r, rank)) != GR_OK || (st = whole(ctx, f->size, s, size)) != GR_OK) return st;
    if (*size < 1) return gr_fail(ctx, GR_EINVAL, "%s=%d: a communicator has at least one rank", f->size, *size);
    if (*rank >= *size)
        return gr_fail(ctx, GR_EINVAL, "%s=%d is not below %s=%d (ranks are 0 to %d)", f->rank, *rank, f->size, *size,
                       *size - 1);
    if (!l) {
        if (*size > 1)
            return gr_fail(ctx, GR_EINVAL, "%s is not set (%s=%d, %s=%d): the local rank chooses this process's GPU",
                           f->local, f->rank, *rank, f->size, *size);
        *local = 0;
        return GR_OK;
    }
    if ((st = whole(ctx, f->local, l, local)) != GR_OK) return st;
    if (*local >= *size)
        return gr_fail(ctx, GR_EINVAL, "%s=%d is not below %s=%d", f->local, *local, f->size, *size);
    return GR_OK;
}

/* Where the ranks meet: an NCCL_COMM_ID value to set (addr, a buffer; "" when none is to be set), or the
 * id file (*id_file). Fails naming the variables when there is no way to meet. */
static gr_status where(gr_context *ctx, char *addr, size_t len, const char **id_file) {
    *addr = '\0';
    *id_file = NULL;
    const char *nccl_id = var("NCCL_COMM_ID");
    if (nccl_id) {
        const char *colon = strrchr(nccl_id, ':');
        int port;
        if (!colon || colon == nccl_id || !parse_whole(colon + 1, &port) || port < 1 || port > 65535)
            return gr_fail(ctx, GR_EINVAL, "NCCL_COMM_ID='%.200s' is not host:port (NCCL's bootstrap root: "
                           "<ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>)", nccl_id);
        return GR_OK;       /* NCCL reads it itself */
    }
    if ((*id_file = var("GPUREDUCE_COMM_ID")) != NULL) return GR_OK;
    const char *host = var("MASTER_ADDR"), *port_text = var("MASTER_PORT");
    if (!host && !port_text)
        return gr_fail(ctx, GR_EINVAL, "no rendezvous: set MASTER_ADDR and MASTER_PORT (rank 0's address and a free "
                       "port; torchrun sets them), NCCL_COMM_ID=host:port, or GPUREDUCE_COMM_ID=<an id file path "
                       "every rank can read>");
    if (!host || !port_text)
        return gr_fail(ctx, GR_EINVAL, "%s is set but %s is not (the rendezvous is MASTER_ADDR:MASTER_PORT)",
                       host ? "MASTER_ADDR" : "MASTER_PORT", host ? "MASTER_PORT" : "MASTER_ADDR");
    int port;
    gr_status st = whole(ctx, "MASTER_PORT", port_text, &port);
    if (st != GR_OK) return st;
    /* the agent's store holds MASTER_PORT: torchrun writes Python's str(True); "true" and "1" are taken too */
    const char *agent = var("TORCHELASTIC_USE_AGENT_STORE");
    int next = agent && (strcmp(agent, "True") == 0 || strcmp(agent, "true") == 0 || strcmp(agent, "1") == 0);
    if (port < 1 || port + next > 65535)
        return gr_fail(ctx, GR_EINVAL, "MASTER_PORT=%d is not a port (1 to %d)", port, 65535 - next);
    int v6 = strchr(host, ':') && host[0] != '[';
    if ((size_t)snprintf(addr, len, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port + next) >= len)
        return gr_fail(ctx, GR_EINVAL, "MASTER_ADDR is longer than %zu characters", len - 16);
    return GR_OK;
}

gr_status gr_comm_from_env(gr_context *ctx, double timeout, gr_comm **out) {
    *out = NULL;
    if (!(timeout > 0))
        return gr_fail_arg(ctx, GR_EINVAL, "timeout", "must be a positive number of seconds (got %g)", timeout);
    const struct family *f;
    int rank, size, local;
    char addr[320];
    const char *id_file;
    gr_status st = who(ctx, &f, &rank, &size, &local);
    if (st == GR_OK) st = where(ctx, addr, sizeof addr, &id_file);
    if (st != GR_OK) return st;
    int count = gr_device_count(ctx);
    if (local >= count) {
        const char *vis = var("CUDA_VISIBLE_DEVICES");
        return gr_fail(ctx, GR_EINVAL, "%s=%d names device %d, but %d device%s visible%s%.64s%s", f->local, local,
                       local + 1, count, count == 1 ? " is" : "s are", vis ? " (CUDA_VISIBLE_DEVICES=" : "",
                       vis ? vis : "", vis ? ")" : "");
    }

    /* NCCL_COMM_ID from MASTER_ADDR:MASTER_PORT, for as long as NCCL reads it: ncclGetUniqueId, and
     * ncclCommInitRank's root on rank 0; gr_comm_create returns once the communicator has formed. */
    if (*addr && setenv("NCCL_COMM_ID", addr, 1) != 0)
        return gr_fail(ctx, GR_ENOMEM, "cannot set NCCL_COMM_ID: %s", strerror(errno));
    char hex[GR_COMM_ID_CHARS + 1];
    st = id_file ? GR_OK : gr_comm_id(ctx, hex);
    if (st == GR_OK) {
        gr_comm_spec spec = {rank, size, id_file ? id_file : hex, timeout, local + 1};
        st = gr_comm_create(ctx, &spec, out);
    }
    if (*addr) unsetenv("NCCL_COMM_ID");
    if (st != GR_OK && st != GR_ENODEV) {
        char msg[GR_ERR_BYTES];
        snprintf(msg, sizeof msg, "%s", gr_errmsg(ctx));
        const char *nccl_id = var("NCCL_COMM_ID");
        st = gr_fail(ctx, st, "%s (rendezvous: %s%s%s%s)", msg, id_file ? "the id file GPUREDUCE_COMM_ID=" :
                     "NCCL_COMM_ID=", id_file ? id_file : *addr ? addr : nccl_id ? nccl_id : "?",
                     *addr ? ", from MASTER_ADDR and MASTER_PORT" : "", id_file || *addr ? "" : ", as set");
    }
    return st;
}
