/*
 * loperator_cpu.h -- a user operator's cpu table made the engine's gr_operator_cpu (loperator_cpu.c).
 */
#ifndef LGR_LOPERATOR_CPU_H
#define LGR_LOPERATOR_CPU_H

#include "lcore.h"

/* The cpu table of an operator as the engine's functions: its map, reduce, post, identity at stack
 * slots fn.. of L, two accumulator slots from `slots`, the accumulator's dtype (-1: a struct). */
typedef struct lgr_operator_cpu {
    gr_operator_cpu fns;        /* what the engine calls (gr_options.cpu points here) */
    lua_State *L;
    gr_context *ctx;
    int fn, slots, acc;
} lgr_operator_cpu;
/* The cpu table (user value 1) of the Operator `op` at stack index op_idx made the engine's functions:
 * its functions and two accumulator slots pushed (they must stay there while the engine may call them),
 * c filled. 0 (nothing pushed) when the operator has no cpu table. */
int lgr_operator_cpu_push(lua_State *L, int op_idx, gr_operator *op, lgr_operator_cpu *c);
/* gr_options.fold (fold_ud: the lgr_operator_cpu): the partials of a CPU finish folded by cpu.reduce. */
gr_status lgr_operator_cpu_fold(void *ud, const void *partials, size_t count, void *out);

#endif
