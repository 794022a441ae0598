/*
 * columns.cu -- reductions along an outer axis: the column kernel (cuda/device/columns.cuh) for every
 * op and dtype, and the passes it takes: the first over the data, then, while a column has more than one
 * group of GR_COLUMN_GROUP_ROWS rows, one over the groups' accumulators, alternating between the two
 * halves of the scratch. Results come from the op's accumulator through results.cuh, as the segmented
 * kernel's do, so a column's result has the dtype and meaning of a segment's.
 */
#include "../host/launch.cuh"
#include "../device/columns.cuh"
#include "../device/results.cuh"

namespace {

using gr::u64;

static_assert(gr::kColGroupRows == GR_COLUMN_GROUP_ROWS, "one group size for the kernel and the engine");

template <class W, class Op, class In, bool kData, bool kStaged>
__global__ void __launch_bounds__(gr::kColThreads) columns_kernel(gr::ColArgs a) {
    gr::columns_body<W, Op, In, kData, kStaged>(a);
}

static u64 groups_of(u64 r) { return (r + gr::kColGroupRows - 1) / gr::kColGroupRows; }

/* A pass's block layout from its R, C and pack: the tree as many runs as a group of R has (up to
 * kColTree), the packs side by side filling the block. */
static void shape(gr::ColArgs &x) {
    const u64 runs = (x.R + gr::kColRows - 1) / gr::kColRows;
    x.tree = 1;
    while (x.tree < gr::kColTree && u64(x.tree) < runs) x.tree *= 2;
    const u64 cols = x.pack > 1 ? u64(x.pack) : 1, packs = (x.C + cols - 1) / cols;
    x.tile = 1;
    while (x.tile * x.tree < gr::kColThreads && u64(x.tile) < packs) x.tile *= 2;
}

template <int Kind, class Op, class In, bool kBool> int launch_for(gr_col_launch *L) {
    using R = gr::Result<Kind, Op, In>;
    constexpr bool as_bool = kBool && gr::bool_valued_v<typename Op::acc_t>;
    using W = gr::conditional_t<as_bool, gr::BoolResult<R>, R>;
    using Acc = typename Op::acc_t;
    const cudaStream_t st = (cudaStream_t)L->stream;
    const u64 g1 = groups_of(L->R);
    /* the two halves of the scratch: the first pass's groups, then the second's */
    char *half[2] = {(char *)L->scratch, (char *)L->scratch + (L->A * g1 * L->C * sizeof(Acc) + 255) / 256 * 256};
    gr::ColArgs a = {L->in, L->A, L->R, L->C, (long long)L->sa, (long long)L->sr, (long long)L->sc, L->R, L->out[0],
                     L->out[1], (long long)L->oa, (long long)L->oc, half[0], L->ddof, L->pack, 1, 1, 0};
    auto grid_for = [&](gr::ColArgs &x) {
        shape(x);
        const u64 cols = x.pack > 1 ? u64(x.pack) : 1;
        const u64 packs = (x.C + cols - 1) / cols, tiles = (packs + u64(x.tile) - 1) / u64(x.tile);
        const u64 per_block = gr::kColThreads / (u64(x.tile) * u64(x.tree));
        const u64 blocks = (x.A * groups_of(x.R) + per_block - 1) / per_block * tiles;
        return unsigned(blocks < L->grid ? (blocks ? blocks : 1) : L->grid);
    };
    /* a row of 32 bytes, two vectors (the engine gives it a pack of one vector), is one pack where it is
     * staged (long enough: column_staged) and the op's state for a whole row is light (kRowOf32) */
    if (sizeof(In) >= 2 && a.pack * int(sizeof(In)) == 16 && a.sc == 1 && a.C == u64(2 * a.pack) &&
        a.sr == (long long)a.C && a.R >= u64(gr::kColRows) && gr::kRowOf32<Op, In>)
        a.pack *= 2;
    unsigned grid = grid_for(a);
    a.staged = gr::column_staged(a, int(sizeof(In))) ? 1 : 0;
    if constexpr (gr::may_stage(int(sizeof(In))))       /* column_staged is false for 1- and 16-byte types */
        if (a.staged) columns_kernel<W, Op, In, true, true><<<grid, gr::kColThreads, 0, st>>>(a);
    if (!a.staged) columns_kernel<W, Op, In, true, false><<<grid, gr::kColThreads, 0, st>>>(a);
    int pass = 0;
    for (u64 groups = g1; groups > 1; groups = groups_of(groups)) {
        /* the next pass reads the groups as its rows: A x groups x C accumulators, one column a thread */
        if (cudaError_t e = GR_CHECK_LAUNCH(L); e != cudaSuccess) return e;
        const u64 C = a.C;
        a.in = a.partials;
        a.R = groups;
        a.sa = (long long)(groups * C);
        a.sr = (long long)C;
        a.sc = 1;
        a.pack = 1;
        a.staged = 0;
        a.partials = half[++pass & 1];
        grid = grid_for(a);
        columns_kernel<W, gr::AccInput<Op>, Acc, false, false><<<grid, gr::kColThreads, 0, st>>>(a);
    }
    return GR_CHECK_LAUNCH(L);
}

/* The op's functor and result kind as template arguments, as the segmented kernel takes them. */
template <class In, class Acc, bool kBool> int with_id(gr_col_launch *L) {
    switch (L->op) {
#define GR_COL_OP(E, name)                                                                                 \
    case GR_##E:                                                                                          \
        if constexpr (gr::OpOf<GR_##E, In, Acc>::valid)                                                   \
            return launch_for<gr::result_kind(GR_##E), typename gr::OpOf<GR_##E, In, Acc>::type, In, kBool>(L); \
        else                                                                                              \
            return cudaErrorInvalidValue;
        GR_OP_LIST(GR_COL_OP)
#undef GR_COL_OP
    default: return cudaErrorInvalidValue;
    }
}

template <class In, bool kBool> int with_acc(gr_col_launch *L) {
    switch (L->acc) {
#define GR_COL_ACC(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return with_id<In, GR_DEVICE_TYPE(format, ctype), kBool>(L);
        GR_DTYPE_LIST(GR_COL_ACC)
#undef GR_COL_ACC
    default: return cudaErrorInvalidValue;
    }
}

int launch(gr_col_launch *L) {
    if (L->grid < 1 || L->grid > 0x7fffffff) return cudaErrorInvalidConfiguration;
    switch (L->in_dtype) {
#define GR_COL_IN(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return with_acc<GR_DEVICE_TYPE(format, ctype), GR_##E == GR_BOOL>(L);
        GR_DTYPE_LIST(GR_COL_IN)
#undef GR_COL_IN
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace

extern "C" const gr_col_kernel gr_columns = {launch};
