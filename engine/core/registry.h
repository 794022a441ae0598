/*
 * registry.h -- the variant registry and the finish table (registry.c, finish.c).
 *
 * One row per variant: its facts and the kernel it runs (a gr_kernel symbol of cuda/vNN_name.cu) or its
 * host function. A variant's finishing modes are not listed by hand: its row says what its kernel does
 * with the blocks' values (its shape), and the finish table says which shapes each mode can finish.
 */
#ifndef GR_REGISTRY_H
#define GR_REGISTRY_H

#include "core/handles.h"
#include "base/launch.h"

/* What a variant's kernel does with its blocks' values. */
enum {
    GR_SHAPE_PARTIALS = 1,      /* writes one partial per block: more passes or the CPU can finish them */
    GR_SHAPE_EPILOGUE = 2,      /* ends in the device epilogue: with final_out, the last block finishes */
    GR_SHAPE_ONE_VALUE = 4,     /* produces the one value itself (a library call, a global atomic) */
    GR_SHAPE_HOST = 8,          /* reduces on the CPU */
};

/* A host variant: n elements of t at p, the first with index `first` -> one accumulator at acc_out. */
typedef gr_status (*gr_host_fn)(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, gr_op op,
                                gr_dtype acc, void *acc_out);

typedef struct gr_variant_row {
    const char *name;
    int ordinal;                /* teaching order */
    const char *origin;         /* the textbook step it reproduces */
    const char *summary;        /* one line */
    unsigned shape;             /* GR_SHAPE_* */
    gr_finish default_finish;   /* the finish of a variant named without one */
    int block_min, block_max, block_default;
    unsigned needs;             /* GR_NEEDS_* */
    unsigned ops;               /* the ops it takes, GR_OP_BIT(op) each (engine/lists.h) */
    gr_determinism determinism; /* what it promises of float results (gr.h) */
    const gr_kernel *kernel;    /* NULL for a host variant, and for every kernel in a CPU-only build */
    gr_host_fn host;            /* NULL for a kernel variant */
    /* a user kernel's (kernel.c): the finishing modes it allows (0, the catalogue's: all its shape's), and
     * its definition (NULL for the catalogue's rows) */
    unsigned finishes;
    const struct gr_user_kernel *user;
    /* the dtypes it takes, GR_DTYPE_BIT(dtype) each: the one list of which variant takes which dtype;
     * a kernel file's dispatch takes the same set (cuda/host/launch.cuh's kDtypes) */
    unsigned dtypes;
} gr_variant_row;

const gr_variant_row *gr_variant_row_get(int i);
/* A catalogue variant's index by name, found once into *memo (-1 before): the catalogue's rows never
 * move (user kernels are appended after them), so a hot path need not compare names on every call.
 * Threads that race here find and store the same index. */
static inline int gr_catalogue_index(const char *name, int *memo) {
    int i = __atomic_load_n(memo, __ATOMIC_RELAXED);
    if (i < 0) __atomic_store_n(memo, i = gr_variant_find(name), __ATOMIC_RELAXED);
    return i;
}
/* Appends a user kernel's row after the catalogue's (kernel.c): its index in *index, its ordinal 100 +
 * the number registered before it. The row is copied and stays until the process ends (what it points
 * to must too). GR_EINVAL naming "name" when a
 * variant has the name already, or when the registry is full (GR_MAX_USER_VARIANTS). Thread-safe; a row
 * is visible to readers once it is complete. */
#define GR_MAX_USER_VARIANTS 64
gr_status gr_registry_add(gr_context *ctx, const gr_variant_row *row, int *index);
/* GR_OK when variant v (NULL: none named, as for segments) gives the determinism asked for (-1: none
 * asked), else a message naming opts.determinism and what is accepted. */
gr_status gr_check_determinism(gr_context *ctx, const gr_variant *v, int asked);

/* ---- the finish table (finish.c) ---------------------------------------------------------------- */

typedef enum {
    GR_PASSES_ONE,              /* the first pass only */
    GR_PASSES_TO_ONE,           /* device passes until one value remains */
    GR_PASSES_TO_THRESHOLD,     /* device passes until at most `threshold` partials remain */
} gr_passes_rule;

typedef struct gr_finish_row {
    const char *name;
    unsigned shapes;            /* the variant shapes this mode can finish */
    gr_passes_rule passes;
    int epilogue;               /* the first pass finishes in its own kernel (final_out set) */
} gr_finish_row;

const gr_finish_row *gr_finish_row_get(gr_finish f);
/* Bit (1u << f) for each finishing mode a variant of this shape supports. */
unsigned gr_finishes_of(unsigned shape);
/* GR_OK when the variant can finish this way, else a message listing what it accepts. */
gr_status gr_check_finish(gr_context *ctx, const gr_variant *v, gr_finish f);
/* GR_OK when the variant takes `block` threads per block, else a message listing what it takes. */
gr_status gr_check_block(gr_context *ctx, const gr_variant *v, int block);

#endif
