"""What the PyTorch peers share (torch_types.py, torch_dot.py, torch_several.py, torch_shapes.py): their
[log2n] [reps] arguments, torch itself or a comment that there is none, and a call timed with CUDA events."""
import statistics
import sys


def peer_start():
    """(log2n, reps, torch) from the command line (defaults 28 and 30); without torch prints "# no torch
    here" and exits 0, so that the Lua side still gets a file to read."""
    log2n = int(sys.argv[1]) if len(sys.argv) > 1 else 28
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    try:
        import torch
    except ImportError:
        print("# no torch here")
        sys.exit(0)
    return log2n, reps, torch


def median_ms(torch, call, reps, warmup=5):
    """The median over `reps` calls of call(), each between two CUDA events, after `warmup` untimed calls."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        call()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
