"""The gateway's view of a pool: an InferencePool or Service, the Ready model-server pods it selects (endpoints),
and the snapshot of their engines its router picks from. Split from plane.py, which owns the pools' life."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubetwin.serving.engine.core import Engine
from kubetwin.serving.types import EndpointSnapshot, Request
from kubetwin.store.store import Obj

REFRESH_INTERVAL = 0.05  # EPP --refresh-metrics-interval=50ms (GIE pkg/epp/server/options.go, reference 1.9)


@dataclass
class Endpoint:
    """A Ready model-server pod and its engine."""

    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    engine: Engine
    gpus: int
    model: str
    served_names: list[str]
    args: Any = None  # the resolved EngineArgs (vllm:cache_config_info, vllm:lora_requests_info)
    adapters: frozenset[str] = frozenset()  # LoRA adapters the server knows (--lora-modules, with --enable-lora)
    # whether the endpoint picker can read its queue and KV gauges: False for a server that exports none of the
    # names the EPP's engine-type mapping asks for (Triton's vLLM backend; Triton's TensorRT-LLM backend without the
    # engine-type label): its metrics never refresh, so the EPP holds them stale (saturated, zeros to the scorers)
    epp_metrics: bool = True


@dataclass
class Pool:
    """An InferencePool or Service the gateway routes to."""

    kind: str
    namespace: str
    name: str
    selector: dict[str, str]
    router: Any
    holds: bool
    ttl: float
    endpoints: list[Endpoint] = field(default_factory=list)
    snap: EndpointSnapshot | None = None
    snap_time: float = -1.0
    held: dict[int, tuple[Request, str]] = field(default_factory=dict)
    key: str = field(init=False)  # "Kind/namespace/name", read per request: built once
    # what a snapshot copies of the endpoints that never changes while they stay: names, max LoRAs, KV blocks, block
    # size, freshness; rebuilt when the endpoints change (None)
    static: tuple | None = None
    # every endpoint that has been in the pool (pod uid -> endpoint), in the order they joined: the pool's engine
    # counters (prefix-cache hits) sum over these, so a pod that left still counts and a pod the pool never
    # selected does not
    members: dict[str, Endpoint] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.key = f"{self.kind}/{self.namespace}/{self.name}"

    def set_endpoints(self, endpoints: list[Endpoint]) -> None:
        """The pool's endpoints changed: the next pick builds a fresh snapshot (indices follow the new list)."""
        self.endpoints, self.snap, self.static = endpoints, None, None
        for ep in endpoints:
            self.members.setdefault(ep.uid, ep)

    def view(self, now: float) -> EndpointSnapshot:
        """What the router sees at `now`: the engines as of the last tick of its refresh clock, floor(now /
        REFRESH_INTERVAL) x REFRESH_INTERVAL, so 0-50 ms behind, as the EPP's periodic scrape leaves it -- also for the
        first request after a quiet spell (the EPP scrapes whether or not requests come). A twin choice: one clock
        for every endpoint, where the EPP runs one scrape loop per pod."""
        tick = math.floor(now / REFRESH_INTERVAL) * REFRESH_INTERVAL
        if self.snap is None or self.snap_time < tick:
            return self.snapshot(tick)
        return self.snap

    def snapshot(self, now: float) -> EndpointSnapshot:
        """The router's view of the pool's engines as of `now`, a tick of the REFRESH_INTERVAL clock (the caller
        picks it). Every engine is advanced to `now` here, as each refresh reads it (one already past it -- a request
        was routed to it since -- is read as it is). The per-endpoint constants are
        copied once per endpoint set (self.static) and shared by the snapshots until the endpoints change."""
        engines = [ep.engine for ep in self.endpoints]
        if self.static is None:
            self.static = ([ep.name for ep in self.endpoints],
                           np.array([ep.epp_metrics for ep in self.endpoints], dtype=bool),
                           np.array([e.max_loras for e in engines], dtype=np.int64),
                           np.array([e.num_gpu_blocks for e in engines], dtype=np.int64),
                           np.array([e.block_size for e in engines], dtype=np.int64))
        names, fresh, maxl, blocks, bsize = self.static
        # one pass over the engines (a fleet's hundreds, every refresh tick): advance, then read
        waiting, running, kv, active, queued = [], [], [], [], []
        hidden = None if fresh.all() else set(np.flatnonzero(~fresh).tolist())  # the EPP reads no gauges of these
        for i, e in enumerate(engines):
            e.advance(now)
            if hidden is not None and i in hidden:
                waiting.append(0)
                running.append(0)
                kv.append(0.0)
            else:
                waiting.append(e.num_waiting)
                running.append(e.num_running)
                kv.append(e.kv_usage)
            active.append(e.active_loras())
            queued.append(e.waiting_loras())
        self.snap = EndpointSnapshot(names, np.array(waiting, dtype=np.int64), np.array(running, dtype=np.int64),
                                     np.array(kv, dtype=np.float64), fresh, active, queued, maxl, blocks, bsize)
        self.snap_time = now
        return self.snap


def pool_selector(obj: Obj) -> dict[str, str]:
    """The labels a pool selects: InferencePool v1 `selector.matchLabels`, v1alpha2 `selector`, Service `selector`."""
    sel = (obj.get("spec") or {}).get("selector") or {}
    if obj["kind"] == "InferencePool" and isinstance(sel.get("matchLabels"), dict):
        return dict(sel["matchLabels"])
    return {k: v for k, v in sel.items() if isinstance(v, str)}


CRITICALITY_PRIORITY = {"Critical": 1, "Standard": 0, "Sheddable": -1}  # InferenceModel criticality (reference 1.11)


def objective_priority(obj: Obj) -> tuple[str, int]:
    """(the model name requests ask for, priority) of an InferenceModel (its criticality: Critical 1, Standard 0,
    Sheddable -1) or an InferenceObjective (its name, spec.priority). One rule for the twin's data plane and the live
    gateway."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "InferenceModel":
        return spec.get("modelName", ""), CRITICALITY_PRIORITY.get(spec.get("criticality") or "Standard", 0)
    return obj["metadata"]["name"], int(spec.get("priority") or 0)
