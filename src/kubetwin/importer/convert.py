"""A real cluster's objects -> the twin's manifests, with t=0 the snapshot's time (issue 36 item 1).

What the twin must own is stripped (managedFields, resourceVersion, selfLink, creationTimestamp, generation,
finalizers, kubectl's last-applied annotation, status); uids and ownerReferences stay, so owners reconnect: a
ReplicaSet's pods, a Job's pods and a Deployment's ReplicaSet (controllers/replicaset.py finds it by its template,
as FindNewReplicaSet does) are the controllers' own at t=0, and no controller creates a duplicate.

**Nodes.** GKE nodes (label cloud.google.com/gke-nodepool) are grouped into kubetwin NodePools (machine type from
node.kubernetes.io/instance-type, accelerator from cloud.google.com/gke-accelerator and the nvidia.com/gpu
capacity, Spot from cloud.google.com/gke-spot / gke-provisioning, zones from topology.kubernetes.io/zone, nodeCount
per zone = the nodes seen) so cost, Spot and the autoscaler work. The twin's NodePool controller names the VMs it
boots itself (gke-<cluster>-<pool>-<hash>-<suffix>), and bound pods name their node, so the imported nodes stay
the dump's own Node objects, under their own names, with their labels, taints, capacity and allocatable exactly as
dumped; the NodePool carries `kubetwin.io/adopt-nodes: "true"`, and the controller takes them as the pool's first
VMs at t=0 (billed at the pool's price, preempted and scaled down as its own) and boots only the rest of nodeCount
(autoscaler/nodepool.py `_adopt`). Nodes of no GKE pool, or of a machine type the catalog does not know, stay static
Node objects (counted under their pool label, unbilled).

**Pods.** A pod bound to a node (spec.nodeName) that is Pending or Running stays bound: its status is dropped, so
the kubelet starts it on that node at t=0 (a pod with nodeName skips the scheduler, as in Kubernetes). Its remaining
run time: `--remaining-run-time OWNER=DURATION` for its owner when given; else its kubetwin.io/duration less the
time it has run by the snapshot (written as kubetwin.io/elapsed, so the kubelet also checkpoints where it would
have); else, for pods of Jobs and bare pods, the import's default (DEFAULT_REMAINING, or `--remaining-run-time
'*=DURATION'`); pods of ReplicaSets, StatefulSets and DaemonSets run until stopped, as servers do. Unbound pending
pods stay Pending and are scheduled. `--runtime OWNER=DIST` (importer/runtime.py) gives a distribution instead:
it comes after an owner's own --remaining-run-time and before kubetwin.io/duration (a dump of a twin run carries the
run times it realized; the user's distribution is what they know); running pods draw given how long they had run,
a Job not finished and its pending pods share one draw per Job (its template's kubetwin.io/duration), the Jobs of a
JobSet's replicatedJob one with its template, a LeaderWorkerSet's templates one; a rule matches a pod by its
controller and that one's controllers (chain_keys), and `Report.draw(seed)` draws them all again for another
seed. Succeeded and Failed pods keep their status (their Job counts them). Pods on a node the dump does not have are
unbound and scheduled again (a warning says how many).

**Kueue.** Workloads keep their status and come before their jobs: an admitted one holds its quota from t=0 and
Kueue's webhook leaves its job running (kueue/controller/jobframework.py `suspend_queued_unless_admitted`); a
pending one is queued again (kueue/controller/core.py takes in a Workload it did not create).

**DRA.** ResourceSlices and DeviceClasses are kept as dumped (the driver twin publishes only for nodes it sees boot);
an allocated ResourceClaim keeps status.allocation and reservedFor, and a pod keeps status.resourceClaimStatuses (the
claims generated from its templates), so bound pods hold their devices from t=0 and no claim is made twice.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from kubetwin import catalog
from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.autoscaler.nodepool import ADOPT_NODES, GPU_TAINT, node_capacity_type
from kubetwin.devices import tpu
from kubetwin.importer import runtime
from kubetwin.k8s.names import (
    CLUSTER_CREATION_TIMESTAMP,
    GKE_ACCELERATOR,
    GKE_NODEPOOL,
    GPU,
    INSTANCE_TYPE,
    TPU,
    ZONE,
)
from kubetwin.k8s.units import parse_duration

DURATION = "kubetwin.io/duration"
CREATE_AT, DELETE_AT = "kubetwin.io/create-at", "kubetwin.io/delete-at"
ELAPSED = "kubetwin.io/elapsed"  # how long a running pod had run at the snapshot (controllers/kubelet.py reads it)
DEFAULT_REMAINING = 3600.0  # a Job's or bare pod's remaining run time when nothing says it (stated in the report)
TWIN_GROUP = "kubetwin.io/v1alpha1"
DROPPED_META = ("managedFields", "resourceVersion", "selfLink", "creationTimestamp", "generation", "finalizers",
                "deletionGracePeriodSeconds")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
NODE_STATUS = ("capacity", "allocatable", "conditions", "nodeInfo", "addresses")
NODE_INFO = {"machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
             "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture"}  # v1.NodeSystemInfo's required
# Kinds the import drops even though the twin knows them: the run writes its own.
OWN_HISTORY = ("Event",)
# Node label prefixes GKE and Kubernetes set: not the pool's own `labels`.
SYSTEM_PREFIXES = ("kubernetes.io/", "k8s.io/", "cloud.google.com/", "topology.gke.io/", "node.gke.io/",
                   "kubetwin.io/", "addon.gke.io/", "iam.gke.io/", "node_pool", "components.gke.io/")
SERVER_OWNERS = ("ReplicaSet", "StatefulSet", "DaemonSet")
JOBSET_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"  # the JobSet controller's label on its Jobs (constructJob)


@dataclass
class Options:
    """`kubetwin import`'s choices: remaining run time per owner (seconds; key `*` is the default), the snapshot's
    time (RFC 3339; default: the latest time the dump records), run-time distributions per owner (`--runtime`,
    importer/runtime.py; first match wins) and the seed their draws take (`draw` draws again for another)."""

    remaining: dict[str, float] = field(default_factory=dict)
    snapshot_time: str | None = None
    runtime: list[runtime.Rule] = field(default_factory=list)
    seed: int = 0


@dataclass
class Draw:
    """Where a run time is drawn: the annotations it is written to, the uid seeding it, how long the pod had run,
    the distribution (a Job and its pods not yet running share the Job's uid, so they share the draw)."""

    annotations: dict[str, Any]
    uid: str
    ran: float
    dist: runtime.RunTime


def redraw(draws: list[Draw], seed: int) -> None:
    """Write each draw's run time for `seed` into its annotations (kubetwin.io/duration), in place."""
    for d in draws:
        d.annotations[DURATION] = _seconds_text(round(d.dist.draw(runtime.rng(seed, d.uid), d.ran), 3))


@dataclass
class Report:
    """What the import kept, dropped and defaulted, with counts (`kubetwin import` prints it, validate and run
    show it as notices)."""

    formats: Counter[str] = field(default_factory=Counter)  # source format -> files
    kept: Counter[str] = field(default_factory=Counter)  # kind -> objects written
    dropped: list[tuple[int, str]] = field(default_factory=list)  # (count, what and why)
    defaulted: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    snapshot_time: str = ""
    file: str = ""
    replay: list[str] = field(default_factory=list)  # what a kwokctl recording became (importer/replay.py)
    draws: list[Draw] = field(default_factory=list)  # run times drawn from --runtime's distributions

    def draw(self, seed: int) -> None:
        """Draw every --runtime run time again for `seed` (kubetwin simulate, once per run), in place."""
        redraw(self.draws, seed)

    def lines(self) -> list[str]:
        fmt = ", ".join(f"{n} {f} file{'s' if n > 1 else ''}" for f, n in sorted(self.formats.items()))
        out = [f"read: {fmt}; t=0 is {self.snapshot_time}"]
        out.append("kept: " + ", ".join(f"{n} {k}" for k, n in sorted(self.kept.items())))
        out += [f"dropped: {n} {what}" for n, what in self.dropped]
        out += [f"defaulted: {n} {what}" for n, what in self.defaulted]
        return out + self.replay

    def diagnostics(self) -> list[Diagnostic]:
        """The report as validate's notices (one per line), then its warnings."""
        return [Diagnostic(self.file, 0, "-", "", f"import {line}", severity="notice")
                for line in self.lines()] + self.warnings


def _controller(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The object's controller's ownerReference (controller: true), if any."""
    return next((r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")), None)


def as_dict(value: object) -> dict[str, Any]:
    """A field that should be a mapping, or an empty one (validate reports a wrong type at its line)."""
    return value if isinstance(value, dict) else {}


def _ended(raw: dict[str, Any], terminal: tuple[str, ...]) -> bool:
    """Whether a dumped object has one of its terminal conditions True (its conditions as the dump has them: an
    entry that is not a mapping is skipped, validate reports it)."""
    conds = as_dict(raw.get("status")).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") in terminal and c.get("status") == "True" for c in conds)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (_group(str(obj.get("apiVersion", ""))), str(obj.get("kind", "")), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""))


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _times(obj: dict[str, Any]) -> Iterable[datetime]:
    """Every time the object records: its creation, its managers' writes, its status's times."""
    meta = obj.get("metadata") or {}
    status = as_dict(obj.get("status"))
    texts = [meta.get("creationTimestamp"), status.get("startTime"), status.get("completionTime")]
    texts += [e.get("time") for e in meta.get("managedFields") or [] if isinstance(e, dict)]
    for c in status.get("conditions") or []:
        if isinstance(c, dict):
            texts += [c.get("lastTransitionTime"), c.get("lastHeartbeatTime"), c.get("lastUpdateTime")]
    return [t for t in map(parse_time, texts) if t is not None]


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds_text(seconds: float) -> str:
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds:.3f}s"


def _drop_null_timestamps(value: Any) -> Any:
    """Pod templates as the API server prints them carry `creationTimestamp: null`: not a field a user writes. A
    copy (new mappings and lists; scalars are immutable), so the source objects are never changed.

    The copy is orjson's encoding decoded again (C: ~2x faster than copying in Python, a dump's every object is
    copied); the values are a loaded dump's (JSON's: the loaders refuse NaN and infinities, which orjson would
    write as null). What orjson does not encode (a key not a string, an integer past 64 bits) is copied in
    Python."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        return _copy_without_null_timestamps(value)
    out = orjson.loads(data)
    if b'"creationTimestamp":null' in data:  # compact: a key and its null are written so, and only so
        _remove_null_timestamps(out)
    return out


def _copy_without_null_timestamps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_without_null_timestamps(v) for k, v in value.items()
                if not (k == "creationTimestamp" and v is None)}
    if isinstance(value, list):
        return [_copy_without_null_timestamps(v) for v in value]
    return value


def _remove_null_timestamps(value: Any) -> None:
    """In place, on orjson's fresh copy."""
    if isinstance(value, dict):
        if "creationTimestamp" in value and value["creationTimestamp"] is None:
            del value["creationTimestamp"]
        for v in value.values():
            _remove_null_timestamps(v)
    elif isinstance(value, list):
        for v in value:
            _remove_null_timestamps(v)


class _Converter:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.report = Report()
        self.dropped: dict[str, Counter[str]] = defaultdict(Counter)  # why -> kind -> count
        self.defaulted: dict[str, int] = Counter()
        self.by_uid: dict[str, dict[str, Any]] = {}  # the dump's objects by uid (convert fills it)

    def drop(self, why: str, kind: str, n: int = 1) -> None:
        self.dropped[why][kind] += n

    def default(self, what: str, n: int = 1) -> None:
        self.defaulted[what] += n

    # -- metadata ----------------------------------------------------------------------------------------------
    def clean(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "managedFields" in meta:  # dropped below: not copied first (most of a dump)
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
        obj = _drop_null_timestamps(obj)  # a copy: new mappings and lists all the way down
        meta = obj.setdefault("metadata", {})
        self.schedule(obj["kind"] if "kind" in obj else "", meta)
        for k in DROPPED_META:
            meta.pop(k, None)
        ann = meta.get("annotations")
        if isinstance(ann, dict) and LAST_APPLIED in ann:
            del ann[LAST_APPLIED]
            if not ann:
                del meta["annotations"]
        return obj

    def schedule(self, kind: str, meta: dict[str, Any]) -> None:
        """A twin run's own state carries the scenario's kubetwin.io/create-at and delete-at, counted from that run's
        start: the object exists at the snapshot, so it is not created later; its deletion is moved to the same
        instant counted from the snapshot (the run's start is its creationTimestamp less create-at)."""
        ann = as_dict(meta.get("annotations"))
        if CREATE_AT not in ann and DELETE_AT not in ann:
            return
        try:
            create_at = parse_duration(ann.pop(CREATE_AT, 0))
            delete_at = parse_duration(ann[DELETE_AT]) if DELETE_AT in ann else None
        except ValueError:
            return  # validate reports the annotation
        self.default(f"objects of a twin run keep no {CREATE_AT} (they exist at the snapshot)")
        created = parse_time(meta.get("creationTimestamp"))
        if delete_at is not None:
            if created is None:
                del ann[DELETE_AT]
                self.drop(f"{DELETE_AT} of objects without a creationTimestamp to count it from", kind)
            else:
                left = (created.timestamp() - create_at + delete_at) - self.at.timestamp()
                ann[DELETE_AT] = _seconds_text(max(0.0, left))
                self.default(f"{DELETE_AT} counted again from the snapshot")
        if not ann:
            meta.pop("annotations", None)

    # -- the whole import --------------------------------------------------------------------------------------
    def convert(self, dumps: list[Manifest], passthrough: list[Manifest]) -> list[Manifest]:
        at = parse_time(self.options.snapshot_time) if self.options.snapshot_time else None
        if at is None:
            at = max((t for m in dumps for t in _times(m.obj)), default=datetime(2026, 1, 1, tzinfo=UTC))
        self.at = at
        self.report.snapshot_time = rfc3339(at)
        dumps = self.newest(dumps)
        known: list[Manifest] = []
        for m in dumps:
            kind = m.kind
            if kind in OWN_HISTORY:
                self.drop("the run records its own", kind)
            elif kinds.REGISTRY.of(str(m.obj.get("apiVersion", "")), kind) is None:
                self.drop("objects of kinds the twin does not know", kind)
            elif (m.obj.get("metadata") or {}).get("deletionTimestamp"):
                self.drop("being deleted at the snapshot (deletionTimestamp set)", kind)
            else:
                known.append(m)
        nodes = [m for m in known if m.kind == "Node"]
        # a twin run's own state (kubetwin get nodepools,... -o yaml) holds its NodePools: they adopt their nodes
        self.pools_given = {str(m.obj["metadata"].get("name")) for m in known if m.kind == "NodePool"}
        node_names = {str(m.obj["metadata"].get("name")) for m in nodes}
        uids = {str((m.obj.get("metadata") or {}).get("uid")) for m in known}
        self.by_uid = {str(as_dict(m.obj.get("metadata")).get("uid")): m.obj for m in known
                       if as_dict(m.obj.get("metadata")).get("uid")}  # owners up a pod's chain (chain_keys)
        self.pod_uids = {str((m.obj.get("metadata") or {}).get("uid")) for m in known if m.kind == "Pod"}
        out: list[Manifest] = []
        created: dict[int, str] = {}  # the cluster's creation time of each object written
        for m in known:
            if m.kind == "Node":
                continue
            obj = self.pod(m, node_names) if m.kind == "Pod" else self.other(m)
            if obj is None:
                continue
            self.owners(obj, uids)
            out.append(Manifest(obj, m.file, m.line, m.lines, blocks=m.blocks))
            created[id(obj)] = str(as_dict(m.obj.get("metadata")).get("creationTimestamp") or "")
        node_out, pools = self.nodes(nodes)
        namespaces = self.missing_namespaces(out, passthrough)
        first = [m for m in out if m.kind == "Namespace"] + namespaces
        # a Workload before its job: Kueue's webhook leaves a job whose Workload is admitted running; Workloads in
        # the cluster's creation order (all are created at t=0)
        rest = sorted((m for m in out if m.kind != "Namespace"),
                      key=lambda m: (m.kind != "Workload", created.get(id(m.obj), "") if m.kind == "Workload" else ""))
        result = first + node_out + pools + rest
        if not any(m.kind == "Scenario" for m in passthrough):
            where = dumps[0] if dumps else None
            result.insert(0, Manifest({"apiVersion": TWIN_GROUP, "kind": "Scenario", "metadata": {
                "name": "imported"}, "spec": {"startTime": self.report.snapshot_time}},
                where.file if where else "<import>", 0))
        for m in result:
            self.report.kept[m.kind] += 1
        self.finish()
        return result

    def newest(self, dumps: list[Manifest]) -> list[Manifest]:
        """One object per kind/namespace/name: the highest resourceVersion when several sources hold it (kwokctl's
        have none: the later file wins). Differing versions mean the sources were taken at different times."""
        chosen: dict[tuple[str, str, str, str], Manifest] = {}
        gaps = 0
        for m in dumps:
            k = _key(m.obj)
            old = chosen.get(k)
            if old is None:
                chosen[k] = m
                continue
            rv_old, rv_new = (str((x.obj.get("metadata") or {}).get("resourceVersion") or "") for x in (old, m))
            if rv_old != rv_new:
                gaps += 1
            if not (rv_old.isdigit() and rv_new.isdigit() and int(rv_old) > int(rv_new)):
                chosen[k] = m
        if gaps:
            self.report.warnings.append(Diagnostic(
                dumps[0].file, 0, "-", "", f"{gaps} objects appear in more than one source with different "
                "resourceVersions (the sources were taken at different times, a resourceVersion gap): the newest "
                "version of each is kept", "dump every kind in one command (kubectl get a,b,c -A -o yaml) so the "
                "state is one instant", severity="warning"))
        return [m for m in dumps if chosen.get(_key(m.obj)) is m]

    def other(self, m: Manifest) -> dict[str, Any]:
        obj = self.clean(m.obj)
        if m.kind == "NodePool":
            self.spot_schedule(obj, parse_time(as_dict(m.obj.get("metadata")).get("creationTimestamp")))
            ann = obj["metadata"].setdefault("annotations", {})
            if ann.get(ADOPT_NODES) != "true":
                ann[ADOPT_NODES] = "true"
                self.default(f"NodePools of the dump adopt its Nodes labelled with their name ({ADOPT_NODES})")
        if m.kind == "Workload":  # Kueue's state: admitted ones hold their quota and flavors, pending ones queue
            admitted = bool(as_dict(as_dict(obj.get("status")).get("admission")))
            created = as_dict(m.obj.get("metadata")).get("creationTimestamp")
            if created:  # Kueue queues by creation time; the store stamps t=0 on everything the import creates
                obj["metadata"].setdefault("annotations", {})[CLUSTER_CREATION_TIMESTAMP] = str(created)
            self.default("Kueue Workloads keep their status: " + (
                "admitted ones hold their quota and flavors, their jobs run on" if admitted else
                "pending ones are queued again"))
        elif m.kind == "Job":
            self.job_run_time(obj)
        if m.kind == "ResourceClaim" and as_dict(obj.get("status")).get("allocation"):
            self.claim(obj)
        elif m.kind != "Workload" and "status" in obj:
            del obj["status"]
            self.drop("statuses of objects the twin's controllers write again", m.kind)
        if m.kind == "Job":
            self.job_template(obj, m.obj)
        elif m.kind in ("JobSet", "LeaderWorkerSet"):
            self.workload_templates(obj, m.obj)
        return obj

    def job_run_time(self, job: dict[str, Any]) -> None:
        """The pods a Job creates after the snapshot (a pending Job's once Kueue admits it, a running one's next
        completions) run `--remaining-run-time job/NAME` (their whole run: they have not started), else the import's
        default, when its pod template says no kubetwin.io/duration: a dump cannot say how long they run."""
        template = as_dict(as_dict(job.get("spec")).get("template"))
        if not template:
            return
        ann = template.setdefault("metadata", {}).setdefault("annotations", {})
        if DURATION in ann:
            return
        meta = job["metadata"]
        keys = [f"{meta.get('namespace') or 'default'}/job/{meta.get('name')}", f"job/{meta.get('name')}", "*"]
        left = next((self.options.remaining[k] for k in keys if k in self.options.remaining), DEFAULT_REMAINING)
        ann[DURATION] = _seconds_text(left)
        self.default("Jobs' pod templates have no run time: the pods they create from t=0 on run "
                     "--remaining-run-time's for the Job, else the import's default")

    def claim(self, obj: dict[str, Any]) -> None:
        """DRA: an allocated ResourceClaim keeps its allocation (status.allocation: devices.results, the node
        selector) and the pods it is reserved for that the dump holds, so the scheduler's DynamicResources plugin
        counts its devices in use from t=0 and a new claim never gets them; one reserved for no pod of the dump is
        deallocated, as the resourceclaim controller does when its last consumer is gone."""
        status = as_dict(obj["status"])
        reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, dict)]
        kept = [r for r in reserved if r.get("resource") != "pods" or str(r.get("uid")) in self.pod_uids]
        if reserved and not kept:
            del obj["status"]
            self.drop("DRA allocations of ResourceClaims reserved only for pods not in the dump (deallocated)",
                      "ResourceClaim")
            return
        obj["status"] = {k: v for k, v in (("allocation", status["allocation"]),
                                          ("reservedFor", kept)) if v}
        if len(kept) < len(reserved):
            self.drop("ResourceClaims' reservedFor entries of pods not in the dump", "ResourceClaim",
                      len(reserved) - len(kept))
        self.default("DRA ResourceClaims keep their allocation and the pods they are reserved for")

    def spot_schedule(self, pool: dict[str, Any], created: datetime | None) -> None:
        """A twin run's NodePool preempts its Spot VMs at times counted from that run's start (the pool's creation):
        counted again from the snapshot, those already past dropped."""
        sched = as_dict(as_dict(pool.get("spec")).get("spotPreemption")).get("schedule")
        if not isinstance(sched, list) or not sched or created is None:
            return
        elapsed = (self.at - created).total_seconds()
        kept = []
        for step in sched:
            try:
                at = parse_duration(as_dict(step).get("at"))
            except ValueError:
                return  # validate reports it
            if at > elapsed:
                kept.append({**step, "at": _seconds_text(at - elapsed)})
        if len(kept) < len(sched):
            self.drop("Spot preemptions of a twin run's schedule already past at the snapshot", "NodePool",
                      len(sched) - len(kept))
        if kept:
            self.default("scheduled Spot preemptions of a twin run counted again from the snapshot", len(kept))
        pool["spec"]["spotPreemption"]["schedule"] = kept

    # -- pods --------------------------------------------------------------------------------------------------
    def pod(self, m: Manifest, node_names: set[str]) -> dict[str, Any] | None:
        raw = m.obj
        status = as_dict(raw.get("status"))
        phase = status.get("phase") or "Pending"
        obj = self.clean(raw)
        spec = obj.setdefault("spec", {})
        if phase in ("Succeeded", "Failed"):
            self.default(f"{phase} pods keep their status (their Jobs count them)")
            self.image_ids(obj)
            return obj
        obj.pop("status", None)
        if status.get("resourceClaimStatuses"):  # the claims made from its templates: not made twice
            obj["status"] = {"phase": "Pending", "resourceClaimStatuses": status["resourceClaimStatuses"]}
            self.default("pods keep status.resourceClaimStatuses, the ResourceClaims generated for them")
        node = spec.get("nodeName")
        if node and node not in node_names:
            del spec["nodeName"]
            self.report.warnings.append(Diagnostic(
                m.file, m.line_of("spec.nodeName"), m.ref, "spec.nodeName", f"bound to node {node}, which the dump "
                "does not have: the pod is unbound and scheduled again", "dump the nodes too (kubectl get "
                "nodes,pods -A -o yaml)", severity="warning"))
            self.default("pods on nodes not in the dump, unbound and scheduled again")
            node = None
        if not node:
            self.default("Pending pods stay Pending and are scheduled")
            self.pending_pod(obj)
            return obj
        started = parse_time(status.get("startTime"))
        ran = max(0.0, (self.at - started).total_seconds()) if phase == "Running" and started is not None else None
        if ran is not None:  # it starts warm, its work under way (controllers/kubelet.py)
            obj["metadata"].setdefault("annotations", {})[ELAPSED] = _seconds_text(ran)
        self.remaining(obj, ran or 0.0)
        return obj

    def image_ids(self, obj: dict[str, Any]) -> None:
        """v1.ContainerStatus requires imageID (no omitempty; the kubelet writes "" before the image is pulled); a
        twin run's own pods carry none, so its Succeeded pods would not validate: "" as the kubelet's own."""
        status = as_dict(obj.get("status"))
        for key in ("containerStatuses", "initContainerStatuses"):
            for cs in status.get(key) or []:
                if isinstance(cs, dict) and "imageID" not in cs:
                    cs["imageID"] = ""
                    self.default("container statuses without imageID (a twin run's own pods) given imageID \"\"")

    def owner_keys(self, obj: dict[str, Any]) -> tuple[str | None, list[str]]:
        """The pod's controller's kind (None: a bare pod) and the keys --runtime and --remaining-run-time match:
        its controller's, then that one's controllers' (chain_keys)."""
        meta = obj["metadata"]
        ns = str(meta.get("namespace") or "default")
        ctrl = _controller(meta)
        if ctrl is None:
            return None, [f"{ns}/pod/{meta.get('name')}", f"pod/{meta.get('name')}"]
        return str(ctrl.get("kind")), self.chain_keys(obj)

    def chain_keys(self, obj: dict[str, Any]) -> list[str]:
        """NAMESPACE/KIND/NAME and KIND/NAME of the object's controller, then of that one's controller and so on
        up the ownerReferences the dump holds (a JobSet's Job's pods are the JobSet's too; a LeaderWorkerSet's
        worker pods are owned by their leader pod, owned by the LeaderWorkerSet); a ReplicaSet's Deployment by the
        ReplicaSet's name, as it is named, when the dump lacks the ReplicaSet."""
        keys: list[str] = []
        seen: set[str] = set()
        meta = as_dict(obj.get("metadata"))
        ns = str(meta.get("namespace") or "default")
        ctrl = _controller(meta)
        while ctrl is not None and str(ctrl.get("uid")) not in seen:
            seen.add(str(ctrl.get("uid")))
            kind, name = str(ctrl.get("kind")), str(ctrl.get("name"))
            keys += [f"{ns}/{kind.lower()}/{name}", f"{kind.lower()}/{name}"]
            if kind == "ReplicaSet" and "-" in name:  # its Deployment, by the ReplicaSet's name
                dep = name.rsplit("-", 1)[0]
                keys += [f"{ns}/deployment/{dep}", f"deployment/{dep}"]
            ctrl = _controller(as_dict(as_dict(self.by_uid.get(str(ctrl.get("uid")))).get("metadata")))
        return list(dict.fromkeys(keys))

    def job_draw_uid(self, job: dict[str, Any]) -> str:
        """What seeds the draw of a Job's pods not yet running: the Job's uid; a JobSet's Job's, its replicatedJob
        (the JobSet's uid and the replicatedJob's name: the Jobs made from one template share its draw, as the
        JobSet's template itself, see workload_templates)."""
        meta = as_dict(job.get("metadata"))
        ctrl = _controller(meta)
        rjob = as_dict(meta.get("labels")).get(JOBSET_RJOB)
        if ctrl is not None and ctrl.get("kind") == "JobSet" and rjob:
            return f"{ctrl.get('uid')}/{rjob}"
        return str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/job/{meta.get('name')}")

    def remaining(self, obj: dict[str, Any], ran: float) -> None:
        """The bound pod's run time left at the snapshot; `ran`: how long it had run (its kubetwin.io/elapsed,
        which the kubelet takes off its kubetwin.io/duration)."""
        meta = obj["metadata"]
        ann = meta.setdefault("annotations", {})
        kind, keys = self.owner_keys(obj)
        given = next((self.options.remaining[k] for k in keys if k in self.options.remaining), None)
        rule = self.rule(kind, keys)
        if given is not None:
            ann[DURATION] = _seconds_text(ran + given)
            self.default("bound pods run the time --remaining-run-time gives their owner")
        elif rule is not None:
            self.drawn(ann, str(meta.get("uid") or "/".join(keys[:1])), ran, rule)
            self.default("bound pods draw their run time from the distribution --runtime gives their owner, given "
                         "how long they had run")
        elif DURATION in ann:
            self.default(f"bound pods run what is left of their kubetwin.io/duration ({ELAPSED}: how long they "
                         "had run)")
        elif kind == "Node":
            self.default("static pods (mirror pods, owned by their Node: kube-proxy...) run until stopped")
        elif kind in SERVER_OWNERS:
            self.default("bound pods of ReplicaSets, StatefulSets and DaemonSets run until stopped (no "
                         "kubetwin.io/duration)")
        else:
            left = self.options.remaining.get("*", DEFAULT_REMAINING)
            ann[DURATION] = _seconds_text(ran + left)
            self.default(f"bound pods of Jobs or of no owner have no run time: they run {_seconds_text(left)} more "
                         "(--remaining-run-time OWNER=DURATION, or '*=DURATION' for all)")
        if not ann:
            del meta["annotations"]

    def rule(self, kind: str | None, keys: list[str]) -> runtime.Rule | None:
        """The first --runtime rule for the owner (runtime.Rule.matches)."""
        return next((r for r in self.options.runtime if r.matches(kind, keys)), None)

    def drawn(self, ann: dict[str, Any], uid: str, ran: float, rule: runtime.Rule) -> None:
        """A run time drawn from the rule's distribution, written now for the options' seed, again per seed by
        Report.draw."""
        d = Draw(ann, uid, ran, rule.dist)
        self.report.draws.append(d)
        redraw([d], self.options.seed)

    def pending_pod(self, obj: dict[str, Any]) -> None:
        """An unbound pod of an owner --runtime names runs a drawn time (its Job's draw: one per Job)."""
        kind, keys = self.owner_keys(obj)
        rule = self.rule(kind, keys)
        if rule is None:
            return
        meta = obj["metadata"]
        ctrl = _controller(meta)
        job = self.by_uid.get(str((ctrl or {}).get("uid")))
        uid = self.job_draw_uid(job) if kind == "Job" and job is not None else str((ctrl or meta).get("uid")
                                                                                   or keys[0])
        self.drawn(meta.setdefault("annotations", {}), uid, 0.0, rule)
        self.default("Pending pods draw their run time from the distribution --runtime gives their owner")

    def job_template(self, obj: dict[str, Any], raw: dict[str, Any]) -> None:
        """A Job not finished whose pods --runtime names: the pods it creates from now run a drawn time (one draw
        per Job, shared with its pending pods)."""
        if not self.options.runtime:
            return
        if _ended(raw, ("Complete", "Failed")):
            return
        meta = obj["metadata"]
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        rule = self.rule("Job", [f"{ns}/job/{name}", f"job/{name}", *self.chain_keys(obj)])
        if rule is None:
            return
        for _, ann in runtime.templates(obj):
            self.drawn(ann, self.job_draw_uid(obj), 0.0, rule)
            self.default("Jobs' pods not yet created draw their run time from the distribution --runtime gives the "
                         "Job")

    def workload_templates(self, obj: dict[str, Any], raw: dict[str, Any]) -> None:
        """A JobSet not finished or a LeaderWorkerSet whose --runtime rule names it: the pods made from its templates
        from now on run a drawn time (one draw per replicatedJob of a JobSet, shared with the Jobs made from it;
        one per LeaderWorkerSet, its leader's and workers' templates alike)."""
        if not self.options.runtime:
            return
        if _ended(raw, ("Completed", "Failed")):  # a JobSet's terminal conditions
            return
        meta = obj["metadata"]
        kind, ns, name = str(obj["kind"]), str(meta.get("namespace") or "default"), str(meta.get("name"))
        rule = self.rule(runtime.POD_OWNER.get(kind), [f"{ns}/{kind.lower()}/{name}", f"{kind.lower()}/{name}",
                                                        *self.chain_keys(obj)])
        if rule is None:
            return
        uid = str(meta.get("uid") or f"{ns}/{kind.lower()}/{name}")
        for part, ann in runtime.templates(obj):
            self.drawn(ann, f"{uid}/{part}" if part else uid, 0.0, rule)
            self.default(f"{kind}s' pods not yet created draw their run time from the distribution --runtime gives "
                         f"the {kind}")

    def owners(self, obj: dict[str, Any], uids: set[str]) -> None:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("controller") and str(ref.get("uid")) not in uids:
                what = "pods" if obj.get("kind") == "Pod" else f"{obj.get('kind')} objects"
                self.default(f"{what} whose controller ({ref.get('kind')}) is not in the dump keep running: nothing "
                             "re-creates them")

    # -- nodes and pools ---------------------------------------------------------------------------------------
    def node(self, m: Manifest) -> dict[str, Any]:
        obj = self.clean(m.obj)
        status = as_dict(obj.get("status"))
        kept = {k: status[k] for k in NODE_STATUS if k in status}
        if "nodeInfo" in kept and not NODE_INFO <= set(as_dict(kept["nodeInfo"])):
            del kept["nodeInfo"]  # partial (a twin run's own nodes): the schema requires every field
            self.drop("Node status.nodeInfo missing required fields (a twin run's own nodes)", "Node")
        if set(status) - set(kept) - {"nodeInfo"}:
            self.drop("Node status fields the twin does not read (images, daemonEndpoints, volumes...)", "Node")
        obj["status"] = kept
        return obj

    def nodes(self, nodes: list[Manifest]) -> tuple[list[Manifest], list[Manifest]]:
        """The Nodes as they are, and a NodePool adopting them per GKE node pool."""
        out = [Manifest(self.node(m), m.file, m.line, m.lines) for m in nodes]
        by_pool: dict[str, list[Manifest]] = defaultdict(list)
        for m in out:
            pool = (m.obj["metadata"].get("labels") or {}).get(GKE_NODEPOOL)
            if pool:
                by_pool[str(pool)].append(m)
            else:
                self.default("Nodes of no GKE node pool stay static Nodes (unbilled, not autoscaled)")
        pools = []
        for name, ms in sorted(by_pool.items()):
            if name in self.pools_given:
                continue
            pool, why = self.pool(name, ms)
            if pool is None:
                self.default(f"Nodes stay static Nodes: {why}", len(ms))
                continue
            pools.append(Manifest(pool, ms[0].file, ms[0].line))
        return out, pools

    def pool(self, name: str, ms: list[Manifest]) -> tuple[dict[str, Any] | None, str]:
        labels = [m.obj["metadata"].get("labels") or {} for m in ms]
        types = {str(lb.get(INSTANCE_TYPE) or lb.get("beta.kubernetes.io/instance-type") or "") for lb in labels}
        if len(types) != 1 or "" in types:
            return None, f"pool {name} has no single {INSTANCE_TYPE} ({', '.join(sorted(types)) or 'none'})"
        machine = types.pop()
        try:
            mt = catalog.machine_type(machine)
        except catalog.CatalogError:
            return None, f"pool {name}'s machine type {machine} is not in the twin's catalog"
        zones: Counter[str] = Counter(str(lb.get(ZONE) or "") for lb in labels)
        if "" in zones:
            return None, f"pool {name} has nodes without {ZONE}"
        tpu_spec, why = self.tpu_pool(name, mt, labels, ms, zones)
        if why:
            return None, why
        counts = set(zones.values())
        per_zone = min(counts)
        if len(counts) > 1:
            self.default(f"pools whose zones hold different node counts: nodeCount is the smallest ({name}: "
                         f"{', '.join(f'{z} {n}' for z, n in sorted(zones.items()))}; each zone keeps its nodes)")
        spec: dict[str, Any] = {"machineType": mt.name, "nodeCount": per_zone, "zones": sorted(zones), **tpu_spec}
        if any(node_capacity_type(lb) == "spot" for lb in labels):
            spec["spot"] = True
        acc = labels[0].get(GKE_ACCELERATOR)
        if acc:
            cap = (ms[0].obj.get("status") or {}).get("capacity") or {}
            count = int(str(cap.get(GPU) or mt.gpu_count or 0) or 0)
            spec["accelerators"] = [{"type": str(acc), "count": count or mt.gpu_count}]
        common = {k: v for k, v in labels[0].items() if not any(p in k for p in SYSTEM_PREFIXES)
                  and all(lb.get(k) == v for lb in labels)}
        if common:
            spec["labels"] = dict(sorted(common.items()))
        taints = [t for t in (ms[0].obj.get("spec") or {}).get("taints") or []
                  if isinstance(t, dict) and t != GPU_TAINT and t != tpu.TAINT
                  and not str(t.get("key", "")).startswith(("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/",
                                                            "ToBeDeletedByClusterAutoscaler"))]
        if taints:
            spec["taints"] = taints
        return {"apiVersion": TWIN_GROUP, "kind": "NodePool",
                "metadata": {"name": name, "annotations": {ADOPT_NODES: "true"}}, "spec": spec}, ""

    @staticmethod
    def tpu_pool(name: str, mt: catalog.MachineType, labels: list[dict], ms: list[Manifest],
                 zones: Counter[str]) -> tuple[dict[str, Any], str]:
        """A TPU node pool's spec fields ({} for a GPU or CPU pool), or why its nodes stay static Nodes. GKE gives
        every node of a TPU pool its slice's cloud.google.com/gke-tpu-topology; a multi-host slice pool holds one
        slice in one zone, all its hosts (placementPolicy.tpuTopology, as `gcloud container node-pools create
        --tpu-topology`)."""
        if not (mt.tpu or any(tpu.ACCELERATOR_LABEL in lb for lb in labels)
                or any(TPU in ((m.obj.get("status") or {}).get("capacity") or {}) for m in ms)):
            return {}, ""
        if not mt.tpu:
            return {}, f"pool {name} has TPU nodes of machine type {mt.name}, which has no TPU in the catalog"
        topologies = {str(lb.get(tpu.TOPOLOGY_LABEL) or "") for lb in labels}
        if len(topologies) != 1 or "" in topologies:
            return {}, f"pool {name} has no single {tpu.TOPOLOGY_LABEL} ({', '.join(sorted(topologies)) or 'none'})"
        topology = topologies.pop()
        try:
            hosts = tpu.slice_shape(mt.name, topology)[1]
        except (ValueError, KeyError) as exc:
            return {}, f"pool {name}'s TPU topology {topology} does not fit {mt.name}: {exc}"
        if hosts <= 1:
            return {}, ""
        if len(zones) != 1 or sum(zones.values()) != hosts:
            return {}, (f"pool {name} is a multi-host TPU slice {topology} of {hosts} hosts with "
                        f"{sum(zones.values())} in the dump (a partial slice: GKE would be repairing it)")
        return {"placementPolicy": {"tpuTopology": topology}}, ""

    def missing_namespaces(self, out: list[Manifest], passthrough: list[Manifest]) -> list[Manifest]:
        have = {str(m.obj["metadata"].get("name")) for m in [*out, *passthrough] if m.kind == "Namespace"}
        want: dict[str, Manifest] = {}
        for m in out:
            ns = (m.obj.get("metadata") or {}).get("namespace")
            if ns and str(ns) not in have and not kinds.is_cluster_scoped(m.kind):
                want.setdefault(str(ns), m)
        if want:
            self.default("Namespaces the dump's objects are in but it does not hold, created", len(want))
        return [Manifest({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, m.file, m.line)
                for ns, m in sorted(want.items())]

    def finish(self) -> None:
        for why, by_kind in self.dropped.items():
            n = sum(by_kind.values())
            self.report.dropped.append((n, f"{why}: " + ", ".join(f"{c} {k}" for k, c in sorted(by_kind.items()))))
        self.report.defaulted = [(n, what) for what, n in self.defaulted.items()]


def convert(dumps: list[Manifest], passthrough: list[Manifest], options: Options | None = None
            ) -> tuple[list[Manifest], Report]:
    """The twin's manifests for the dumps' objects (passthrough: the user's own manifests given beside them, kept
    as written and after them), and the report of what was kept, dropped and defaulted."""
    conv = _Converter(options or Options())
    out = conv.convert(dumps, passthrough)
    conv.report.file = dumps[0].file if dumps else ""
    return out + passthrough, conv.report
