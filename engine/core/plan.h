/*
 * plan.h -- the one planner (plan.c): from options to a run -- the kernel that runs the passes, and the
 * passes themselves -- and the interface every such kernel offers.
 *
 * Three kinds of kernel run a reduction's passes, and the planner is the only place that chooses among
 * them or knows them apart:
 *   - a catalogue row's kernel (its gr_kernel, or its host function), and for segments the policy's
 *     segmented kernel: a built-in op (op_pass.c);
 *   - a compiled image (image.c): a user operator's kernels, or a user kernel's (gr.kernel);
 *   - the exact kernel of opts.determinism = "gpu_to_gpu" (exact_pass.c), on the device or the host.
 * exec.c, reduce.c, streamed.c, segments.c and graphs.c run whatever was chosen through gr_pass_kernel.
 *
 * What gr.plan shows is the gr_plan in gr.h; a gr_run holds it and what the engine needs to run it.
 */
#ifndef GR_PLAN_H
#define GR_PLAN_H

#include "core/handles.h"
#include "base/launch.h"
#include "core/policy.h"
#include "ops/ops.h"

typedef struct gr_run gr_run;

/* The kernel that runs a run's passes. A method a kind has no use for is NULL, and the planner never
 * chooses that kind where it would be called (a compiled image has no host form; the exact kernel no
 * items form for reduce_many). */
typedef struct gr_pass_kernel {
    /* How a failure's message names it: a format of the variant's name ("variant '%s'"). */
    const char *what;

    /* ---- whole buffers ---- */
    /* Queues one pass on L->stream: L->n elements (with L->partials_in, accumulators of an earlier pass)
     * into L->grid partials at L->out, or, with L->final_out set, one accumulator there. Returns 0 or a
     * CUDA error code, with L->site set. */
    int (*launch)(const gr_run *run, gr_launch *L);
    /* The blocks of a pass over n elements of elem_bytes each at `block` threads. */
    size_t (*grid)(const gr_run *run, size_t n, int block, size_t elem_bytes, const gr_launch_device *dev);
    /* Device scratch a pass over n elements needs besides its partials (NULL: none). */
    size_t (*scratch)(const gr_run *run, size_t n);
    /* 1 when a pass leaves one accumulator whatever its grid (every block adds into it), not a partial
     * per block. */
    int one_accumulator;
    /* Elements the host reads (n of them at in, the first with index `first`) reduced into one
     * accumulator at acc (run->plan.acc_size bytes). */
    gr_status (*host)(gr_context *ctx, const gr_run *run, const void *in, size_t n, uint64_t first, void *acc);
    /* The result of n elements from their one combined accumulator at acc, in pinned memory the device
     * can read (slot: the run's, for what the device computes from it; NULL after the host's own). */
    gr_status (*result)(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                        gr_result *out);
    /* The same from `count` accumulators in host memory, combined in order on the host first. */
    gr_status (*finish)(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count, size_t n,
                        gr_result *out);
    /* Where the host cannot combine the accumulators (run->device_combine): queues the pass of one block
     * that does, as launch() does a pass over partials. */
    int (*combine)(const gr_run *run, gr_launch *L);

    /* ---- segments and reduce_many's items ---- */
    /* How the launch shares k segments of n elements in all out. */
    gr_seg_shape (*shape)(const gr_context *ctx, const gr_run *run, size_t n, size_t k);
    /* Queues the launch of segments.c (L shaped as shape() says); 0 or a CUDA error code, L->site set. */
    int (*segments)(gr_context *ctx, const gr_run *run, gr_seg_launch *L);
    /* The segments of host memory at `in` -- of `size` elements, or between the k + 1 checked bounds --
     * each one's result(s) written as element s of out[0] (and out[1]). */
    gr_status (*segments_host)(gr_context *ctx, const gr_run *run, const void *in, size_t size, const int64_t *bounds,
                               size_t k, gr_buffer *out[2]);
    /* Item i of a launch over items, read back from its results at out0 and out1. */
    gr_result (*item)(const gr_run *run, const void *out0, const void *out1, size_t i);
} gr_pass_kernel;

/* A planned reduction: what it shows, the kernel that runs it, and the layout of its scratch. */
struct gr_run {
    gr_plan plan;
    const gr_pass_kernel *kernel;
    const struct gr_variant_row *row;   /* the registry row whose shape the passes have; NULL for segments and
                                         * gpu_to_gpu */
    const gr_image *image;              /* the image the passes launch, on the run's device, or NULL */
    const gr_image *user;               /* a user operator's image, on the run's device: its result (post) */
    const void *with[GR_MAX_INPUTS - 1];    /* several inputs per segment: the other inputs' data, element for
                                             * element with the first's (gr.dot's host loop reads the second) */
    int nwith;
    gr_user_fold fold;                  /* a user operator's combine on the CPU (the finishes hybrid, host) */
    void *fold_ud;
    int epilogue;                       /* the first pass ends in its own kernel, its value at final_out */
    int raises_flag;                    /* ... and that kernel raises the slot's completion flag itself */
    int device_combine;                 /* accumulators are combined by the kernel's combine() (the host cannot
                                         * run a user operator's reduce) */
    size_t scratch;                     /* the kernel's own device scratch, bytes */
    size_t half_offset, extra_offset;   /* device scratch: [ping-pong half 0 | half 1 | the kernel's own] */
    /* segments: the dtypes of each segment's results, and how many there are; the bytes each item of
     * reduce_many takes at out0 and out1 (a user operator with post: its value in post's kind, 8, at out1) */
    gr_dtype out_dtype[2];
    int results;
    size_t item_bytes[2];
};

/* The first option that names a way of reducing -- "variant", "block", "grid", "finish", "threshold" --
 * or NULL: what the paths that choose their own (segments, reduce_many's one launch, gpu_to_gpu) refuse
 * or step aside for. */
const char *gr_options_way(const gr_options *o);

/* The run of a whole-buffer reduction of n elements of dtype t in memory of kind `where`: the kernel,
 * variant, block, finish and accumulator (auto resolved by the policy), and the passes -- none for an
 * empty input of a built-in op (its result is the op's empty one); the first on the host for a host
 * variant or the host's exact sums. GR_EINVAL naming the option at fault. */
gr_status gr_plan_run(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_run *run);

/* The options each chunk of streamed host data is reduced with -- one pass that ends on the device: the
 * policy's chunk variant, the caller's, an operator's kernel, the exact kernel -- checked the same way on
 * every backend (a script gets the same errors with or without a GPU). */
gr_status gr_plan_chunks(gr_context *ctx, gr_dtype t, const gr_options *o, gr_options *chunks);

/* The run of a segmented reduction (or reduce_many's items) of elements of dtype t: its kernel, op,
 * accumulator and the dtypes of its results. With `device` set the kernels run on ctx's device (a user
 * operator's image is then the copy loaded there); otherwise only the facts are needed. Refuses what
 * does not apply to segments, naming the option. */
gr_status gr_plan_segments(gr_context *ctx, const gr_options *o, gr_dtype t, int device, gr_run *run);

/* Whether reduce_many may reduce its buffers as the items of one launch per dtype: no option names a way
 * of reducing, and the kernel the options call for has an items form. */
int gr_plan_items(const gr_options *o);

/* Where a run's one combined accumulator comes back to: the slot's pinned result area, or, for one larger
 * than that area holds (the exact sums), the slot's pinned partials. */
static inline void *gr_run_value(const gr_run *run, gr_slot *slot) {
    return run->plan.acc_size <= GR_ACC_MAX ? slot->result : slot->host;
}

#endif
