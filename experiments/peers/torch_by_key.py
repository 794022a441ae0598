"""PyTorch's times for issue 25's reductions by key (the peer of experiments/tuning/cub_by_key.cu).

n = 2^26 float32 values uniform in [-1, 1) summed into K bins by int32 keys, K = 2^4, 2^8, ..., 2^24, keys
in two distributions, drawn here on the GPU (the same distributions as cub_by_key, not the same numbers):
    uniform   every key in [0, K) equally likely
    zipf      key = floor(K^u) - 1 with u uniform in [0, 1) (log-uniform: key 0 takes log_K 2 of the pairs),
              clamped to [0, K - 1]
Each case times torch.zeros(K).index_add_(0, keys, values) and torch.zeros(K).scatter_reduce_(0, keys,
values, "sum"), in the default mode and under torch.use_deterministic_algorithms(True); the keys are made
int64 (what both ops take) once, outside the timing. Each the median of REPS calls after 5 warm-ups, CUDA
events around each call. Prints "dist log2K op mode ms" per case, or "dist log2K op mode - why" where the
op fails, so that a run without torch still gives a file to read.
    python3 experiments/peers/torch_by_key.py [log2n] [reps]      (defaults 26 and 20)
"""
import sys

from cuda_events import median_ms, peer_start

LOG2N, REPS, torch = peer_start()
# peer_start's defaults (28, 30) are the other tables'; issue 25's are 2^26 pairs and 20 repetitions.
if len(sys.argv) <= 1:
    LOG2N = 26
if len(sys.argv) <= 2:
    REPS = 20

DISTS = ["uniform", "zipf"]
LOG2KS = [4, 8, 12, 16, 20, 24]
MODES = {"default": False, "deterministic": True}


def make_keys(dist, log2k, n, gen):
    """int32 keys in [0, 2^log2k) of the named distribution."""
    k = 1 << log2k
    if dist == "uniform":
        return torch.randint(0, k, (n,), device="cuda", generator=gen, dtype=torch.int32)
    # float64 so that u * log2k keeps its low bits up to K = 2^24
    u = torch.rand(n, device="cuda", generator=gen, dtype=torch.float64)
    return (torch.exp2(u * log2k).floor() - 1).clamp_(0, k - 1).to(torch.int32)


def ops(k, keys, values):
    return {
        "index_add": lambda: torch.zeros(k, device="cuda").index_add_(0, keys, values),
        "scatter_reduce": lambda: torch.zeros(k, device="cuda").scatter_reduce_(0, keys, values, "sum"),
    }


def time_mode(call, deterministic):
    """The median of call() with deterministic algorithms on or off, the previous setting restored after."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(deterministic)
    try:
        return median_ms(torch, call, REPS)
    finally:
        torch.use_deterministic_algorithms(before)


def main():
    n = 1 << LOG2N
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, n = 2^{LOG2N} float32 values, "
          f"medians of {REPS} after 5 warm-ups (CUDA events)")
    gen = torch.Generator(device="cuda").manual_seed(7)
    values = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    for dist in DISTS:
        for log2k in LOG2KS:
            torch.cuda.empty_cache()
            keys = make_keys(dist, log2k, n, gen).to(torch.int64)
            for op, call in ops(1 << log2k, keys, values).items():
                for mode, deterministic in MODES.items():
                    try:
                        print(f"{dist} {log2k} {op} {mode} {time_mode(call, deterministic):.4f}")
                    except Exception as e:   # noqa: BLE001 -- the reason is the result
                        print(f"{dist} {log2k} {op} {mode} - {type(e).__name__}: {str(e).splitlines()[0][:80]}")
                    sys.stdout.flush()
            del keys


if __name__ == "__main__":
    main()
