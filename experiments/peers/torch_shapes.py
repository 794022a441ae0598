"""PyTorch's times for issue 23's speed table (experiments/shapes.lua reads them with --torch FILE).

The same cases as the Lua lab, on a tensor of 2^log2n elements (uniform in [-1, 1), of each dtype): for each
c = 2^k of --cols the matrix x.view(n // c, c) reduced along dim 0 and dim 1, its transpose x.view(n // c, c).t()
(a strided view, no copy) along both dims, and for each q:r of --mids (log2) the middle dim of
x.view(n // (q r), q, r). Each op is one PyTorch call: sum -> torch.sum(v, dim), max -> torch.amax, min ->
torch.amin, argmax -> torch.max(v, dim) (values and indices, what gpureduce's argmax returns), argmin ->
torch.min(v, dim), mean -> torch.mean, var and std with correction 0 (gr.var's ddof = 0). Each call is timed
with CUDA events, the median of --reps calls after 5 warm-ups.

Prints one line per case,
    torch <dtype> <op> <tag> <axis> <ms>
where tag is 2d:RxC (the matrix), t:RxC (its transpose; axis counts the transposed view's axes) or 3d:PxQxR,
and axis is 1-based as in gpureduce (dim = axis - 1); ms is "-" followed by the reason where the call failed.
Lines starting with # are comments (the versions and the device first). Without torch or without a CUDA
device it prints one comment saying so and exits 0, so that the Lua side still gets a file to read.
    python3 experiments/peers/torch_shapes.py [--log2n 28] [--dtypes float32,bfloat16] [--ops sum,max,argmax,var]
                                              [--cols 1..20] [--mids 10:10,4:4,16:2,2:16,20:4] [--reps 20]
"""
import argparse
import sys

from cuda_events import median_ms

# the Lua lab's defaults (experiments/shapes.lua): keep them the same
DEFAULT_COLS = "1..20"
DEFAULT_MIDS = "10:10,4:4,16:2,2:16,20:4"
WARMUP = 5


def int_list(text):
    """ "1..20" or "1,4,8" (or both): the integers in order, each once. """
    out = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        a, _, b = item.partition("..")
        lo, hi = int(a), int(b or a)
        if lo > hi or lo < 0:
            raise argparse.ArgumentTypeError(f"'{item}' is not an integer or a range a..b")
        out += [k for k in range(lo, hi + 1) if k not in out]
    if not out:
        raise argparse.ArgumentTypeError("empty list")
    return out


def mids_list(text):
    out = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        q, sep, r = item.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"'{item}' is not log2q:log2r (e.g. 10:10)")
        out.append((int(q), int(r)))
    return out


def name_list(text):
    return [x for x in text.replace(" ", "").split(",") if x]


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch's times for experiments/shapes.lua (issue 23).")
    p.add_argument("--log2n", type=int, default=28, help="elements of the tensor, as log2 (default 28)")
    p.add_argument("--dtypes", type=name_list, default=["float32", "bfloat16"], help="default float32,bfloat16")
    p.add_argument("--ops", type=name_list, default=["sum", "max", "argmax", "var"],
                   help="of sum, max, min, argmax, argmin, mean, var, std (default sum,max,argmax,var)")
    p.add_argument("--cols", type=int_list, default=int_list(DEFAULT_COLS),
                   help=f"columns of the 2-D shapes as log2, a..b ranges allowed (default {DEFAULT_COLS})")
    p.add_argument("--mids", type=mids_list, default=mids_list(DEFAULT_MIDS),
                   help=f"3-D shapes reduced along the middle dim, log2q:log2r (default {DEFAULT_MIDS})")
    p.add_argument("--reps", type=int, default=20, help="timed calls per case (default 20)")
    return p.parse_args()


def cases(log2n, cols, mids):
    """(tag, shape of the base view, transposed, axis), in the Lua lab's order."""
    n = 1 << log2n
    out = []
    for k in cols:
        if k >= log2n:
            continue
        r, c = n >> k, 1 << k
        for axis in (1, 2):
            out.append((f"2d:{r}x{c}", (r, c), False, axis))
        for axis in (1, 2):
            out.append((f"t:{r}x{c}", (r, c), True, axis))
    for lq, lr in mids:
        if lq + lr > log2n:
            continue
        p, q, r = n >> (lq + lr), 1 << lq, 1 << lr
        out.append((f"3d:{p}x{q}x{r}", (p, q, r), False, 2))
    return out


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        print("# no torch here: no PyTorch times")
        return 0
    if not torch.cuda.is_available():
        print(f"# torch {torch.__version__} has no CUDA device here: no PyTorch times")
        return 0

    def var(v, d):
        try:
            return torch.var(v, dim=d, correction=0)
        except TypeError:                   # torch before 1.11: no correction=
            return torch.var(v, dim=d, unbiased=False)

    def std(v, d):
        try:
            return torch.std(v, dim=d, correction=0)
        except TypeError:
            return torch.std(v, dim=d, unbiased=False)

    ops = {
        "sum": lambda v, d: torch.sum(v, dim=d),
        "max": lambda v, d: torch.amax(v, dim=d),
        "min": lambda v, d: torch.amin(v, dim=d),
        "argmax": lambda v, d: torch.max(v, dim=d),
        "argmin": lambda v, d: torch.min(v, dim=d),
        "mean": lambda v, d: torch.mean(v, dim=d),
        "var": var,
        "std": std,
    }
    dtypes = {
        "float32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
        "float64": torch.float64,
    }

    def time_ms(f, v, d):
        return median_ms(torch, lambda: f(v, d), args.reps, WARMUP)

    n = 1 << args.log2n
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, n = 2^{args.log2n}, "
          f"medians of {args.reps} after {WARMUP} warm-ups (CUDA events)")
    sys.stdout.flush()
    todo = cases(args.log2n, args.cols, args.mids)
    gen = torch.Generator(device="cuda").manual_seed(23)
    for dtype in args.dtypes:
        tdt = dtypes.get(dtype)
        if tdt is None:
            print(f"# {dtype}: not a dtype this script times")
            continue
        torch.cuda.empty_cache()
        try:
            x = (torch.rand(n, device="cuda", generator=gen) * 2 - 1).to(tdt)
        except RuntimeError as e:            # out of memory, most likely
            print(f"# {dtype}: no tensor of 2^{args.log2n}: {str(e).splitlines()[0][:100]}")
            continue
        for op in args.ops:
            f = ops.get(op)
            for tag, shape, transposed, axis in todo:
                if f is None:
                    print(f"torch {dtype} {op} {tag} {axis} - not an op this script times")
                    continue
                v = x.view(*shape)
                if transposed:
                    v = v.t()
                try:
                    ms = time_ms(f, v, axis - 1)
                    print(f"torch {dtype} {op} {tag} {axis} {ms:.4f}")
                except Exception as e:  # noqa: BLE001 -- the reason is the result
                    print(f"torch {dtype} {op} {tag} {axis} - {type(e).__name__}: {str(e).splitlines()[0][:80]}")
                sys.stdout.flush()
        del x
    return 0


if __name__ == "__main__":
    sys.exit(main())
