"""The twin's KEDA and HPA controllers deciding live: real replica processes scaled by the code `kubetwin run`
simulates (issue 20).

Shape: rather than re-deriving KEDA's and the HPA's decisions in a second implementation, the supervisor runs the
twin's own `KedaController` and `HorizontalPodAutoscalerController` unchanged over a private in-memory API server
(`Store`) whose clock is the wall clock: every tick the clock is moved to the seconds elapsed since the start, so
KEDA's scale loop runs every pollingInterval (scale_handler.go), the HPA every sync period, and activation,
cooldownPeriod, minReplicaCount 0, AverageValue, tolerance and behavior/stabilization all act exactly as in a
simulated run (one implementation; the controllers and the run folders they write are untouched). The supervisor
plays the parts Kubernetes plays around them:

- **Prometheus**: every scrape interval it scrapes the gateway's /metrics (--metrics-url) and each replica's,
  adding the target labels Prometheus' kubernetes_sd_configs relabelling gives (`namespace`, `pod`, `instance`;
  a scraped label of the same name is kept as `exported_<name>`, honor_labels false) and an `up` series; a series
  that disappears, or whose target is gone, gets a staleness marker (prometheus/staleness.py). KEDA's trigger
  query is evaluated over these samples by `prometheus.promql.Evaluator`, as in the twin.
- **The ReplicaSet and the kubelet**: Deployment spec.replicas, written by KEDA or the HPA, is the number of
  replica processes (any command template with {port}; default the emulator). A new process joins the endpoints
  file (one host:port per line, which the gateway re-reads) only once GET /health answers 200 (a readiness
  probe); a process to stop leaves the file first and is signalled after --drain seconds (the endpoints removal
  then SIGTERM of pod termination). Unready replicas are removed first, then the newest (ReplicaSet's
  getPodsToDelete ranking, simplified). Each replica process dies with the supervisor (PR_SET_PDEATHSIG: a
  `kill -9` of the supervisor leaves none running; a command that forks leaves its own children to its own care).
  Deployment status.replicas/readyReplicas and one Pod object per replica are kept in the store, so the HPA's
  AverageValue divides by the replicas the ReplicaSet has, as upstream.
- **kubectl get events**: every Event the controllers record is printed as it happens, in KEDA's and the HPA's own
  words ("Scaled apps/v1.Deployment default/x from 0 to 1, triggered by demand", "New size: 3; reason: ...").
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from kubetwin.api.loader import Manifest, load_paths
from kubetwin.autoscaler.hpa import SYNC_PERIOD, HorizontalPodAutoscalerController
from kubetwin.autoscaler.keda import KedaController
from kubetwin.live.lifetime import preexec_die_with_parent
from kubetwin.live.scrape import parse_exposition
from kubetwin.prometheus import storage
from kubetwin.prometheus.staleness import STALE_NAN, is_stale
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPONENT = "kubetwin-supervisor"
# the emulator (kubetwin emulate vllm), through this interpreter so no PATH is needed
DEFAULT_COMMAND = (shlex.quote(sys.executable) + " -m kubetwin.cli.main emulate vllm --host 127.0.0.1 --port {port} "
                   "--model {model}")
Labels = dict[str, str]


class SupervisorError(ValueError):
    """A scenario or flag the supervisor cannot run (printed without a traceback)."""


# ---- Prometheus ----


class ScrapedMetrics:
    """A MetricsProvider (prometheus.promql) over live scrapes: samples per series, staleness markers when a series
    or its target goes away, samples older than `retention` seconds dropped."""

    def __init__(self, retention: float = 3600.0) -> None:
        self.retention = retention
        self._series: dict[str, dict[tuple[tuple[str, str], ...], tuple[Labels, list[tuple[float, float]]]]] = {}
        self._by_target: dict[str, set[tuple[str, tuple[tuple[str, str], ...]]]] = {}

    def add_scrape(self, target: str, t: float, samples: list[tuple[str, Labels, float]] | None,
                   target_labels: Labels) -> None:
        """One scrape of `target` at t: its samples with the target labels, or None when the scrape failed."""
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        up = [] if samples is None else samples
        for name, labels, value in [*up, ("up", {}, 0.0 if samples is None else 1.0)]:
            full = {(f"exported_{k}" if k in target_labels else k): v for k, v in labels.items()}
            full.update(target_labels)
            key = tuple(sorted(full.items()))
            self._series.setdefault(name, {}).setdefault(key, (full, []))[1].append((t, value))
            seen.add((name, key))
        for name, key in self._by_target.get(target, set()) - seen:  # gone from this scrape: stale
            self._append(name, key, t, STALE_NAN)
        self._by_target[target] = seen
        self._prune(t)

    def drop_target(self, target: str, t: float) -> None:
        """The target is gone (its replica stopped): every series it had ends with a staleness marker."""
        for name, key in self._by_target.pop(target, set()):
            self._append(name, key, t, STALE_NAN)

    def _append(self, name: str, key: tuple[tuple[str, str], ...], t: float, v: float) -> None:
        entry = self._series.get(name, {}).get(key)
        if entry is not None and entry[1] and not is_stale(entry[1][-1][1]):
            entry[1].append((t, v))

    def _prune(self, t: float) -> None:
        cut = t - self.retention
        for by_key in self._series.values():
            for _, samples in by_key.values():
                del samples[:bisect_left(samples, (cut,))]  # time-ordered: one slice, not one pop(0) a sample

    def series(self, name: str, start: float, end: float) -> list[tuple[Labels, list[tuple[float, float]]]]:
        """MetricsProvider.series over the scraped samples (prometheus.storage, as the twin's Prometheus reads)."""
        return storage.select(self._series, name, start, end)


def scrape(client: httpx.Client, url: str) -> list[tuple[str, Labels, float]] | None:
    try:
        return parse_exposition(client.get(url).raise_for_status().text)
    except (httpx.HTTPError, ValueError):
        return None


# ---- replicas ----


@dataclass
class Replica:
    name: str
    port: int
    proc: subprocess.Popen
    started: float
    ready: bool = False
    drain_until: float | None = None  # set when it left the endpoints file; stopped once this passes

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Options:
    command: str = DEFAULT_COMMAND  # {port}, {host}, {name}, {model} are filled in
    endpoints_file: Path = Path("endpoints.txt")
    metrics_urls: Sequence[str] = ()  # the gateway's /metrics
    tick: float = 1.0  # the loop's period (seconds): health checks, clock moves, process changes
    scrape_interval: float = 15.0  # Prometheus' scrape_interval
    hpa_sync_period: float = SYNC_PERIOD
    hpa_downscale_stabilization: float = 300.0
    drain: float = 2.0  # seconds between leaving the endpoints file and SIGTERM
    stop_grace: float = 10.0  # SIGTERM to SIGKILL
    health_path: str = "/health"
    metrics_path: str = "/metrics"
    log: Callable[[str], None] = print
    extra_env: dict[str, str] = field(default_factory=dict)


class Supervisor:
    """One ScaledObject's (or HPA's) target Deployment run as local processes, scaled by the twin's controllers."""

    def __init__(self, manifests: list[Manifest], opts: Options, scaled_object: str | None = None) -> None:
        self.opts = opts
        self.env = Environment()
        start = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.store = Store(self.env, 0, start)
        self.events = EventRecorder(self.store)
        self.metrics = ScrapedMetrics()
        self.keda = KedaController(self.store, self.env, self.events, self.metrics)
        self.hpa = HorizontalPodAutoscalerController(self.store, self.env, self.events, self.metrics,
                                                     sync_period=opts.hpa_sync_period,
                                                     downscale_stabilization=opts.hpa_downscale_stabilization)
        self.replicas: list[Replica] = []
        self._n = 0
        self._t0 = time.monotonic()
        self._next_scrape = 0.0
        self._client = httpx.Client(timeout=httpx.Timeout(2.0))
        self.store.watch("Event", self._on_event)
        self.deployment, self.scaler = self._objects(manifests, scaled_object)
        ns = self.deployment["metadata"].get("namespace") or "default"
        self.ns, self.name = ns, self.deployment["metadata"]["name"]
        self.model = _model_arg(self.deployment)
        self.store.create(self.deployment)
        self.store.create(self.scaler)
        self._write_endpoints()

    # -- setup --------------------------------------------------------------------------------------
    @staticmethod
    def _objects(manifests: list[Manifest], scaled_object: str | None) -> tuple[Obj, Obj]:
        """The scaler (a ScaledObject, else an HPA; the one named when several) and its target Deployment."""
        scalers = [m.obj for m in manifests if m.kind in ("ScaledObject", "HorizontalPodAutoscaler")]
        if scaled_object is not None:
            scalers = [s for s in scalers if s["metadata"].get("name") == scaled_object]
        scalers.sort(key=lambda s: s["kind"] != "ScaledObject")
        if not scalers:
            raise SupervisorError("no ScaledObject or HorizontalPodAutoscaler" + (
                f" named {scaled_object!r}" if scaled_object else "") + " in the manifests")
        so = _in_namespace(scalers[0])
        ns = so["metadata"]["namespace"]
        ref = (so.get("spec") or {}).get("scaleTargetRef") or {}
        dep = next((m.obj for m in manifests if m.kind == (ref.get("kind") or "Deployment")
                    and m.obj["metadata"].get("name") == ref.get("name")
                    and (m.obj["metadata"].get("namespace") or "default") == ns), None)
        if dep is None or dep["kind"] != "Deployment":
            raise SupervisorError(f"{so['kind']}/{so['metadata']['name']}: its scaleTargetRef "
                                  f"{ref.get('kind') or 'Deployment'}/{ref.get('name')} is not a Deployment in the "
                                  "manifests")
        return _in_namespace(dep), so

    # -- clock --------------------------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self._t0

    def step(self) -> None:
        """One tick: scrape when due, move the controllers' clock to now, follow spec.replicas with processes."""
        now = self.now()
        if now >= self._next_scrape:
            self._scrape(now)
            self._next_scrape = now + self.opts.scrape_interval
        self.env.run(now)
        self._follow()

    def run(self, duration: float | None = None, stop: Callable[[], bool] = lambda: False) -> None:
        """Tick until `duration` seconds have passed or `stop()`; every replica is stopped on the way out."""
        try:
            while not stop() and (duration is None or self.now() < duration):
                self.step()
                time.sleep(max(0.0, self.opts.tick - (self.now() % self.opts.tick)))
        finally:
            self.close()

    # -- Prometheus ---------------------------------------------------------------------------------
    def _scrape(self, now: float) -> None:
        for i, url in enumerate(self.opts.metrics_urls):
            inst = url.split("//", 1)[-1].split("/", 1)[0]
            self.metrics.add_scrape(url, now, scrape(self._client, url),
                                    {"namespace": self.ns, "pod": f"gateway-{i}", "instance": inst})
        for r in self.replicas:
            if r.drain_until is None and r.proc.poll() is None:
                url = f"http://{r.address}{self.opts.metrics_path}"
                self.metrics.add_scrape(r.name, now, scrape(self._client, url),
                                        {"namespace": self.ns, "pod": r.name, "instance": r.address})

    # -- the ReplicaSet and the kubelet ---------------------------------------------------------------
    def _follow(self) -> None:
        now = self.now()
        for r in list(self.replicas):
            if r.drain_until is not None:
                if now >= r.drain_until:
                    self._stop(r)
                continue
            if r.proc.poll() is not None:  # exited on its own: gone; the next pass starts a replacement
                self.opts.log(f"{self._ts()} Warning BackOff Pod/{r.name}: process exited with code "
                              f"{r.proc.returncode}")
                self._remove(r)
                continue
            if not r.ready and self._healthy(r):
                r.ready = True
                self._write_endpoints()
                self._pod(r)
                self.opts.log(f"{self._ts()} Normal Ready Pod/{r.name}: {r.address} passed {self.opts.health_path}"
                              f" after {now - r.started:.1f}s; added to {self.opts.endpoints_file}")
        dep = self.store.get("Deployment", self.ns, self.name) or self.deployment
        want = int((dep.get("spec") or {}).get("replicas", 1))
        live = [r for r in self.replicas if r.drain_until is None]
        for _ in range(want - len(live)):
            self._start()
        if len(live) > want:
            # ReplicaSet getPodsToDelete (controller_utils.go ActivePodsWithRanks): not-ready pods first, then the
            # most recently started
            victims = sorted(live, key=lambda r: (r.ready, -r.started))[:len(live) - want]
            for r in victims:
                r.drain_until = now + self.opts.drain
            self._write_endpoints()
            for r in victims:
                self.metrics.drop_target(r.name, now)
                self.opts.log(f"{self._ts()} Normal Killing Pod/{r.name}: removed from {self.opts.endpoints_file}, "
                              f"stopping in {self.opts.drain:g}s")
                self.store.delete("Pod", self.ns, r.name)
        self._status()

    def _start(self) -> None:
        self._n += 1
        port = free_port()
        name = f"{self.name}-{self._n}"
        cmd = self.opts.command.format(port=port, host="127.0.0.1", name=name, model=self.model)
        proc = subprocess.Popen(shlex.split(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=preexec_die_with_parent(),  # a kill -9 of the supervisor takes it along
                                env={**os.environ, **self.opts.extra_env})
        r = Replica(name, port, proc, self.now())
        self.replicas.append(r)
        self._pod(r)
        self.opts.log(f"{self._ts()} Normal Started Pod/{name}: {cmd} (pid {proc.pid})")

    def _healthy(self, r: Replica) -> bool:
        try:
            return self._client.get(f"http://{r.address}{self.opts.health_path}", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def _stop(self, r: Replica) -> None:
        """SIGTERM to the replica's process group, SIGKILL after stop_grace."""
        if r.proc.poll() is None:
            try:
                os.killpg(r.proc.pid, signal.SIGTERM)
                r.proc.wait(self.opts.stop_grace)
            except subprocess.TimeoutExpired:
                os.killpg(r.proc.pid, signal.SIGKILL)
                r.proc.wait(5)
            except ProcessLookupError:
                pass
        self._remove(r)

    def _remove(self, r: Replica) -> None:
        if r in self.replicas:
            self.replicas.remove(r)
        self.metrics.drop_target(r.name, self.now())
        self.store.delete("Pod", self.ns, r.name)
        self._write_endpoints()

    def close(self) -> None:
        """Every replica out of the endpoints file, then stopped (also on errors and Ctrl-C)."""
        for r in self.replicas:
            r.drain_until = 0.0
        self._write_endpoints()
        for r in list(self.replicas):
            self._stop(r)
        self._client.close()

    def _write_endpoints(self) -> None:
        lines = sorted(r.address for r in self.replicas if r.ready and r.drain_until is None)
        path = self.opts.endpoints_file
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"{a}\n" for a in lines))
        os.replace(tmp, path)  # the gateway never reads half a file

    # -- the store's view ---------------------------------------------------------------------------
    def _pod(self, r: Replica) -> None:
        labels = ((self.deployment.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": r.name, "namespace": self.ns,
                                                              "labels": dict(labels)},
               "status": {"phase": "Running", "podIP": "127.0.0.1",
                          "conditions": [{"type": "Ready", "status": "True" if r.ready else "False"}]}}
        cur = self.store.get("Pod", self.ns, r.name)
        if cur is None:
            self.store.create(pod)
        else:
            self.store.update({**cur, "status": pod["status"]})

    def _status(self) -> None:
        live = [r for r in self.replicas if r.drain_until is None]
        ready = sum(r.ready for r in live)
        status = {"replicas": len(live), "readyReplicas": ready, "availableReplicas": ready,
                  "updatedReplicas": len(live)}
        cur = self.store.get("Deployment", self.ns, self.name)
        if cur is not None and cur.get("status") != status:
            self.store.update({**cur, "status": status})

    def _ts(self) -> str:
        return self.store.timestamp(int(self.now()))

    def _on_event(self, etype: str, ev: Obj, old: Obj | None) -> None:
        """kubectl get events, one line per Event as the controllers record it."""
        inv = ev.get("involvedObject") or {}
        count = f" (x{ev['count']})" if ev.get("count", 1) > 1 else ""
        self.opts.log(f"{ev.get('lastTimestamp')} {ev.get('type')} {ev.get('reason')} {inv.get('kind')}/"
                      f"{inv.get('name')}: {ev.get('message')}{count}")

    def replicas_wanted(self) -> int:
        dep = self.store.get("Deployment", self.ns, self.name) or {}
        return int((dep.get("spec") or {}).get("replicas", 1))


def _in_namespace(obj: Obj) -> Obj:
    """The object with metadata.namespace set (default), as the API server stores a namespaced object."""
    return {**obj, "metadata": {**obj["metadata"], "namespace": obj["metadata"].get("namespace") or "default"}}


def _model_arg(dep: Obj) -> str:
    """The first container's --model argument (vLLM's), for the {model} placeholder."""
    containers = (((dep.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    args = [*(containers[0].get("command") or []), *(containers[0].get("args") or [])]
    for i, a in enumerate(args):
        if a == "--model" and i + 1 < len(args):
            return str(args[i + 1])
        if str(a).startswith("--model="):
            return str(a).split("=", 1)[1]
    return ""


def supervisor_for(paths: Sequence[str | Path], opts: Options, scaled_object: str | None = None) -> Supervisor:
    return Supervisor(load_paths(list(paths)), opts, scaled_object)
