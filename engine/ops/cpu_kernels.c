/*
 * cpu_kernels.c -- which of the cpu backend's loops serves an op: its kind is read from the op's
 * descriptor (family, map, combine), its row from the dtype (cpu_exact.c for the exact loops,
 * cpu_trees.c for those into a float accumulator, whose bits follow the tree of gr_cpu_split).
 */
#include "ops/cpu_lanes.h"

static int kind_of(const gr_op_desc *d, gr_dtype t) {
    switch (gr_op_family(d, t)) {
    case GR_FAMILY_VALUE: break;
    case GR_FAMILY_ARG: return d->combine == GR_COMBINE_MAX ? GR_K_ARGMAX : GR_K_ARGMIN;
    case GR_FAMILY_MINMAX: return GR_K_MINMAX;
    case GR_FAMILY_WELFORD: return GR_K_WELFORD;
    case GR_FAMILY_NORM: return GR_K_NORM;
    case GR_FAMILY_COUNTED: return d->map == GR_MAP_NAN_ZERO && d->combine == GR_COMBINE_ADD ? GR_K_COUNTED : -1;
    case GR_FAMILY_MOMENTS: return GR_K_MOMENTS;
    case GR_FAMILY_SQUARES: return GR_K_SQUARES;
    }
    switch (d->map) {
    case GR_MAP_VALUE:
        switch (d->combine) {
        case GR_COMBINE_ADD: return GR_K_SUM;
        case GR_COMBINE_MUL: return GR_K_PROD;
        case GR_COMBINE_MIN: return GR_K_MIN;
        case GR_COMBINE_MAX: return GR_K_MAX;
        case GR_COMBINE_NANMIN: return GR_K_NANMIN;
        case GR_COMBINE_NANMAX: return GR_K_NANMAX;
        case GR_COMBINE_AND: case GR_COMBINE_OR: return -1;
        }
        return -1;
    case GR_MAP_NONZERO:
        return d->combine == GR_COMBINE_ADD ? GR_K_COUNT : d->combine == GR_COMBINE_AND ? GR_K_AND
             : d->combine == GR_COMBINE_OR ? GR_K_OR : -1;
    case GR_MAP_SQUARE: return d->combine == GR_COMBINE_ADD ? GR_K_SUMSQ : -1;
    case GR_MAP_NAN_ZERO: return d->combine == GR_COMBINE_ADD ? GR_K_NANSUM : -1;
    case GR_MAP_ABS:
        return d->combine == GR_COMBINE_ADD ? GR_K_ASUM : d->combine == GR_COMBINE_MAX ? GR_K_ABSMAX : -1;
    }
    return -1;
}

/* The kinds whose loops are order-dependent where the accumulator is a float: they follow the tree. */
static size_t tree_leaf(int kind) {
    switch (kind) {
    case GR_K_SUM: case GR_K_NANSUM: case GR_K_SUMSQ: case GR_K_COUNTED: case GR_K_NORM: case GR_K_ASUM:
        return GR_PW_BLOCK;
    case GR_K_WELFORD: return GR_WELFORD_LEAF;
    case GR_K_PROD: return GR_PROD_LEAF;
    default: return 0;
    }
}

int gr_cpu_kernel_for(const gr_op_desc *op, gr_dtype t, gr_dtype acc, gr_cpu_kernel *k) {
    int kind = kind_of(op, t);
    if (kind < 0) return 0;
    size_t leaf = gr_dtype_is_float(acc) ? tree_leaf(kind) : 0;
    /* a tree loop writes F, the float it sums in: float32 data's own type or float64, else float64 */
    if (leaf && acc != GR_FLOAT64 && !(acc == GR_FLOAT32 && t == GR_FLOAT32)) return 0;
    const gr_cpu_loop *row = leaf ? gr_cpu_tree_row(t, acc) : gr_cpu_exact_row(t);
    if (!row || !row[kind]) return 0;
    *k = (gr_cpu_kernel){row[kind], leaf, op, t, acc};
    return 1;
}
