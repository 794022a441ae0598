/*
 * kernel.h -- user kernel variants (kernel.c, kernel_source.c): the definition a registry row of
 * gr.kernel points to, and the shape the planner gives its passes.
 *
 * A user kernel is a device function template (gr.h's gr_kernel_spec, cuda/device/user_kernel.cuh); for each op
 * (or user operator), input dtype and accumulator, kernel_source.c writes a translation unit that wraps
 * it in gr_op_main and gr_op_partials -- the same names and arguments as an operator's (operator.h) --
 * and kernel.c compiles and loads it through the operators' caches and remembers the image, which
 * exec.c launches as it launches an operator's.
 */
#ifndef GR_KERNEL_H
#define GR_KERNEL_H

#include "gr.h"
#include "base/launch.h"

struct gr_user_kernel {
    gr_kernel_spec spec;            /* own copies, the defaults filled in (entry and summary set) */
};

/* What the planner asks of a user kernel's row (registry.h's gr_variant_row.kernel): the grid of a
 * grid-stride kernel (at most one resident wave, 32 bytes per thread per round, as warp_shuffle's); its
 * launch is never called (exec.c launches the prepared image), and reports an invalid value if it is. */
extern const gr_kernel gr_user_kernel_shape;

/* The generated source for a definition that may not be registered yet (gr_kernel_register compiles
 * before it adds the row): see gr_kernel_source. */
gr_status gr_kernel_source_of(gr_context *ctx, const struct gr_user_kernel *k, gr_op op, gr_dtype acc,
                              const gr_operator *user_op, gr_dtype in, char **out);

#endif
