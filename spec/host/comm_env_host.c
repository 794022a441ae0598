/*
 * comm_env_host.c -- a C host that joins the communicator a launcher describes (gr_comm_from_env,
 * engine/gr.h), as a program started by torchrun, mpirun or srun would, with no Lua in it.
 *
 * Every rank holds the int64 elements rank * N + 1 .. (rank + 1) * N (N = 1000), so that the ranks' data
 * in rank order are 1 .. S with S = size * N. The program reduces them across the ranks -- a sum (one
 * all-reduce), a mean and an argmax (gathered: the argmax's index counts in the concatenation) -- and
 * all-reduces the buffer element-wise, then checks each against its closed form and prints one line:
 *   comm_env_host: ok: <launcher> rank R of K on device D: sum ..., mean ..., argmax ... at ..., allreduce b[1] = ...
 * exit 0; a wrong value: the same line with WRONG, exit 1; a refusal of gr_comm_from_env (missing or
 * contradictory variables, no NCCL, no device): "comm_env_host: refused: <the engine's message>", exit 3;
 * any other failure: "comm_env_host: <step>: <message>", exit 2. spec/host_spec.lua sets the variables.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr.h"

#define N 1000

/* Which launcher's variables the engine read: the first family set, as engine/multi/comm_env.c looks. */
static const char *launcher(void) {
    static const char *const names[][2] = {
        {"RANK", "torchrun"}, {"WORLD_SIZE", "torchrun"}, {"OMPI_COMM_WORLD_RANK", "mpirun"},
        {"OMPI_COMM_WORLD_SIZE", "mpirun"}, {"SLURM_PROCID", "Slurm"}, {"SLURM_NTASKS", "Slurm"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i][0]);
        if (v && *v) return names[i][1];
    }
    return "no launcher";
}

static int failed(gr_context *ctx, const char *step) {
    printf("comm_env_host: %s: %s\n", step, gr_errmsg(ctx));
    return 2;
}

/* gr_comm_reduce of b with op into r; 0 after printing the failure. */
static int reduce(gr_context *ctx, gr_comm *c, gr_buffer *b, gr_op op, gr_result *r) {
    gr_options o;
    gr_options_init(&o, op);
    if (gr_comm_reduce(ctx, c, b, &o, r) == GR_OK) return 1;
    printf("comm_env_host: reduce %s: %s\n", gr_op_name(op), gr_errmsg(ctx));
    return 0;
}

int main(void) {
    gr_context *ctx = NULL;
    if (gr_context_create(&ctx) != GR_OK) {
        printf("comm_env_host: context: %s\n", ctx ? gr_errmsg(ctx) : "out of memory");
        gr_context_destroy(ctx);
        return 2;
    }
    gr_comm *c;
    if (gr_comm_from_env(ctx, 30.0, &c) != GR_OK) {
        printf("comm_env_host: refused: %s\n", gr_errmsg(ctx));
        gr_context_destroy(ctx);
        return 3;
    }
    int rank = gr_comm_rank(c), size = gr_comm_size(c), device = gr_comm_device(c), rc = 2;
    gr_buffer *b = NULL;
    gr_result sum, mean, arg;
    int64_t first = 0;
    gr_scalar start = {GR_SCALAR_INT, {.i = (int64_t)rank * N + 1}}, step = {GR_SCALAR_INT, {.i = 1}};
    if (gr_buffer_new_on(ctx, N, GR_INT64, GR_DEVICE, device, &b) != GR_OK) rc = failed(ctx, "buffer");
    else if (gr_buffer_iota(ctx, b, start, step) != GR_OK) rc = failed(ctx, "iota");
    else if (reduce(ctx, c, b, GR_SUM, &sum) && reduce(ctx, c, b, GR_MEAN, &mean) &&
             reduce(ctx, c, b, GR_ARGMAX, &arg)) {
        if (gr_comm_allreduce(ctx, c, b, GR_COMM_SUM) != GR_OK) rc = failed(ctx, "allreduce");
        else if (gr_buffer_read(ctx, b, 0, &first, 1) != GR_OK) rc = failed(ctx, "read");
        else rc = 0;
    }
    if (rc == 0) {
        /* the closed forms over 1 .. S; element 1 after the all-reduce: the ranks' first elements added */
        int64_t s = (int64_t)size * N, k = size;
        int good = sum.value[0].kind == GR_SCALAR_INT && sum.value[0].v.i == s * (s + 1) / 2 &&
                   mean.value[0].kind == GR_SCALAR_FLOAT && mean.value[0].v.f == (double)(s + 1) / 2.0 &&
                   arg.count == 2 && arg.value[0].v.i == s && arg.value[1].v.i == s &&
                   first == (int64_t)N * k * (k - 1) / 2 + k;
        printf("comm_env_host: %s: %s rank %d of %d on device %d: sum %lld, mean %.17g, argmax %lld at %lld, "
               "allreduce b[1] = %lld\n", good ? "ok" : "WRONG", launcher(), rank, size, device,
               (long long)sum.value[0].v.i, mean.value[0].v.f, (long long)arg.value[0].v.i,
               (long long)arg.value[1].v.i, (long long)first);
        rc = good ? 0 : 1;
    }
    gr_buffer_free(ctx, b);
    gr_comm_destroy(ctx, c);
    gr_context_destroy(ctx);
    return rc;
}
