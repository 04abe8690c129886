"""The serving engine's layout (issue 18 item 3): the engine core composes its collaborators (scheduler, request
queue, KV layout, decode aggregate, macro steps) instead of inheriting mixins over one set of slots; serving's modules
(in sub-packages since issue 33 item 4) talk through public names only."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import kubetwin.serving
from kubetwin.serving.engine.core import Engine
from kubetwin.serving.engine.output import SchedulerOutput
from kubetwin.serving.engine.request import EngineRequest
from kubetwin.serving.engine.request_queue import FCFSRequestQueue, PriorityRequestQueue, RequestQueue
from kubetwin.serving.types import Request

SERVING = Path(kubetwin.serving.__file__).parent
SERVING_MODULES = {str(p.relative_to(SERVING)): ast.parse(p.read_text(), str(p)) for p in sorted(SERVING.rglob("*.py"))}


def test_engine_core_inherits_nothing() -> None:
    """Collaborators are attributes with their own interface, not base classes sharing the engine's slots."""
    assert Engine.__mro__ == (Engine, object)


def test_serving_modules_import_no_private_names() -> None:
    bad = [f"{name}: from {node.module} import {a.name}" for name, tree in SERVING_MODULES.items()
           for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
           for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert sum(name.startswith("engine/") for name in SERVING_MODULES) >= 8 and bad == []


def test_serving_modules_touch_private_attributes_only_through_self() -> None:
    """Arrivals used to call the data plane's _route; it now asks the public Gateway protocol."""
    bad = [f"{name}:{n.lineno} {ast.unparse(n)}" for name, tree in SERVING_MODULES.items() for n in ast.walk(tree)
           if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
           and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]
    assert bad == []


def _req(uid: int, priority: int = 0, arrival: float = 0.0) -> EngineRequest:
    r = Request(id=uid, arrival=arrival, prompt_tokens=8, output_tokens=2, hashes=(uid,), seg_tokens=(8,),
                priority=priority)
    return EngineRequest(r, uid, 0)


@pytest.mark.parametrize("queue", [FCFSRequestQueue, PriorityRequestQueue])
def test_queue_iterates_in_the_order_it_pops(queue: type[RequestQueue]) -> None:
    """The macro steps read the waiting queue by iterating it and the waiting loop by popping it: the two orders
    must agree after preemptions (prepend_request) and LoRA skips (prepend_requests)."""
    q = queue()
    reqs = [_req(i, priority=i % 3, arrival=float(i)) for i in range(6)]
    for s in reqs[:4]:
        q.add_request(s)
    skipped = [q.pop_request(), q.pop_request()]
    q.prepend_request(reqs[5])
    q.add_request(reqs[4])
    q.prepend_requests(skipped)
    seen = [s.uid for s in q]
    assert q.peek_request().uid == seen[0]
    popped = [q.pop_request().uid for _ in range(len(q))]
    assert popped == seen and sorted(seen) == list(range(6))
    if queue is FCFSRequestQueue:
        assert seen == [0, 1, 5, 2, 3, 4]  # skipped back at the head in their order, the preempted one behind them
    else:
        assert seen == [2, 5, 1, 4, 0, 3]  # highest priority first (vLLM's lower value), then arrival


def test_schedule_returns_vllms_scheduler_output() -> None:
    """schedule() hands the forward pass a SchedulerOutput under vLLM's field names
    (vllm/v1/core/sched/output.py): a 150-token prompt under a 100-token budget is one 100-token prefill chunk."""
    from test_serving_engine import engine, mk

    e, _, _ = engine(budget=100, macro=False)
    e.add(mk(0, 150, 2), 0.0)
    out = e.scheduler.schedule(0.0)
    assert isinstance(out, SchedulerOutput)
    assert {"num_scheduled_tokens", "total_num_scheduled_tokens"} <= {f.name for f in dataclasses.fields(out)}
    assert [(s.req.id, x) for s, x in out.num_scheduled_tokens] == [(0, 100)]
    assert (out.total_num_scheduled_tokens, out.num_decode_aggregate, out.preempted, out.num_lora_loads) == (
        100, 0, False, 0)
    assert out.num_prefill_pairs == 100 * (0 + 100 * 0.5)  # chunk x after c computed tokens: x * (c + x / 2)
