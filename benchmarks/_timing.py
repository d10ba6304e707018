"""How the benchmarks time contenders: in one process, on the current stream, interleaved round robin, each
repetition after an L2 flush, with CUDA events; the median per contender (milliseconds)."""

from __future__ import annotations

import statistics
from typing import Any, Callable


def interleaved_medians(contenders: dict[str, Callable[[], Any]], reps: int, flush: Any, torch: Any) -> dict[str, float]:
    """``flush``: a device tensor larger than twice the L2, zeroed before every timed run."""
    for run in contenders.values():  # warm-up: handles, module loads, plans
        run()
    torch.cuda.synchronize()
    events: dict[str, list] = {name: [] for name in contenders}
    for _ in range(reps):
        for name, run in contenders.items():
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) for s, e in pairs) for name, pairs in events.items()}
