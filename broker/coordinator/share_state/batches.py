"""How a share partition's state batches combine when new ones are written over stored ones
(Kafka's PersisterStateBatchCombiner).

A state batch is ``(first offset, last offset, delivery state, delivery count)``. Batches below
the start offset go (one that straddles it is cut at it); where batches overlap, each offset
keeps the batch that is furthest along: the higher delivery count, then the higher state
(AVAILABLE 0 < ACKNOWLEDGED 2 < ARCHIVED 4), whichever was written first; contiguous runs with
the same state and count become one batch. The work follows the number of batches, never the
number of offsets they span.
"""
from __future__ import annotations

import heapq
from typing import Iterable

Batch = tuple  # (first_offset, last_offset, delivery_state, delivery_count)


def combine(so_far: Iterable[Batch], new: Iterable[Batch], start_offset: int) -> list[Batch]:
    """The batches of ``so_far`` and ``new`` combined, from ``start_offset`` on (-1: no
    pruning), sorted by offset."""
    batches = []
    for first, last, state, count in (*so_far, *new):
        if last < first:
            continue
        if start_offset != -1:
            if last < start_offset:
                continue
            first = max(first, start_offset)
        batches.append((first, last, state, count))
    if len(batches) < 2:
        return batches
    # sweep the offsets: at each boundary, the winning batch among those covering it
    bounds = sorted({b[0] for b in batches} | {b[1] + 1 for b in batches})
    by_first = sorted(batches)
    active: list = []   # heap of (-count, -state, last)
    out: list[list] = []
    i = 0
    for n, at in enumerate(bounds[:-1]):
        while i < len(by_first) and by_first[i][0] <= at:
            first, last, state, count = by_first[i]
            heapq.heappush(active, (-count, -state, last))
            i += 1
        while active and active[0][2] < at:
            heapq.heappop(active)
        if not active:
            continue
        count, state = -active[0][0], -active[0][1]
        end = bounds[n + 1] - 1
        if out and out[-1][1] == at - 1 and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = end
        else:
            out.append([at, end, state, count])
    return [tuple(b) for b in out]
