"""Assemble a run: manifests -> store -> controllers -> clock -> run folder. Also the notebook API."""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kubetwin.api import kinds, twin
from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.loader import Manifest
from kubetwin.api.twin import ScenarioSpec
from kubetwin.autoscaler import computeclass
from kubetwin.autoscaler.capacity import CapacityModel
from kubetwin.autoscaler.cluster_autoscaler import ClusterAutoscaler
from kubetwin.autoscaler.hpa import HorizontalPodAutoscalerController
from kubetwin.autoscaler.keda import KedaController
from kubetwin.autoscaler.nodepool import NodePoolController
from kubetwin.autoscaler.provreq import ProvisioningRequestController
from kubetwin.autoscaler.reservations import Reservations
from kubetwin.autoscaler.spot import SpotPreemptionController
from kubetwin.catalog import storage as storage_catalog
from kubetwin.changes.controller import ChangeController
from kubetwin.controllers import admission, nodelifecycle
from kubetwin.controllers.attachdetach import AttachDetachController
from kubetwin.controllers.garbagecollector import GarbageCollector
from kubetwin.controllers.job import JobController
from kubetwin.controllers.jobset import JobSetController
from kubetwin.controllers.kubelet import Kubelet
from kubetwin.controllers.lws import LeaderWorkerSetController
from kubetwin.controllers.namespace import NamespaceController
from kubetwin.controllers.nodelifecycle import NodeLifecycleController
from kubetwin.controllers.podgc import PodGC
from kubetwin.controllers.pytorchjob import PyTorchJobController
from kubetwin.controllers.replicaset import ReplicaSetController
from kubetwin.controllers.trainer import TrainJobController
from kubetwin.controllers.ttlafterfinished import TTLAfterFinishedController
from kubetwin.controllers.volumes import PersistentVolumeController, StorageProtectionController
from kubetwin.devices.dra import convert as dra_convert
from kubetwin.devices.dra.allocator import Features
from kubetwin.devices.dra.claims import ResourceClaimController
from kubetwin.devices.dra.dranet import DranetDriver
from kubetwin.devices.dra.nvidia import NvidiaDraDriver
from kubetwin.importer import sources as import_sources
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.k8s.units import parse_duration
from kubetwin.kueue import config as kueue_config
from kubetwin.report import historyindex as history_index
from kubetwin.report.historylog import HistoryLog, dump_text
from kubetwin.report.metrics import Metrics
from kubetwin.scheduler.scheduler import Scheduler
from kubetwin.serving import install as serving_install
from kubetwin.sim.apiclient import ApiClient, ClientBuilder
from kubetwin.sim.env import Environment
from kubetwin.sim.gcpause import no_cyclic_gc
from kubetwin.sim.historyfile import ZSTD_SUFFIX
from kubetwin.sim.outputs import Contribution, Subsystem
from kubetwin.sim.trace import FILE as TRACE_FILE
from kubetwin.sim.trace import SchedulingTrace
from kubetwin.store.events import EventRecorder
from kubetwin.store.eventttl import EventTTL
from kubetwin.store.store import Obj, Store
from kubetwin.validation import namespaces
from kubetwin.validation.validate import unknown_custom_kind, validate, with_overrides
from kubetwin.workloads import install as training_install

CREATE_AT, DELETE_AT = "kubetwin.io/create-at", "kubetwin.io/delete-at"
KUEUE_GROUP = "kueue.x-k8s.io/"


class ObjectVersion(NamedTuple):
    """One entry of a run's history: when, the watch event type (ADDED / MODIFIED / DELETED) and the object."""

    time: float
    type: str
    object: Obj


class RecordedEvent(NamedTuple):
    """One Event object of a run as `kubectl get events` lists it: when it was first recorded, its last version
    (count and lastTimestamp after the EventCorrelator's aggregation)."""

    first_seen: float
    event: Obj

    @property
    def reason(self) -> str:
        return str(self.event["reason"])

    @property
    def message(self) -> str:
        return str(self.event["message"])


@dataclass
class RunResult:
    """What a run produced; tables come as pandas DataFrames, history queries as lists of versions."""

    summary: dict[str, Any]
    timeseries: dict[str, Any]
    history: list[tuple[float, int, str, Obj]] | HistoryLog  # written to the run folder as it went, with `out`
    notices: list[Diagnostic] = field(default_factory=list)
    pod_rows: list[dict] = field(default_factory=list)
    out: Path | None = None
    metrics_text: bytes | None = None  # Prometheus exposition of the controllers' metrics (Kueue's)
    training: dict[str, Any] | None = None  # training.json: per training job, spec, placement, breakdown, advice
    scheduling_trace: str | None = None  # scheduling-trace.jsonl, when the run traced scheduling (sim/trace.py)
    # requests.csv: its chunks not yet written or joined, the text once read, whether the run folder holds it
    _csv_chunks: Iterator[str] | None = field(default=None, repr=False)
    _csv_text: str | None = field(default=None, repr=False)
    _csv_in_folder: bool = field(default=False, repr=False)

    @property
    def requests_csv(self) -> str | None:
        """requests.csv, one row per inference request, when the scenario serves any. A run with a folder streamed
        it there (a fleet's is GBs as one string) and this reads it back, once, when asked; without a folder the
        chunks are joined, once."""
        if self._csv_text is None:
            if self._csv_in_folder:
                assert self.out is not None
                self._csv_text = (self.out / "requests.csv").read_text()
            elif self._csv_chunks is not None:
                self._csv_text, self._csv_chunks = "".join(self._csv_chunks), None
        return self._csv_text

    def requests(self) -> Any:
        """The serving requests (requests.csv) as a DataFrame; empty when the scenario serves none."""
        import io

        import pandas as pd

        labels = {c: str for c in ("trace", "pool", "pod", "model", "reason")}  # text, even when all empty
        return pd.read_csv(io.StringIO(self.requests_csv), dtype=labels) if self.requests_csv else pd.DataFrame()

    def versions(self, kind: str, name: str | None = None, *, prefix: str = "", namespace: str | None = None,
                 until: float | None = None) -> list[ObjectVersion]:
        """Every version of the objects of `kind` (named `name`, or whose name starts with `prefix`), in order."""
        return [ObjectVersion(t, etype, o) for t, _, etype, o in self.history
                if o["kind"] == kind and (until is None or t <= until)
                and (o["metadata"]["name"] == name if name is not None else o["metadata"]["name"].startswith(prefix))
                and (namespace is None or o["metadata"].get("namespace") == namespace)]

    def last(self, kind: str, name: str | None = None, *, prefix: str = "", namespace: str | None = None,
             at: float | None = None) -> Obj:
        """The object as it last was (at time `at`, or at the end), before any deletion; LookupError if never."""
        found = [v.object for v in self.versions(kind, name, prefix=prefix, namespace=namespace, until=at)
                 if v.type != "DELETED"]
        if not found:
            raise LookupError(f"no {kind} {name if name is not None else prefix + '*'} in the run's history")
        return found[-1]

    def first_time(self, kind: str, pred: Callable[[Obj], bool], name: str | None = None, *, prefix: str = "",
                   namespace: str | None = None) -> float | None:
        """When an object of `kind` (as versions() selects them) first satisfied pred; None if never."""
        return next((v.time for v in self.versions(kind, name, prefix=prefix, namespace=namespace)
                     if v.type != "DELETED" and pred(v.object)), None)

    def recorded_events(self, reason: str | None = None, *, involved: str | None = None) -> list[RecordedEvent]:
        """The run's Events (with this reason, about the object named `involved`), one per Event object."""
        first: dict[str, float] = {}
        latest: dict[str, Obj] = {}
        for t, _, etype, o in self.history:
            if o["kind"] != "Event" or etype == "DELETED" or (reason is not None and o["reason"] != reason):
                continue
            if involved is not None and o["involvedObject"]["name"] != involved:
                continue
            first.setdefault(o["metadata"]["name"], t)
            latest[o["metadata"]["name"]] = o
        return [RecordedEvent(first[n], latest[n]) for n in first]

    def _frame(self, rows: list[dict]) -> Any:
        import pandas as pd

        return pd.DataFrame(rows)

    def pods(self) -> Any:
        return self._frame(self.pod_rows)

    def events(self) -> Any:
        rows = {}
        for t, _, etype, o in self.history:
            if o["kind"] == "Event" and etype != "DELETED":
                rows[o["metadata"]["name"]] = {"time": t, "type": o["type"], "reason": o["reason"],
                                               "object": f"{o['involvedObject']['kind']}/{o['involvedObject']['name']}",
                                               "message": o["message"], "count": o["count"]}
        return self._frame(list(rows.values()))

    def timeseries_frame(self) -> Any:
        df = {"t": self.timeseries["t"], "pending_pods": self.timeseries["pending_pods"]}
        for pool, vals in self.timeseries["gpu_allocation_pct"].items():
            df[f"gpu_allocation_pct[{pool}]"] = vals
        return self._frame([dict(zip(df, row, strict=True)) for row in zip(*df.values(), strict=True)])


def _scenario_manifest(manifests: list[Manifest]) -> Manifest | None:
    return next((m for m in manifests
                 if m.kind == "Scenario" and str(m.obj.get("apiVersion", "")).startswith("kubetwin.io/")), None)


def _scenario(manifests: list[Manifest]) -> ScenarioSpec:
    m = _scenario_manifest(manifests)
    return ScenarioSpec.model_validate(m.obj.get("spec") or {}) if m is not None else ScenarioSpec()


def _scenario_name(manifests: list[Manifest]) -> str | None:
    """The Scenario object's metadata.name (report.html's title); None without one, or for the Scenario only the
    command line's flags made (validation.with_overrides: line 0, every field from a flag)."""
    m = _scenario_manifest(manifests)
    if m is None or (m.line == 0 and m.flags):
        return None
    meta = m.obj.get("metadata")
    return str(meta["name"]) if isinstance(meta, dict) and meta.get("name") else None


def _kueue_config(manifests: list[Manifest]) -> kueue_config.KueueConfig | None:
    """The Kueue manager Configuration the scenario gives (kueue-system/kueue-manager-config, or a bare
    Configuration document), None if there is none."""
    return kueue_config.find(manifests)


def run(paths: Sequence[str | Path] | None = None, objects: Sequence[Obj] | None = None, *,
        out: str | Path | None = None, duration: str | None = None, seed: int | None = None,
        progress: Callable[[float, float, Store], None] | None = None, overwrite: bool = False,
        trace_scheduling: bool = False, manifests: Sequence[Manifest] | None = None,
        hold_history: bool = True, validated: bool = False) -> RunResult:
    """Run a scenario from YAML paths and/or object dicts; write the run folder when `out` is given: load (and
    validate), wire the controllers, seed the objects, run the clock, collect the subsystems' contributions.

    `out` must be new or empty unless `overwrite`, which replaces a previous run folder whole (see write_run).
    `trace_scheduling` (as Scenario.spec.traceScheduling) records the schedulers' reasons (sim/trace.py).
    `manifests`: objects already loaded with their files and lines (kubetwin sweep's patched cases), run before
    those of `paths` and `objects`. `hold_history=False` (`kubetwin run`, which reads only the summary after the
    run) keeps none of a run folder's history in memory: RunResult.history and the report read it back from the
    folder (report.historylog). `validated`: the same manifests passed validate already, but for values that
    stay valid (kubetwin simulate's runs differ in the run times they draw): validate is not run again."""
    if out is not None:
        check_out(Path(out), overwrite)
    manifests, diags, scenario = load(paths, objects, duration, seed, trace_scheduling, manifests, check=not validated)
    until = parse_duration(scenario.duration)
    if out is not None and overwrite:
        _remove_run_folder(Path(out))  # the scenario is valid: a run that now fails leaves no stale run behind
    # With a run folder, the history goes to it as the clock runs (report.historylog), into the hidden sibling
    # folder write_run renames into place; a run that fails leaves nothing behind.
    # report.html is built from the versions as they are recorded, not from history.jsonl read back (issue 32).
    # A second core writes the files (report.historyworker): the clock only encodes each version.
    log = HistoryLog(_partial_folder(Path(out)), None if hold_history else 0, scenario.historyCompression,
                     report="html" in scenario.report, worker=True) if out is not None else None
    try:
        cluster = wire(manifests, scenario, until, history=log)
        seed_objects(cluster, manifests)
        # the controllers make no reference cycles while the clock runs (tests/test_run_gc.py holds that)
        with no_cyclic_gc():
            cluster.env.run(until, on_advance=(lambda t: progress(t, until, cluster.store)) if progress else None)
            summary, series, pod_rows = cluster.metrics.finish(until)
            summary["scenario"] = {"name": _scenario_name(manifests), "duration": scenario.duration,
                                   "seed": scenario.seed, "scoringStrategy": scenario.scoringStrategy}
            summary["notices"] = [d.render() for d in diags if d.severity != "error"]  # notices and pitfall warnings
            result = RunResult(summary, series, cluster.store.history, [d for d in diags if d.severity == "notice"],
                               pod_rows)
            result.scheduling_trace = cluster.trace.lines() if cluster.trace is not None else None
            collect(result, [s.contribute(until) for s in cluster.subsystems])
            if out is not None:
                result.out = write_run(Path(out), result, scenario)
    except BaseException:
        if log is not None:
            log.release()
            shutil.rmtree(log.folder, ignore_errors=True)
        raise
    finally:
        if log is not None:
            log.release()
    return result


def load(paths: Sequence[str | Path] | None, objects: Sequence[Obj] | None, duration: str | None,
         seed: int | None, trace_scheduling: bool = False, loaded: Sequence[Manifest] | None = None,
         check: bool = True) -> tuple[list[Manifest], list[Diagnostic], ScenarioSpec]:
    """The manifests with the command line's overrides, their diagnostics and the Scenario; KubetwinError with
    every error when validate rejects them (run accepts exactly what validate accepts; `check=False`: they were
    validated before, the diagnostics are the import report's only)."""
    # a cluster's dump (kubectl, kube-scheduler-simulator, kwokctl) is imported first (importer/), its report as notices
    from_paths, report = import_sources.load(list(paths)) if paths else ([], None)
    manifests = list(loaded or []) + from_paths
    manifests += [Manifest(o, "<object>", 0) for o in objects or []]
    manifests = with_overrides(manifests, duration, seed, trace_scheduling)  # flags checked as the fields they replace
    diags = (report.diagnostics() if report is not None else []) + (validate(manifests) if check else [])
    errors = [d for d in diags if d.severity == "error"]
    if errors:
        raise KubetwinError(errors)
    return manifests, diags, _scenario(manifests)  # with the overrides: validated above as the fields they replace


@dataclass
class Cluster:
    """The wired twin: the clock, the API server, the controllers the runner still needs after wiring, and the
    subsystems that contribute to the outputs (in their order)."""

    env: Environment
    store: Store
    pools: NodePoolController
    scheduler: Scheduler
    metrics: Metrics
    subsystems: list[Subsystem]
    trace: SchedulingTrace | None = None  # Scenario.spec.traceScheduling


def wire(manifests: list[Manifest], scenario: ScenarioSpec, until: float, history: HistoryLog | None = None
         ) -> Cluster:
    """The API server with its admission chain, and every controller, as a cluster runs them (their creation order
    does not change results: tests/test_handler_rules.py). `history`: where the store records every version (a
    run folder's files as they are written); in memory without."""
    env = Environment()
    store = Store(env, scenario.seed, scenario.startTime)
    if history is not None:
        store.history = history
    events = EventRecorder(store)
    EventTTL(store, env)  # the API server deletes an Event an hour after its last write
    names = NameGenerator(scenario.seed)
    store.admit(admission.api_defaults, admission.API_DEFAULTED)
    store.admit(admission.pod_defaults, ("Pod",))
    store.admit(admission.priority(store), ("Pod",))
    store.admit(admission.extended_resource_toleration, ("Pod",))
    store.admit(admission.gke_tpu_worker_env(store), ("Pod",))  # TPU_WORKER_ID / TPU_WORKER_HOSTNAMES
    store.admit(computeclass.admit_pod(store), ("Pod",))  # a class's taint tolerated, a Namespace's default class
    store.admit(nodelifecycle.default_toleration_seconds, ("Pod",))
    store.admit(admission.crd_defaults, tuple(kinds.REGISTRY.custom_kinds()))
    store.admit(dra_convert.to_v1, dra_convert.KINDS)  # stored as resource.k8s.io/v1, as the API server does
    book = Reservations(store)  # Compute Engine reservations (Reservation objects) the pools' VMs consume
    pools = NodePoolController(store, env, scenario.clusterName, events=events, reservations=book)
    NvidiaDraDriver(store, env, names.suffix)
    DranetDriver(store, env, names.suffix)  # RDMA NICs as DRA devices on nodes labelled for GKE's DRANET
    ResourceClaimController(store, names)
    PersistentVolumeController(store, env, events)  # claims bound and provisioned; the GKE Volume Populator
    StorageProtectionController(store, env)  # a deleted claim or volume goes once nothing uses it
    NamespaceController(store, env)  # a deleted namespace's objects go with it
    GarbageCollector(store, env)  # an object whose owners are all gone goes too (background propagation)
    trace = SchedulingTrace(env) if scenario.traceScheduling else None
    scheduler = Scheduler(store, events, scenario.seed, scenario.scoringStrategy,
                          Features.from_gates(dict(scenario.featureGates)), scenario.gpuPlacementPolicy, trace=trace,
                          client=ApiClient("kube-scheduler", *scenario.kubeScheduler.clientConnection.limits(
                              twin.SCHEDULER_QPS, twin.SCHEDULER_BURST)))
    # kube-controller-manager's clients: one per controller (ClientBuilder), --kube-api-qps / --kube-api-burst
    kcm = ClientBuilder("kube-controller-manager", *scenario.kubeControllerManager.clientConnection.limits(
        twin.CONTROLLER_MANAGER_QPS, twin.CONTROLLER_MANAGER_BURST))
    JobController(store, env, events, names, client=kcm.client("job-controller"))
    TTLAfterFinishedController(store, env, client=kcm.client("ttl-after-finished-controller"))
    jobset = JobSetController(store, env, events,
                              restart_job=scenario.jobsetController.featureGates.get("RestartJob", False))
    LeaderWorkerSetController(store, env, events)  # groups of a leader and its workers
    TrainJobController(store, env, events)  # Kubeflow Trainer: a TrainJob's JobSet
    PyTorchJobController(store, env, events)  # the training operator v1: a PyTorchJob's pods
    ReplicaSetController(store, env, events, names, client=kcm.client("replicaset-controller"))
    kubelet = Kubelet(store, env, events)
    kubelet.use_volumes(AttachDetachController(store, env, events))  # containers wait for bound, attached volumes
    NodeLifecycleController(store, env, events)  # taints by the Ready condition, NoExecute eviction
    # pods bound to a node name no Node has; terminated pods past --terminated-pod-gc-threshold
    PodGC(store, env, scenario.kubeControllerManager.terminatedPodGCThreshold, kcm.client("pod-garbage-collector"))
    ca = ClusterAutoscaler(store, env, events, pools, scenario.clusterAutoscaler, CapacityModel(
        store, env, scenario.capacity, scenario.quotas, scenario.seed, book), scenario.seed,
        Features.from_gates(dict(scenario.featureGates)), scenario.clusterAutoscaling)  # idle unless a pool
    # autoscales, node auto-provisioning is on or a ComputeClass auto-creates pools
    ProvisioningRequestController(store, env, events, ca)
    spot = SpotPreemptionController(store, env, events, pools, scenario.seed)  # Spot pools' spotPreemption
    ChangeController(store, env, events)  # Change objects: a patch, cordon, drain, scale ... at a simulated time
    # Kueue is "installed" when the scenario has any Kueue object or its manager Configuration, as a cluster
    # has its CRDs and controller.
    kueue_cfg = _kueue_config(manifests)
    kueue = None
    if kueue_cfg is not None or any(str(m.obj.get("apiVersion", "")).startswith(KUEUE_GROUP) for m in manifests):
        from kubetwin.kueue.controller.core import KueueController  # imported when installed (35 ms of imports)

        kueue = KueueController(store, env, events, config=kueue_cfg, trace=trace)
    metrics = Metrics(store, env, parse_duration(scenario.sampleInterval), samplers=[scheduler])
    serving = serving_install.install(store, env, events, kubelet, manifests, scenario.seed, parse_duration(
        scenario.sampleInterval), until, scenario.clusterName) if serving_install.wanted(manifests) else None
    HorizontalPodAutoscalerController(store, env, events, serving.source if serving is not None else None)
    if serving is not None and any(m.kind == "ScaledObject" for m in manifests):
        KedaController(store, env, events, serving.source)
    if serving is not None or serving_install.has_model_servers(manifests):
        from kubetwin.serving.modelserver.coldstart import cold_start_hook

        kubelet.startup_hooks.append(cold_start_hook(store, kubelet.gpus))
    training = training_install.install(store, env, kubelet, manifests, parse_duration(scenario.sampleInterval),
                                        scenario.startTime, serving.plane if serving is not None else None)
    # training.kubetwin.io/* run times, DCGM gauges of training and serving GPUs (TPU metrics of TPU pods)
    if serving is not None and training is not None and any(
            m.kind in ("ScaledObject", "HorizontalPodAutoscaler") and "DCGM_" in str(m.obj) for m in manifests):
        serving.source.exporters.append(training.dcgm.samples)  # an autoscaler reads DCGM_FI_* (docs/monitoring.md)
    subsystems: list[Subsystem] = [s for s in (scheduler, kcm, jobset, pools, kubelet, spot, kueue, ca, serving,
                                               training) if s is not None]
    return Cluster(env, store, pools, scheduler, metrics, subsystems, trace)


def seed_objects(cluster: Cluster, manifests: list[Manifest]) -> None:
    """The default namespaces, then every manifest's object at its kubetwin.io/create-at time (and its delete-at),
    in the kind registry's creation order, as `kubectl apply` of the folder would."""
    store, env = cluster.store, cluster.env
    for ns in (*namespaces.ALWAYS_CREATED, *namespaces.implicit(manifests)):
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    defined = {m.obj["metadata"]["name"] for m in manifests if m.kind == "StorageClass"}
    for addon in _scenario_addons(manifests):  # the classes an enabled GKE add-on installs (catalog/storage.py)
        for name, cls in storage_catalog.ADDON_STORAGE_CLASSES.get(addon, {}).items():
            if name not in defined:
                store.create(copy.deepcopy(cls))
    objs = sorted((m.obj for m in manifests if m.kind != "Scenario"
                   and not unknown_custom_kind(str(m.obj.get("apiVersion")))),  # validate's notice says so
                  key=lambda o: kinds.create_order(o["kind"]))
    cluster.scheduler.expect(objs)  # e.g. the GPU workload FGD measures fragmentation against
    for obj in objs:
        _schedule_object(store, env, obj)


def _scenario_addons(manifests: list[Manifest]) -> list[str]:
    """Scenario spec.gkeAddons (validated: only add-ons the twin knows)."""
    scenario = next((m.obj for m in manifests if m.kind == "Scenario"), None) or {}
    return [str(a) for a in (scenario.get("spec") or {}).get("gkeAddons") or ()]


def collect(result: RunResult, contributions: list[Contribution]) -> None:
    """Merge the subsystems' contributions into the run's outputs, in their order: summary and time-series sections,
    one metrics.prom (written when any subsystem exports series), requests.csv, training.json."""
    prometheus = [c.prometheus for c in contributions if c.prometheus is not None]
    result.metrics_text = "".join(prometheus).encode() if prometheus else None
    for c in contributions:
        result.summary.update(c.summary)
        result.timeseries.update(c.timeseries)
        result._csv_chunks = c.requests_csv_chunks if c.requests_csv_chunks is not None else result._csv_chunks
        result.training = c.training if c.training is not None else result.training


def _schedule_object(store: Store, env: Environment, obj: Obj) -> None:
    if obj["kind"] == kueue_config.KIND and not (obj.get("metadata") or {}).get("name"):  # a config file has none
        obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "name": kueue_config.DEFAULT_NAME}}
    obj = admission.default_namespace(obj)  # client-side, as kubectl apply fills the context's namespace
    meta = obj.get("metadata") or {}
    ann = meta.get("annotations") or {}
    if obj["kind"] == "Namespace" and store.get("Namespace", "", meta["name"]):
        return
    create_at = parse_duration(ann[CREATE_AT]) if CREATE_AT in ann else 0.0
    env.at(create_at, lambda: store.create(obj))
    if DELETE_AT in ann:
        ns = meta.get("namespace") or ("" if kinds.is_cluster_scoped(obj["kind"]) else "default")
        env.at(parse_duration(ann[DELETE_AT]), lambda: store.delete(obj["kind"], ns, meta["name"]))


# Every file write_run puts in a run folder; --overwrite removes a folder only when it holds nothing else.
RUN_FILES = frozenset({"summary.json", "timeseries.json", "history.jsonl", history_index.INDEX_FILE, "events.jsonl",
                       "history.jsonl" + ZSTD_SUFFIX, "events.jsonl" + ZSTD_SUFFIX,
                       "metrics.prom", "requests.csv", "training.json", "run.json", "report.html", TRACE_FILE})


def _refuse(out: Path, message: str, fix: str) -> KubetwinError:
    return KubetwinError([Diagnostic(str(out), 0, "kubetwin run", "--out", message, fix)])


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse a run folder that would mix two runs' files: `out` must be new or empty, or, with overwrite, hold only
    a previous run's files (never a folder of other things, which --overwrite would delete)."""
    if out.exists() and not out.is_dir():
        raise _refuse(out, "Invalid value: it exists and is not a folder", "choose a new folder for --out")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if not entries:
        return
    foreign = [n for n in entries if n not in RUN_FILES]
    if overwrite and foreign:
        raise _refuse(out, f"Invalid value: not a run folder: it holds {', '.join(foreign[:5])}"
                      f"{' ...' if len(foreign) > 5 else ''}, which kubetwin did not write; --overwrite replaces "
                      "only a previous run folder", "choose another --out, or empty the folder first")
    if not overwrite:
        raise _refuse(out, f"Invalid value: the folder is not empty ({', '.join(entries[:5])}"
                      f"{' ...' if len(entries) > 5 else ''}): this run's files would sit beside files of another "
                      "run", "pass --overwrite (run(..., overwrite=True)) to replace the folder, or choose another "
                      "--out")


def _remove_run_folder(out: Path) -> None:
    """Delete a previous run folder (check_out has seen that it holds only run files)."""
    if out.is_dir():
        shutil.rmtree(out)


def _partial_folder(out: Path) -> Path:
    """A new hidden sibling of `out` (`.NAME.*.partial`) to write the run's files into."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))


def write_run(out: Path, result: RunResult, scenario: ScenarioSpec) -> Path:
    """summary.json, events.jsonl, history.jsonl, history.index, timeseries.json, report.html (and metrics.prom,
    requests.csv, training.json when the run has them), all deterministic.

    The files go to a hidden sibling folder (`.NAME.*.partial`) renamed to `out` once all are written, so a run
    that fails while writing leaves no folder that looks complete (rename(2) is atomic within one file system).
    A run's HistoryLog has written its history there already; a history held in memory is written first."""
    log = result.history if isinstance(result.history, HistoryLog) else None
    if log is None:
        log = HistoryLog(_partial_folder(out), compression=scenario.historyCompression,
                         report="html" in scenario.report)
        for entry in result.history:
            log.append(entry)
    tmp = log.folder
    try:
        log.close()
        _write_files(tmp, result, scenario, out.name, log)
        if out.is_dir():
            out.rmdir()  # empty (check_out) or removed already (overwrite)
        tmp.rename(out)
        log.moved(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write_files(out: Path, result: RunResult, scenario: ScenarioSpec, name: str, log: HistoryLog) -> None:
    """The run's other files in `out` (a temporary folder that holds its history); `name`: the run folder's final
    name, report.html's title."""
    (out / "summary.json").write_text(json.dumps(result.summary, sort_keys=True, indent=2) + "\n")
    (out / "timeseries.json").write_text(dump_text(result.timeseries) + "\n")
    if result.metrics_text is not None:
        (out / "metrics.prom").write_bytes(result.metrics_text)
    if result._csv_chunks is not None:  # a chunk at a time: never the whole text at once
        with (out / "requests.csv").open("w") as f:
            f.writelines(result._csv_chunks)
        result._csv_chunks, result._csv_in_folder = None, True
    if result.scheduling_trace is not None:
        (out / TRACE_FILE).write_text(result.scheduling_trace)
    if result.training is not None:
        (out / "training.json").write_text(json.dumps(result.training, sort_keys=True, indent=1) + "\n")
    (out / "run.json").write_text(dump_text({"startTime": scenario.startTime, "duration": parse_duration(
        scenario.duration)}) + "\n")
    if "html" in scenario.report:
        # From what the log built of the versions as it wrote them (issue 32: not parsed back from the file).
        log.write_report(name)
