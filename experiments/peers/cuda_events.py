"""What the PyTorch peers share (torch_types.py, torch_dot.py, torch_shapes.py): a call timed with CUDA events."""
import statistics


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
