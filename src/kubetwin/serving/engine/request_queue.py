"""The engine's waiting queue, as vLLM's request_queue.py splits it (vllm/v1/core/sched/request_queue.py):
FCFSRequestQueue (a deque, arrival order; preempted requests go back to the head) and PriorityRequestQueue (a heap on
(priority, arrival_time)); both put requests skipped for a LoRA slot back where they were (`prepend_requests`).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from typing import Protocol

from kubetwin.serving.engine.request import EngineRequest


class RequestQueue(Protocol):
    """What the scheduler and the macro steps use of a waiting queue; iteration is in scheduling order."""

    def add_request(self, s: EngineRequest) -> None: ...
    def prepend_request(self, s: EngineRequest) -> None: ...
    def prepend_requests(self, skipped: list[EngineRequest]) -> None: ...
    def peek_request(self) -> EngineRequest: ...
    def pop_request(self) -> EngineRequest: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[EngineRequest]: ...


class FCFSRequestQueue(deque[EngineRequest]):
    """First come, first served."""

    def add_request(self, s: EngineRequest) -> None:
        self.append(s)

    def prepend_request(self, s: EngineRequest) -> None:
        self.appendleft(s)

    def prepend_requests(self, skipped: list[EngineRequest]) -> None:
        self.extendleft(reversed(skipped))

    def peek_request(self) -> EngineRequest:
        return self[0]

    def pop_request(self) -> EngineRequest:
        return self.popleft()


def _first(item: tuple[tuple[int, float, int], EngineRequest]) -> tuple[int, float, int]:
    return item[0]


class PriorityRequestQueue:
    """vLLM's scheduling_policy "priority": the lowest (priority, arrival_time) first, wherever it came from."""

    __slots__ = ("heap",)

    def __init__(self) -> None:
        self.heap: list[tuple[tuple[int, float, int], EngineRequest]] = []

    def add_request(self, s: EngineRequest) -> None:
        heapq.heappush(self.heap, (s.key, s))

    prepend_request = add_request  # the heap orders a preempted request by its key like any other

    def prepend_requests(self, skipped: list[EngineRequest]) -> None:
        for s in skipped:
            heapq.heappush(self.heap, (s.key, s))

    def peek_request(self) -> EngineRequest:
        return self.heap[0][1]

    def pop_request(self) -> EngineRequest:
        return heapq.heappop(self.heap)[1]

    def clear(self) -> None:
        self.heap.clear()

    def __len__(self) -> int:
        return len(self.heap)

    def __iter__(self) -> Iterator[EngineRequest]:
        return (s for _, s in sorted(self.heap, key=_first))


def create_request_queue(priority: bool) -> RequestQueue:
    """The queue for vLLM's --scheduling-policy: "priority" or "fcfs"."""
    return PriorityRequestQueue() if priority else FCFSRequestQueue()
