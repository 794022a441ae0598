/*
 * column_folds.cu -- the column kernel's data pass (cuda/device/columns.cuh) for a few ops and dtypes,
 * alone in one file, so that ptxas's registers and spills, and the PTX of a fold, can be read in seconds
 * where columns.cu, every op and dtype, takes about 15 minutes on two cores. Nothing runs: compile it.
 *   nvcc -std=c++17 -O3 -arch=sm_90 -Iengine -cubin -Xptxas -v experiments/tuning/column_folds.cu \
 *       -o /tmp/column_folds.cubin                      (registers and spills of each kernel)
 *   nvcc -std=c++17 -O3 -arch=sm_90 -Iengine -ptx experiments/tuning/column_folds.cu -o /tmp/column_folds.ptx
 *                                                       (count div.rn or branches per kernel, e.g.)
 * The kernels are named fold<op, element, accumulator, staged>: the unstaged pass serves wide columns,
 * middle axes and rows that go to the column kernel; the staged one narrow columns (column_staged).
 * Issue 23's "Folds that know their place" (docs/performance.md) quotes these counts.
 */
#include "../../cuda/host/launch.cuh"
#include "../../cuda/device/columns.cuh"
#include "../../cuda/device/results.cuh"

using namespace gr;

template <int E, class In, class Acc, bool kStaged>
__global__ void __launch_bounds__(kColThreads) fold(ColArgs a) {
    using Op = typename OpOf<E, In, Acc>::type;
    columns_body<Result<result_kind(E), Op, In>, Op, In, true, kStaged>(a);
}

/* sum, max, argmax and var of float32 and bfloat16, each with both passes */
#define GR_FOLDS(E, In, Acc)                                                                               \
    template __global__ void fold<E, In, Acc, false>(ColArgs);                                             \
    template __global__ void fold<E, In, Acc, true>(ColArgs);
GR_FOLDS(GR_SUM, float, float)
GR_FOLDS(GR_SUM, bf16, float)
GR_FOLDS(GR_MAX, float, float)
GR_FOLDS(GR_MAX, bf16, bf16)
GR_FOLDS(GR_ARGMAX, float, float)
GR_FOLDS(GR_ARGMAX, bf16, bf16)
GR_FOLDS(GR_VAR, float, float)
GR_FOLDS(GR_VAR, bf16, float)
