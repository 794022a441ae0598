"""PyTorch's times for issue 22's speed table (experiments/types_bench.lua reads them).

For each dtype and op of the table: the op on 2^28 elements (uniform in [-1, 1), as the Lua side draws
them), timed with CUDA events around each call, the median of REPS calls after 5 warm-ups. Prints one
line per case, "dtype op ms" (ms = "-" where PyTorch has no such op for the dtype; the line then says
why), so that a run without torch still gives the Lua side a file to read.
    python3 experiments/peers/torch_types.py [log2n] [reps]
"""
import sys

from cuda_events import median_ms, peer_start

LOG2N, REPS, torch = peer_start()

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3": getattr(torch, "float8_e4m3fn", None),
    "float8_e5m2": getattr(torch, "float8_e5m2", None),
    "int16": torch.int16,
    "float32": torch.float32,
}

# The op as a gpureduce user names it, and PyTorch's nearest one-call equivalent. absmax is the infinity
# norm (one fused kernel in PyTorch); the workaround column is what an FP8 user writes today.
OPS = {
    "sum": lambda x: torch.sum(x),
    "max": lambda x: torch.amax(x),
    "mean": lambda x: torch.mean(x),
    "var": lambda x: torch.var(x),
    "argmax": lambda x: torch.argmax(x),
    "norm": lambda x: torch.linalg.vector_norm(x),
    "absmax": lambda x: torch.linalg.vector_norm(x, ord=float("inf")),
    "absmax_via_float": lambda x: x.float().abs().amax(),
    "sum_via_float": lambda x: x.float().sum(),
}

CASES = [(d, o) for d in ("float16", "bfloat16", "float32")
         for o in ("sum", "max", "mean", "var", "argmax", "norm", "absmax")]
CASES += [(d, o) for d in ("float8_e4m3", "float8_e5m2")
          for o in ("absmax", "sum", "max", "absmax_via_float", "sum_via_float")]
CASES += [("int16", "sum"), ("int16", "max")]


def time_ms(f, x):
    return median_ms(torch, lambda: f(x), REPS)


def main():
    n = 1 << LOG2N
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, n = 2^{LOG2N}, "
          f"medians of {REPS} after 5 warm-ups (CUDA events)")
    gen = torch.Generator(device="cuda").manual_seed(7)
    base = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    made = {}
    for dtype, op in CASES:
        tdt = DTYPES[dtype]
        if tdt is None:
            print(f"{dtype} {op} - no such dtype in this torch")
            continue
        if dtype not in made:
            made.clear()
            torch.cuda.empty_cache()
            made[dtype] = (base * 100).round().to(tdt) if dtype == "int16" else base.to(tdt)
        x = made[dtype]
        try:
            ms = time_ms(OPS[op], x)
            print(f"{dtype} {op} {ms:.4f}")
        except Exception as e:   # noqa: BLE001 -- the reason is the result (NotImplementedError for FP8)
            print(f"{dtype} {op} - {type(e).__name__}: {str(e).splitlines()[0][:80]}")
        sys.stdout.flush()


main()
