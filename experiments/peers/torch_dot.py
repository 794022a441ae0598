"""PyTorch's times for issue 24's dot table (experiments/dot_bench.lua reads them).

For each dtype: torch.dot and torch.vdot of two vectors of 2^28 elements (uniform in [-1, 1) for the
floats, [-100, 100] for the integers); for float32 and bfloat16, torch.linalg.vecdot of two (2^28 / c, c)
matrices along dim 1 ("rows<c>", c = 32, 256, 4096). Each timed with CUDA events around each call, the
median of REPS calls after 5 warm-ups. Prints "dtype op ms" per case, or "dtype op - why" where PyTorch has no such op, so
that a run without torch still gives the Lua side a file to read.
    python3 experiments/peers/torch_dot.py [log2n] [reps]
"""
import sys

from cuda_events import median_ms, peer_start

LOG2N, REPS, torch = peer_start()

DTYPES = ["float32", "bfloat16", "float16", "float64", "int32", "int8"]
OPS = {"dot": torch.dot, "vdot": torch.vdot}


def time_ms(f, x, y):
    return median_ms(torch, lambda: f(x, y), REPS)


def main():
    n = 1 << LOG2N
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, n = 2^{LOG2N}, "
          f"medians of {REPS} after 5 warm-ups (CUDA events)")
    gen = torch.Generator(device="cuda").manual_seed(7)
    for name in DTYPES:
        tdt = getattr(torch, name)
        torch.cuda.empty_cache()
        if tdt.is_floating_point:
            x = (torch.rand(n, device="cuda", generator=gen) * 2 - 1).to(tdt)
            y = (torch.rand(n, device="cuda", generator=gen) * 2 - 1).to(tdt)
        else:
            x = torch.randint(-100, 101, (n,), device="cuda", generator=gen).to(tdt)
            y = torch.randint(-100, 101, (n,), device="cuda", generator=gen).to(tdt)
        for op, f in OPS.items():
            try:
                print(f"{name} {op} {time_ms(f, x, y):.4f}")
            except Exception as e:   # noqa: BLE001 -- the reason is the result
                print(f"{name} {op} - {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            sys.stdout.flush()
        if name in ("float32", "bfloat16"):
            for cols in (32, 256, 4096):
                xm, ym = x.view(n // cols, cols), y.view(n // cols, cols)
                try:
                    ms = time_ms(lambda p, q: torch.linalg.vecdot(p, q, dim=1), xm, ym)
                    print(f"{name} rows{cols} {ms:.4f}")
                except Exception as e:   # noqa: BLE001
                    print(f"{name} rows{cols} - {type(e).__name__}: {str(e).splitlines()[0][:80]}")
                sys.stdout.flush()
        del x, y


if __name__ == "__main__":
    main()
