"""Timing launch plans on the device: CUDA events around each run, L2 flushed before each (a memset larger than
twice the L2), several plans interleaved round-robin so that none always runs first."""

from __future__ import annotations

from typing import Any, Callable

Steps = list[Callable[[], None]]  # the callables that enqueue one run of a plan on the stream


class EventTimer:
    """Events and the L2 flush buffer of one stream (see the module)."""

    def __init__(self, cuda: Any, stream: Any, l2_bytes: int, flush_l2: bool, max_reps: int) -> None:
        self.cuda = cuda
        self.stream = stream
        self.flush_words = max(2 * l2_bytes, 64 << 20) // 4
        self.flush = cuda.mem_alloc(self.flush_words * 4) if flush_l2 else None
        self.events = [(cuda.Event(), cuda.Event()) for _ in range(max(max_reps, 64))]

    def time(self, plans: list[Steps], reps: int) -> list[list[float]]:
        """Event-timed repetitions of each plan, interleaved; L2 flushed before each."""
        cuda, stream = self.cuda, self.stream
        samples: list[list[float]] = [[] for _ in plans]
        while len(self.events) < len(plans):
            self.events.append((cuda.Event(), cuda.Event()))
        pairs_per_round = len(plans)
        rounds_per_sync = max(1, len(self.events) // pairs_per_round)
        done = 0
        while done < reps:
            batch = min(rounds_per_sync, reps - done)
            used = []
            for r in range(batch):
                order = list(range(len(plans)))
                shift = (done + r) % len(plans)
                order = order[shift:] + order[:shift]  # rotate: no plan always runs first
                for i in order:
                    start, end = self.events[len(used)]
                    if self.flush is not None:
                        cuda.memset_d32_async(self.flush, 0, self.flush_words, stream)
                    start.record(stream)
                    for step in plans[i]:
                        step()
                    end.record(stream)
                    used.append((i, start, end))
            used[-1][2].synchronize()
            for i, start, end in used:
                samples[i].append(end.time_since(start))
            done += batch
        return samples
