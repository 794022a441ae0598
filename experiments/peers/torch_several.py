"""PyTorch's times for issue 24's several-results table (experiments/several_bench.lua reads them).

Six statistics of 2^28 float32 elements (uniform in [-1, 1)) as a PyTorch user computes them: six calls
(sum, amin, amax, count_nonzero, mean, std with correction 0), and the fused pair torch.var_mean +
torch.aminmax (plus the sum), each set timed with CUDA events around the whole set, the median of REPS
after 5 warm-ups. Prints "float32 <case> ms" lines.
    python3 experiments/peers/torch_several.py [log2n] [reps]
"""
import sys

from cuda_events import median_ms, peer_start

LOG2N, REPS, torch = peer_start()


def six(x):
    return (torch.sum(x), torch.amin(x), torch.amax(x), torch.count_nonzero(x), torch.mean(x),
            torch.std(x, correction=0))


def fused(x):
    v, m = torch.var_mean(x, correction=0)
    lo, hi = torch.aminmax(x)
    return torch.sum(x), v, m, lo, hi


def main():
    n = 1 << LOG2N
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, n = 2^{LOG2N}, "
          f"medians of {REPS} after 5 warm-ups (CUDA events)")
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    for name, f in (("six_calls", six), ("var_mean_aminmax_sum", fused), ("sum", torch.sum)):
        print(f"float32 {name} {median_ms(torch, lambda: f(x), REPS):.4f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
