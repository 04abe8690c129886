"""The serving data plane: request traces arrive at a gateway, the pool's router picks a model-server pod, the pod's
engine serves the request. Pods join a pool when they are Ready and match its selector, exactly as an InferencePool
or a Service selects its endpoints; they leave when they stop being Ready.

Engines advance lazily: an engine computes its iterations only when something reads it (a request routed to it,
the router's metrics refresh, a sample, the end of the run). The router sees the engines' metrics as of the last
tick of its refresh clock (the EPP's --refresh-metrics-interval, 50 ms; Pool.view), so it lags them by 0-50 ms, as
the real one's periodic scrape does.

With no Ready endpoint an InferencePool holds requests (the EPP's flow control holds them while the first replica
cold-starts, reference section 1.12) until `kubetwin.io/request-ttl` (default 10 min, a twin assumption: the
gateway's own timeout decides this in a real cluster) and then fails them with 503; a Service answers 503 at once
(Envoy's "no healthy upstream"). A pod that stops being Ready (deleted on scale-down, its node preempted) aborts
its in-flight requests, which the gateway answers 503: vLLM's API server does not drain on SIGTERM by default (its
newer --shutdown-timeout, vllm-project/vllm#34730, would; not modelled). A deleted pool fails the requests it holds
with 503 at once, as later arrivals for it; its requests and counters stay in the results.

The pools and their routers' snapshots are in pools.py, a trace's arrivals pump in arrivals.py, the request log in
requestlog.py."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from kubetwin.api.podresources import pod_requests
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.devices.gpuruntime import GpuRuntime
from kubetwin.k8s.conditions import is_condition_true
from kubetwin.k8s.labels import matches
from kubetwin.k8s.names import GKE_ACCELERATOR, GPU
from kubetwin.k8s.units import parse_duration
from kubetwin.serving.dataplane.arrivals import Arrivals
from kubetwin.serving.dataplane.pools import Endpoint, Pool, objective_priority, pool_selector
from kubetwin.serving.dataplane.requestlog import RequestLog
from kubetwin.serving.modelserver import recognize as modelserver
from kubetwin.serving.modelserver import sizing
from kubetwin.serving.modelserver.modelspec import lookup_server_model
from kubetwin.serving.modelserver.triton_args import epp_reads_metrics, pod_configmaps
from kubetwin.serving.router import make_router
from kubetwin.serving.traces import arrays as traces
from kubetwin.serving.types import Request
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

POOL_KINDS = ("InferencePool", "Service")
ROUTER = "kubetwin.io/router"
REQUEST_TTL = "kubetwin.io/request-ttl"
DEFAULT_TTL = 600.0
ACCELERATOR_LABEL = GKE_ACCELERATOR
# Envoy's local replies (source/common/router/router.cc): no endpoint to send to, and an upstream that went away
NO_UPSTREAM = "no healthy upstream"
RESET = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"


class ServingDataPlane:
    """Gateway + routers + model-server engines for every InferencePool and Service that RequestTraces target."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, seed: int,
                 traces: dict[tuple[str, str], traces.TraceArrays], gpus: GpuRuntime | None = None) -> None:
        self.store, self.env, self.events, self.seed = store, env, events, seed
        self.gpus = gpus  # the kubelet's GPU runtime: how much a shared GPU's other tenants slow an engine
        self.traces = traces  # (namespace, name) -> the RequestTrace's requests, loaded before the run
        self.pools: dict[str, Pool] = {}
        self.deleted: dict[str, Pool] = {}  # pools deleted during the run (and not re-created), by key
        self.endpoints: dict[str, Endpoint] = {}  # pod uid -> endpoint
        self._by_name: dict[str, Endpoint] = {}  # pod name -> endpoint, for the precise router's per-pod lookups
        self.retired: list[Endpoint] = []  # endpoints that left: their counters still count
        self.log = RequestLog()
        self._trace_of: dict[int, tuple[str, str]] = {}  # request id -> (trace, pool key) while in flight
        self._next_id = 0
        self.priorities: dict[tuple[str, str], int] = {}  # (namespace, model) -> priority from objectives
        self.targets: dict[tuple[str, str], tuple[list[str], np.ndarray]] = {}  # InferenceModel targetModels
        self._rng = np.random.default_rng(seed)  # the traffic split's draws
        self.pod_gpu_seconds: dict[str, list[float]] = {}  # pod uid -> [bound at, ended at or -1, gpus, $/GPU-s]
        for kind in POOL_KINDS:
            store.watch(kind, self._on_pool)
        store.watch("Pod", self._on_pod)
        store.watch("InferenceModel", self._on_objective)
        store.watch("InferenceObjective", self._on_objective)
        store.watch("RequestTrace", self._on_trace)

    # ---- pools -------------------------------------------------------------------------------------------------
    def _on_pool(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if _headless(obj) and not self._targeted(obj):
            return  # a JobSet's, a LeaderWorkerSet's: no virtual IP, and no trace sends to it (see _start_trace)
        meta = obj["metadata"]
        key = f"{obj['kind']}/{meta.get('namespace') or 'default'}/{meta['name']}"
        if etype == "DELETED":
            pool = self.pools.pop(key, None)
            if pool is not None:  # emptied, so the held requests' TTL timers find nothing left to fail again
                held, pool.held = pool.held, {}
                pool.set_endpoints([])
                self.deleted[key] = pool  # its requests, counters and time series still count in the results
                for req, trace in held.values():
                    self._end(req, trace, key, 503, NO_UPSTREAM)
            return
        if key in self.pools:
            self.pools[key].selector = pool_selector(obj)
            self._resync(self.pools[key])
            return
        ann = meta.get("annotations") or {}
        inference = obj["kind"] == "InferencePool"
        preset = ann.get(ROUTER, "epp" if inference else "round-robin")
        pool = Pool(obj["kind"], meta.get("namespace") or "default", meta["name"], pool_selector(obj),
                    make_router(preset, seed=self.seed + len(self.pools), oracle=self), inference,
                    parse_duration(ann[REQUEST_TTL]) if REQUEST_TTL in ann else DEFAULT_TTL)
        self.pools[key] = pool
        self.deleted.pop(key, None)
        self._resync(pool)

    def _targeted(self, svc: Obj) -> bool:
        """Whether a RequestTrace of the run sends to this Service."""
        meta = svc["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        for trace in self.store.list("RequestTrace"):
            target = (trace.get("spec") or {}).get("target") or {}
            if (target.get("kind") == "Service" and target.get("name") == name
                    and (target.get("namespace") or trace["metadata"].get("namespace") or "default") == ns):
                return True
        return False

    def _resync(self, pool: Pool) -> None:
        if not pool.selector:
            return
        want = sorted((ep for ep in self.endpoints.values()
                       if ep.namespace == pool.namespace and matches({"matchLabels": pool.selector}, ep.labels)),
                      key=lambda e: e.name)
        gone = {e.name for e in pool.endpoints} - {e.name for e in want}
        for name in sorted(gone):
            pool.router.remove(name)
        pool.set_endpoints(want)
        if want and pool.held:
            self.env.after(0, lambda: self._release(pool))

    def _release(self, pool: Pool) -> None:
        held, pool.held = pool.held, {}
        for req, trace in held.values():
            self.route(pool, req, trace)

    # ---- objectives --------------------------------------------------------------------------------------------
    def _on_objective(self, etype: str, obj: Obj, old: Obj | None) -> None:
        """InferenceModel's criticality (Critical 1, Standard 0, Sheddable -1; reference 1.11) or
        InferenceObjective's priority, keyed by the model name requests ask for."""
        ns = obj["metadata"].get("namespace") or "default"
        spec = obj.get("spec") or {}
        model, prio = objective_priority(obj)
        if etype == "DELETED":
            self.priorities.pop((ns, model), None)
            self.targets.pop((ns, model), None)
            return
        self.priorities[(ns, model)] = prio
        targets = [(t["name"], int(t.get("weight") or 1)) for t in spec.get("targetModels") or []]
        if targets:  # InferenceModel.targetModels: the traffic split, usually onto LoRA adapters
            names, weights = zip(*targets, strict=True)
            self.targets[(ns, model)] = (list(names), np.asarray(weights, dtype=float) / sum(weights))

    # ---- pods and engines --------------------------------------------------------------------------------------
    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        status = pod.get("status") or {}
        if pod["spec"].get("nodeName") and uid not in self.pod_gpu_seconds and etype != "DELETED":
            found = self._model_server(pod)
            if found is not None:
                # GPUs of the device plugin, else what its DRA ResourceClaims hold (a MIG device as its share)
                gpus = float(pod_requests(pod).get(GPU, 0)) or (
                    nvidia_dra.pod_gpus(self.store, pod) if pod["spec"].get("resourceClaims") else 0.0)
                gpus *= sizing.group_hosts(pod)  # an LWS leader's server holds its group's GPUs
                self.pod_gpu_seconds[uid] = [self.env.now, -1.0, gpus, self._gpu_price(pod)]
        ready = etype != "DELETED" and status.get("phase") == "Running" and is_condition_true(
            status.get("conditions"), "Ready")
        if uid in self.pod_gpu_seconds and (etype == "DELETED" or status.get("phase") in ("Succeeded", "Failed")):
            if self.pod_gpu_seconds[uid][1] < 0:
                self.pod_gpu_seconds[uid][1] = self.env.now
        if ready and uid not in self.endpoints:
            ep = self._endpoint(pod)
            if ep is not None:
                self.endpoints[uid] = self._by_name[ep.name] = ep
                for pool in self.pools.values():
                    self._resync(pool)
        elif not ready and uid in self.endpoints:
            ep = self.endpoints.pop(uid)
            if self._by_name.get(ep.name) is ep:
                del self._by_name[ep.name]
            for pool in self.pools.values():
                if any(e is ep for e in pool.endpoints):
                    self._resync(pool)
            ep.engine.advance(self.env.now)
            for req in ep.engine.abort_all(self.env.now):
                trace, key = self._trace_of.get(req.id, ("", ""))
                self._end(req, trace, key, 503, RESET)
            self.retired.append(ep)

    def _model_server(self, pod: Obj) -> tuple[int, Any] | None:
        try:
            return modelserver.find_model_server(pod["spec"], configmaps=pod_configmaps(self.store, pod))
        except modelserver.ModelServerError:
            return None  # validation reported the command line; this server never starts

    def _gpu_price(self, pod: Obj) -> float:
        """USD per GPU-second of the node the pod runs on (the node's price shared by its GPUs)."""
        node = self.store.get("Node", "", pod["spec"]["nodeName"]) or {}
        price = float(((node.get("metadata") or {}).get("annotations") or {}).get("kubetwin.io/hourly-price-usd", 0)
                      or 0)
        gpus = int(((node.get("status") or {}).get("capacity") or {}).get(GPU, 0) or 0)
        if not gpus and nvidia_dra.uses_dra((node.get("metadata") or {}).get("labels") or {}):
            # the DRA driver's node advertises no nvidia.com/gpu: its published physical GPUs share the price
            gpus = nvidia_dra.published_gpus(self.store, pod["spec"]["nodeName"])
        return price / 3600 / gpus if gpus else 0.0

    def _endpoint(self, pod: Obj) -> Endpoint | None:
        found = self._model_server(pod)
        if found is None:
            return None
        _, args = found
        meta = pod["metadata"]
        node = self.store.get("Node", "", pod["spec"]["nodeName"]) or {}
        accel = ((node.get("metadata") or {}).get("labels") or {}).get(ACCELERATOR_LABEL)
        spec = lookup_server_model(args.model, args.served_model_name)
        if accel is None or spec is None:
            why = (f"node {pod['spec']['nodeName']} has no GPU" if accel is None
                   else f"model {args.model!r} is not in the twin's model table")
            # an Event is a write: after the watch handler that found it, not during it (store.WriteDuringDispatch)
            self.env.after(0, lambda: self.events.event(pod, "Warning", "ModelServerNotSimulated",
                                                        f"{why}; the pod serves no requests", "kubetwin"))
            return None
        uid = meta["uid"]
        hosts = sizing.group_hosts(pod)  # an LWS leader serves over its group's hosts
        gpus = pod_requests(pod).get(GPU, 0)
        links = sizing.host_links(args, node, hosts, int(gpus)) if hosts > 1 else None
        try:  # the kubelet's cold start ran the same checks (serving.sizing): a server that fails them never gets here
            args, engine = sizing.build_engine(args, spec, accel, sizing.device_of(node, pod, self.store),
                                               self.gpus.slowdown_of(uid) if self.gpus is not None else 1.0,
                                               name=meta["name"], on_finish=self._finished, links=links)
        except ValueError as err:
            msg = str(err)
            self.env.after(0, lambda: self.events.event(pod, "Warning", "ModelServerFailed", msg, "kubetwin"))
            return None
        return Endpoint(meta["name"], meta.get("namespace") or "default", uid, dict(meta.get("labels") or {}),
                        engine, gpus * hosts, args.model,
                        list(args.served_model_name) or [args.model], args,
                        frozenset(lora_names(args.lora_modules)) if args.enable_lora else frozenset(),
                        epp_metrics=epp_reads_metrics(args, meta.get("labels") or {}))

    # ---- requests ----------------------------------------------------------------------------------------------
    def _on_trace(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype == "ADDED":
            self.env.after(0, lambda: self._start_trace(obj))

    def _start_trace(self, obj: Obj) -> None:
        spec = obj["spec"]
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        target = spec["target"]
        key = f"{target.get('kind', 'InferencePool')}/{target.get('namespace') or ns}/{target['name']}"
        if key not in self.pools and target.get("kind") == "Service":
            svc = self.store.get("Service", target.get("namespace") or ns, target["name"])
            if svc is not None and _headless(svc):  # sent to by name: DNS gives the pods, a pool like any Service's
                self._on_pool("ADDED", svc, None)
        arrays = self.traces[(ns, meta["name"])]
        model = spec.get("model", "")
        prio = self.priorities.get((ns, model), int(spec.get("priority") or 0))
        it = traces.requests(arrays, model, priority=prio, start_id=self._next_id)
        self._next_id += len(arrays.arrival)
        req = next(it, None)
        if req is not None:
            req.arrival += self.env.now
            self.env.at(req.arrival, Arrivals(self, it, self.env.now, f"{ns}/{meta['name']}", key, req))

    def route(self, pool: Pool, req: Request, trace: str) -> None:
        """The gateway takes one request for `pool` now: held while the pool has no endpoint (an InferencePool; a
        Service answers 503), else given to the engine of the endpoint the pool's router picks, or answered with the
        router's status when it picks none."""
        now = self.env.now
        if not pool.endpoints:
            if not pool.holds:
                self._end(req, trace, pool.key, 503, NO_UPSTREAM)
                return
            pool.held[req.id] = (req, trace)
            self.env.after(pool.ttl, lambda: self._expire(pool, req.id))
            return
        if self.targets and pool.holds and req.lora is None:
            split = self.targets.get((pool.namespace, req.model))
            if split is not None:  # the EPP rewrites the request's model to one of the InferenceModel's targets
                req.lora = req.target = split[0][int(self._rng.choice(len(split[0]), p=split[1]))]
        snap = pool.view(now)
        decision = pool.router.pick(req, snap, now)
        i = decision.index
        if i is None:
            self._end(req, trace, pool.key, decision.status, decision.reason)
            return
        ep = pool.endpoints[i]
        if req.lora is not None and req.lora in ep.served_names:
            req.lora = None  # the target is the base model itself
        elif req.lora is not None and req.lora not in ep.adapters:
            # vLLM answers an unknown model (no such adapter: LoRA off, or not in --lora-modules) with 404,
            # "The model `X` does not exist." (vllm/entrypoints/openai/serving_engine.py _check_model)
            req.pod = ep.name
            self._end(req, trace, pool.key, 404, f"The model `{req.lora}` does not exist.")
            return
        self._trace_of[req.id] = (trace, pool.key)
        req.pod = ep.name
        ep.engine.advance(now)
        ep.engine.add(req, now)
        if req.status != 400:  # a request longer than max_model_len is answered 400 at once (on_finish logged it)
            # the index into the snapshot just picked from (its names are the pool's endpoints): the router need
            # not search its name list for ep.name
            pool.router.routed(req, i)

    def _expire(self, pool: Pool, rid: int) -> None:
        held = pool.held.pop(rid, None)
        if held is not None:
            self._end(held[0], held[1], pool.key, 503, "request timed out in queue")

    def match_tokens(self, req: Request, endpoint: str) -> int:
        """The precise-prefix oracle: what the named pod's KV cache holds of the request now (KV events)."""
        ep = self._by_name.get(endpoint)
        return ep.engine.match_tokens(req) if ep is not None else 0

    def _finished(self, req: Request) -> None:
        """An engine's on_finish: the request is done (or answered 400); the router and the log learn of it."""
        trace, key = self._trace_of.pop(req.id, ("", ""))
        pool = self.pools.get(key)
        if pool is not None:
            pool.router.finished(req, req.pod)
        self.log.add(req, trace, key)

    def _end(self, req: Request, trace: str, key: str, status: int, reason: str) -> None:
        req.status, req.finish, req.reason = status, self.env.now, reason
        self._trace_of.pop(req.id, None)
        self.log.add(req, trace, key)

    # ---- the end -----------------------------------------------------------------------------------------------
    def finish(self, until: float) -> None:
        """Advance every engine to the end; requests still held or in flight are logged with status 0."""
        for ep in self.endpoints.values():
            ep.engine.advance(until)
        for pool in self.pools.values():
            for req, trace in pool.held.values():
                self.log.add(req, trace, pool.key)
            pool.held = {}
        for ep in self.endpoints.values():
            for req in ep.engine.abort_all(until):
                trace, key = self._trace_of.pop(req.id, ("", ""))
                req.status = 0
                self.log.add(req, trace, key)

    def all_pools(self) -> dict[str, Pool]:
        """Every pool the run had, by key, sorted: those that exist and those deleted during the run."""
        return dict(sorted({**self.deleted, **self.pools}.items()))

    def no_route(self, req: Request, trace: str, key: str) -> None:
        """The trace's target does not exist (yet, or any more): Envoy's "no healthy upstream"."""
        self._end(req, trace, key, 503, NO_UPSTREAM)

    def all_endpoints(self) -> list[Endpoint]:
        return [*self.retired, *self.endpoints.values()]


def lora_names(modules: list[str]) -> list[str]:
    """Adapter names from --lora-modules: `name=path` or the JSON form `{"name": ..., "path": ...}`."""
    out = []
    for m in modules:
        if m.lstrip().startswith("{"):
            try:
                out.append(str(json.loads(m)["name"]))
            except (ValueError, KeyError, TypeError):
                continue
        else:
            out.append(m.split("=", 1)[0])
    return out


def _headless(obj: Obj) -> bool:
    """A headless Service (clusterIP None): kube-proxy gives it no virtual IP to balance requests over; a client
    that names it resolves the pods' own addresses."""
    return obj["kind"] == "Service" and (obj.get("spec") or {}).get("clusterIP") == "None"
