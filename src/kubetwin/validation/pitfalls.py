"""Warnings for the platform pitfalls users hit: manifests every API server accepts that still do nothing, or not
what their author meant, once the platform's controllers read them together. Each warning names the object and
field, says what the platform (and the twin's run) will do, and gives the fix.

Cross-object checks, so they run over the whole scenario after the per-object checks (`validate.validate`), and
only over objects without errors. A check that needs objects the scenario does not hold (no NodePool or Node at
all, say) stays silent: the manifests may be applied to a cluster that has them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.podresources import pod_requests
from kubetwin.api.twin import DEFAULT_ZONE
from kubetwin.k8s.labels import set_matches
from kubetwin.k8s.names import GKE_ACCELERATOR, GPU, HOSTNAME

WARNING = "warning"
KUEUE = "kueue.x-k8s.io/"
GPU_PREFIX = "nvidia.com/"
# The NVIDIA driver installer GKE documents for manual driver installation (autoscaler/nodepool.py DRIVER_INSTALLER)
DRIVER_INSTALLER_URL = ("https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master/"
                        "nvidia-driver-installer/cos/daemonset-preloaded.yaml")
_DRIVER_CEL = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")


@dataclass
class _Scenario:
    """The objects of a scenario the checks read, indexed once."""

    manifests: list[Manifest]
    by_kind: dict[str, list[Manifest]] = field(default_factory=dict)
    node_label_sets: list[tuple[str, dict[str, str], list[dict]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for m in self.manifests:
            self.by_kind.setdefault(m.kind, []).append(m)
        self.node_label_sets = list(_nodes(self.by_kind))

    def kind(self, kind: str, group: str = "") -> list[Manifest]:
        return [m for m in self.by_kind.get(kind, []) if str(m.obj.get("apiVersion", "")).startswith(group)]


def _nodes(by_kind: dict[str, list[Manifest]]) -> Iterator[tuple[str, dict[str, str], list[dict]]]:
    """(where from, labels, taints) of every node the scenario's NodePools make (one per zone) and its v1 Nodes."""
    from kubetwin import catalog
    from kubetwin.autoscaler.nodepool import node_labels_and_taints
    from kubetwin.autoscaler.reservations import first_slot_labels

    reservations = [r.obj for r in by_kind.get("Reservation", [])]
    for m in by_kind.get("NodePool", []):
        spec = m.obj.get("spec") or {}
        try:
            mt = catalog.machine_type(spec.get("machineType", ""))
        except catalog.CatalogError:
            continue
        for zone in spec.get("zones") or [DEFAULT_ZONE]:
            labels, taints = node_labels_and_taints(m.obj, mt, zone, f"{m.obj['metadata']['name']}-node")
            if reservations:  # a dense reservation's VMs carry GKE's topology labels (autoscaler/reservations.py)
                labels = {**labels, **first_slot_labels(m.obj, reservations, zone)}
            yield f"NodePool {m.obj['metadata']['name']}", labels, taints
    for m in by_kind.get("Node", []):
        meta = m.obj.get("metadata") or {}
        yield f"Node {meta.get('name')}", dict(meta.get("labels") or {}), list((m.obj.get("spec") or {}).get(
            "taints") or [])


def _warn(m: Manifest, fld: str, message: str, fix: str) -> Diagnostic:
    return Diagnostic(m.file, m.line_of(fld), m.ref, fld, message, fix, WARNING)


def _ns(m: Manifest) -> str:
    return (m.obj.get("metadata") or {}).get("namespace") or "default"


def _pod_templates(m: Manifest) -> list[tuple[str, dict, dict]]:
    """(field path of the pod spec, pod spec, pod metadata) for each pod a workload object makes."""
    return [(t.at("spec"), t.spec, t.metadata) for t in kinds.pod_templates(m.obj)]


def _container_resources(pod_spec: dict) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(index, containers|initContainers, requests with limits standing in) per container."""
    for key in ("containers", "initContainers"):
        for i, c in enumerate(pod_spec.get(key) or []):
            res = (c or {}).get("resources") or {}
            yield i, key, {**(res.get("limits") or {}), **(res.get("requests") or {})}


# ----------------------------------------------------------------------------------------------------- Kueue
def _cluster_queue_selector(sc: _Scenario) -> list[Diagnostic]:
    """Kueue's ClusterQueue.spec.namespaceSelector "Defaults to null which is a nothing selector (no namespaces
    eligible). If set to an empty selector `{}`, then all namespaces are eligible." (the CRD's description,
    api/crds/kueue.x-k8s.io_clusterqueues.yaml). The twin's Kueue does the same (kueue/cycle.py)."""
    return [_warn(m, "spec.namespaceSelector", "namespaceSelector is not set: Kueue's default is a nothing selector "
                  "(no namespaces eligible), so this ClusterQueue admits no Workload; they stay pending with "
                  "\"workload namespace doesn't match ClusterQueue selector\"",
                  "set spec.namespaceSelector: {} to admit workloads from every namespace (or matchLabels for the "
                  "namespaces that may use it)")
            for m in sc.kind("ClusterQueue", KUEUE) if (m.obj.get("spec") or {}).get("namespaceSelector") is None]


def _flavor_labels(sc: _Scenario) -> list[Diagnostic]:
    """A ResourceFlavor's nodeLabels become the admitted pods' nodeSelector (Kueue injects them at admission); if
    no node carries them, admitted pods never schedule and the autoscaler has no pool to grow."""
    if not sc.node_label_sets:
        return []
    out = []
    for m in sc.kind("ResourceFlavor", KUEUE):
        wanted = (m.obj.get("spec") or {}).get("nodeLabels") or {}
        if HOSTNAME in wanted:  # pool node names are the run's to choose
            continue
        if not wanted or any(all(labels.get(k) == str(v) for k, v in wanted.items())
                             for _, labels, _ in sc.node_label_sets):
            continue
        seen = []
        for k in sorted(wanted):
            values = sorted({labels[k] for _, labels, _ in sc.node_label_sets if k in labels})
            seen.append(f"{k}: {', '.join(values)}" if values else f"{k}: (no node has it)")
        out.append(_warn(m, "spec.nodeLabels", f"nodeLabels {wanted} match no node of the scenario's node pools: "
                         "Kueue admits workloads to this flavor and injects these labels as their nodeSelector, so "
                         "their pods stay Pending (no node matches, and no pool can scale up for them)",
                         f"use labels the pools' nodes carry ({'; '.join(seen)}), e.g. "
                         "cloud.google.com/gke-nodepool: <pool> or cloud.google.com/gke-accelerator: <gpu>"))
    return out


def _topology_levels(sc: _Scenario) -> list[Diagnostic]:
    """Kueue's TAS builds a flavor's topology tree only from nodes that carry every level's label (and the
    flavor's nodeLabels): with a level label no such node has, the flavor has no domain and its workloads wait
    (tas_flavor_snapshot.go: a node without a level's label is not in the snapshot). GKE labels A4X, A4, A3 Ultra and
    A3 Mega nodes with cloud.google.com/gce-topology-*; the twin's NodePools do not (which nodes share a block is a
    fact of the reservation: a pool consuming a DENSE `Reservation` gets them from it), so a scenario written from
    GKE's TAS guide hits this."""
    if not sc.node_label_sets:
        return []
    levels_of = {(m.obj.get("metadata") or {}).get("name"): [
        (i, str((lv or {}).get("nodeLabel"))) for i, lv in enumerate((m.obj.get("spec") or {}).get("levels") or [])
        if isinstance(lv, dict)] for m in sc.kind("Topology", KUEUE)}
    out = []
    for m in sc.kind("ResourceFlavor", KUEUE):
        spec = m.obj.get("spec") or {}
        levels = levels_of.get(spec.get("topologyName"))
        if not levels:
            continue
        wanted = spec.get("nodeLabels") or {}
        nodes = [labels for _, labels, _ in sc.node_label_sets
                 if all(labels.get(k) == str(v) for k, v in wanted.items())]
        if not nodes:  # _flavor_labels says so
            continue
        missing = [label for _, label in levels if not any(label in labels for labels in nodes)]
        if not missing:
            continue
        gce = [label for label in missing if label.startswith("cloud.google.com/gce-topology-")]
        fix = ("give each NodePool the labels its nodes would carry on GKE in spec.labels (one pool per block, "
               "e.g. cloud.google.com/gce-topology-block: block-a; docs/kueue-tas.md)" if gce else
               "label the flavor's nodes with every level of the Topology (NodePool spec.labels), or remove the level")
        out.append(_warn(m, "spec.topologyName", f"Topology {spec.get('topologyName')!r} has level(s) "
                         f"{', '.join(missing)} that no node of this flavor carries: Kueue's topology-aware "
                         "scheduling builds its tree only from nodes with every level's label, so this flavor has no "
                         "domain and workloads admitted through it wait (the twin's NodePools do not set GKE's "
                         "gce-topology labels themselves)", fix))
    return out


def _uncovered_resources(sc: _Scenario) -> list[Diagnostic]:
    """Kueue counts every resource a pod requests; one its ClusterQueue does not cover makes the Workload
    inadmissible: "resource R unavailable in ClusterQueue" (pkg/scheduler/flavorassigner), forever."""
    from kubetwin.kueue.controller import jobframework

    queues = {(_ns(m), m.obj["metadata"]["name"]): (m.obj.get("spec") or {}).get("clusterQueue")
              for m in sc.kind("LocalQueue", KUEUE)}
    covered = {m.obj["metadata"]["name"]: {r for g in (m.obj.get("spec") or {}).get("resourceGroups") or []
                                           for r in g.get("coveredResources") or []}
               for m in sc.kind("ClusterQueue", KUEUE)}
    out = []
    for kind in jobframework.INTEGRATIONS:
        for m in sc.by_kind.get(kind, []):
            cq = queues.get((_ns(m), jobframework.queue_name(m.obj) or ""))
            if cq not in covered:
                continue
            for prefix, pod_spec, _ in _pod_templates(m):
                requests = pod_requests({"spec": pod_spec})  # as Kueue counts them; zero requests are skipped
                for name in sorted(r for r, v in requests.items() if v and r not in covered[cq]):
                    fld = next((f"{prefix}.{key}[{i}].resources" for i, key, res in _container_resources(pod_spec)
                                if name in res), prefix)
                    out.append(_warn(m, fld, f"requests {name}, which ClusterQueue {cq} does not cover: Kueue will "
                                     f"never admit this workload (\"resource {name} unavailable in ClusterQueue\")",
                                     f"add {name} to a resourceGroup's coveredResources of ClusterQueue {cq} with a "
                                     "quota in each flavor, or drop the request"))
    return out


def _missing_local_queue(sc: _Scenario) -> list[Diagnostic]:
    """A Job, JobSet or Pod whose kueue.x-k8s.io/queue-name names no LocalQueue of its namespace: Kueue's webhook
    still suspends it (gates a Pod) and creates its Workload, which the workload controller marks QuotaReserved
    False, "LocalQueue <name> doesn't exist" (kueue pkg/controller/core/workload_controller.go); it waits until such
    a LocalQueue appears. Said when the scenario installs Kueue (any Kueue object), as the run does."""
    from kubetwin.kueue import config as kueue_config
    from kubetwin.kueue.controller import jobframework
    from kubetwin.kueue.controller.pods import UNMANAGED_NAMESPACES

    if not any(str(m.obj.get("apiVersion") or "").startswith(KUEUE) for m in sc.manifests):
        return []
    managed = (kueue_config.find(sc.manifests) or kueue_config.KueueConfig()).managed_kinds
    queues: dict[str, list[str]] = {}
    for m in sc.kind("LocalQueue", KUEUE):
        queues.setdefault(_ns(m), []).append(str(m.obj["metadata"]["name"]))
    out = []
    for kind in sorted(managed):
        for m in sc.by_kind.get(kind, []):
            queue, ns = jobframework.queue_name(m.obj), _ns(m)
            if not queue or queue in queues.get(ns, []) or (kind == "Pod" and ns in UNMANAGED_NAMESPACES):
                continue
            close = difflib.get_close_matches(str(queue), queues.get(ns, []), n=1, cutoff=0.6)
            elsewhere = sorted(n for n, qs in queues.items() if queue in qs)
            fix = (f"did you mean {close[0]}? " if close else "") + (
                f"LocalQueues of namespace {ns}: {', '.join(sorted(queues[ns]))}; " if queues.get(ns) else "") + (
                f"a LocalQueue {queue} exists in {', '.join(elsewhere)}, but a job uses the LocalQueues of its own "
                "namespace; " if elsewhere else "") + f"or add a LocalQueue {queue} in namespace {ns}"
            out.append(_warn(m, f'metadata.labels["{jobframework.QUEUE_LABEL}"]',
                             f"queue-name {queue} names no LocalQueue in namespace {ns}: Kueue queues it anyway and "
                             f"its Workload waits with QuotaReserved False, \"LocalQueue {queue} doesn't exist\" "
                             "(it never starts unless that LocalQueue is created)", fix))
    return out


def _local_queue_without_cluster_queue(sc: _Scenario) -> list[Diagnostic]:
    """A LocalQueue whose spec.clusterQueue names no ClusterQueue: Kueue's LocalQueue reconciler marks it Active
    False, reason ClusterQueueDoesNotExist, "Can't submit new workloads to clusterQueue" (kueue
    pkg/controller/core/localqueue_controller.go), and the Workloads queued there wait until that ClusterQueue
    exists."""
    cqs = sorted(str(m.obj["metadata"]["name"]) for m in sc.kind("ClusterQueue", KUEUE))
    out = []
    for m in sc.kind("LocalQueue", KUEUE):
        cq = str((m.obj.get("spec") or {}).get("clusterQueue") or "")
        if not cq or cq in cqs:
            continue
        close = difflib.get_close_matches(cq, cqs, n=1, cutoff=0.6)
        out.append(_warn(m, "spec.clusterQueue",
                         f"ClusterQueue {cq} does not exist: Kueue marks this LocalQueue Active False "
                         f"(ClusterQueueDoesNotExist, \"Can't submit new workloads to clusterQueue\") and the "
                         "Workloads queued here wait until it is created",
                         (f"did you mean {close[0]}? " if close else "")
                         + (f"ClusterQueues: {', '.join(cqs)}; " if cqs else "") + f"or add a ClusterQueue {cq}"))
    return out


def _local_queue_stop_policy(sc: _Scenario) -> list[Diagnostic]:
    """A LocalQueue with spec.stopPolicy Hold or HoldAndDrain: Kueue's LocalQueue reconciler marks it Active False,
    reason Stopped, "LocalQueue is stopped", and the queue manager stops admitting its Workloads (HoldAndDrain also
    evicts the admitted ones) (kueue pkg/controller/core/localqueue_controller.go; localqueue_types.go StopPolicy).
    The twin does not read the field (`kubetwin.kueue.api.LocalQueue`): a notice naming what the run does."""
    out = []
    for m in sc.kind("LocalQueue", KUEUE):
        policy = str((m.obj.get("spec") or {}).get("stopPolicy") or "None")
        if policy != "None":
            out.append(Diagnostic(m.file, m.line_of("spec.stopPolicy"), m.ref, "spec.stopPolicy",
                                  f"LocalQueue stopPolicy {policy} is not modelled: Kueue would mark this LocalQueue "
                                  "Active False (Stopped, \"LocalQueue is stopped\") and admit none of its Workloads"
                                  + (" and evict the admitted ones" if policy == "HoldAndDrain" else "")
                                  + "; the run queues and admits its Workloads as with stopPolicy None", "", "notice"))
    return out


# Kinds Kueue integrates (apis/config/v1beta2 Integrations.Frameworks) that the twin's Kueue does not run, by the
# framework name that enables each.
UNMODELLED_INTEGRATIONS = {"Deployment": "deployment", "StatefulSet": "statefulset",
                           "RayJob": "ray.io/rayjob",
                           "RayCluster": "ray.io/raycluster", "RayService": "ray.io/rayservice",
                           "MPIJob": "kubeflow.org/mpijob",
                           "AppWrapper": "workload.codeflare.dev/appwrapper"}


def _unmodelled_integration(sc: _Scenario) -> list[Diagnostic]:
    """An object of a kind Kueue integrates but the twin's Kueue does not (a Deployment, a StatefulSet, ...),
    labelled kueue.x-k8s.io/queue-name: Kueue would queue its pods against the LocalQueue's quota (kueue
    pkg/controller/jobs/deployment: the webhook copies the label to the pod template and the pod integration gates
    each pod); the twin runs them unqueued. Said when the scenario installs Kueue and, given a Configuration, when
    its integrations.frameworks lists the kind."""
    from kubetwin.kueue import config as kueue_config
    from kubetwin.kueue.controller import jobframework

    if not any(str(m.obj.get("apiVersion") or "").startswith(KUEUE) for m in sc.manifests):
        return []
    cfg = kueue_config.find(sc.manifests)
    out = []
    for kind, framework in UNMODELLED_INTEGRATIONS.items():
        if cfg is not None and framework not in cfg.frameworks:
            continue
        for m in sc.by_kind.get(kind, []):
            queue = jobframework.queue_name(m.obj)
            if queue:
                out.append(Diagnostic(m.file, m.line_of(f'metadata.labels["{jobframework.QUEUE_LABEL}"]'), m.ref,
                                      f'metadata.labels["{jobframework.QUEUE_LABEL}"]',
                                      f"Kueue's {framework} integration is not modelled: Kueue would queue this "
                                      f"{kind}'s pods in LocalQueue {queue} and admit them within its quota; the "
                                      "run starts them unqueued", "", "notice"))
    return out


# ----------------------------------------------------------------------------------------------------- KEDA
def _scale_to_zero(sc: _Scenario) -> list[Diagnostic]:
    """KEDA scales to zero by default (minReplicaCount 0). A prometheus query over series only the target's own
    pods export returns nothing (or 0) at zero replicas, and KEDA reads that as 0 (ignoreNullValues defaults to
    true): the target never activates again."""
    from kubetwin.serving.observe.promsource import AT_ZERO, KNOWN
    from kubetwin.validation.serving import metric_names

    out = []
    for m in sc.kind("ScaledObject", "keda.sh/"):
        spec = m.obj.get("spec") or {}
        if int(spec.get("minReplicaCount") or 0) != 0:
            continue
        names: set[str] = set()
        for trig in spec.get("triggers") or []:
            query = str((trig.get("metadata") or {}).get("query") or "")
            found = metric_names(query) if trig.get("type") == "prometheus" and query else None
            if found is None:  # another scaler's source may well be up at zero; an unparsable query is an error
                names = set()
                break
            names |= found
        if names and names <= set(KNOWN) - set(AT_ZERO):
            out.append(_warn(m, "spec.minReplicaCount", "minReplicaCount is 0 and every trigger reads only metrics "
                             f"the scaled pods export ({', '.join(sorted(names))}): at zero replicas there is no pod, "
                             "the query returns nothing, KEDA reads 0 and the target never wakes up",
                             f"add demand seen without pods, e.g. sum({AT_ZERO[0]}{{inference_pool=\"<pool>\"}}) "
                             "+ (sum(vllm:num_requests_waiting) or vector(0)), or set minReplicaCount: 1"))
    return out


# ------------------------------------------------------------------------------------------------- devices
def _device_class_driver(sc: _Scenario) -> list[Diagnostic]:
    """A DeviceClass selecting a driver no node runs: its claims never allocate (the scheduler's DynamicResources:
    "cannot allocate all claims")."""
    from kubetwin.devices.dra import nvidia

    if not sc.node_label_sets and not sc.by_kind.get("ResourceSlice"):
        return []
    running = {str((s.obj.get("spec") or {}).get("driver")) for s in sc.by_kind.get("ResourceSlice", [])}
    if any(nvidia.uses_dra(labels) and labels.get(GKE_ACCELERATOR)
           for _, labels, _ in sc.node_label_sets):
        running.add(nvidia.DRIVER)
    out = []
    for m in sc.kind("DeviceClass", "resource.k8s.io/"):
        for i, sel in enumerate((m.obj.get("spec") or {}).get("selectors") or []):
            expr = str(((sel or {}).get("cel") or {}).get("expression") or "")
            for driver in _DRIVER_CEL.findall(expr):
                if driver in running:
                    continue
                fix = (f"label a GPU node pool {nvidia.NO_DEVICE_PLUGIN}: \"true\" to run the NVIDIA DRA driver"
                       if driver == nvidia.DRIVER else
                       f"the twin runs one DRA driver, {nvidia.DRIVER} (node pools labelled "
                       f"{nvidia.NO_DEVICE_PLUGIN}: \"true\"), or add ResourceSlices of driver {driver}")
                out.append(_warn(m, f"spec.selectors[{i}].cel.expression", f"selects driver {driver}, which no node "
                                 "pool runs: claims of this class never allocate and their pods stay Pending "
                                 "(\"cannot allocate all claims\")", fix))
    return out


def _gpu_toleration(sc: _Scenario) -> list[Diagnostic]:
    """GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule; the ExtendedResourceToleration admission plugin
    (enabled on GKE, controllers/admission.py) adds the toleration only to pods that request nvidia.com/* extended
    resources. A pod that reaches GPUs another way (a DRA claim, or a GPU nodeSelector) must tolerate it itself."""
    from kubetwin.autoscaler.nodepool import GPU_TAINT
    from kubetwin.k8s.taints import tolerates

    if not any(any(t.get("key") == GPU_TAINT["key"] for t in taints) for _, _, taints in sc.node_label_sets):
        return []
    out = []
    for m in sc.manifests:
        for prefix, pod_spec, _ in _pod_templates(m):
            if any(k.startswith(GPU_PREFIX) for _, _, res in _container_resources(pod_spec) for k in res):
                continue  # admission adds the toleration
            if tolerates(list(pod_spec.get("tolerations") or []), GPU_TAINT):
                continue
            selector = pod_spec.get("nodeSelector") or {}
            how = ("uses ResourceClaims" if pod_spec.get("resourceClaims") else
                   "selects GPU nodes" if any(k in selector for k in (GKE_ACCELERATOR,
                                                                     "cloud.google.com/gke-gpu")) else "")
            if how:
                out.append(_warn(m, f"{prefix}.tolerations", f"{how} but does not tolerate the GPU nodes' taint "
                                 "nvidia.com/gpu=present:NoSchedule, and no admission adds it (ExtendedResource"
                                 "Toleration only does for pods requesting nvidia.com/gpu): its pods stay Pending",
                                 "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"))
    return out


def _driver_installer(sc: _Scenario) -> list[Diagnostic]:
    """gpuDriverInstallation INSTALLATION_DISABLED (gcloud gpu-driver-version=disabled): GKE installs no driver,
    so the device plugin advertises no nvidia.com/gpu until the NVIDIA driver installer DaemonSet runs."""
    from kubetwin.autoscaler.nodepool import DRIVER_INSTALLER
    from kubetwin.devices.dra import nvidia

    if any(((m.obj.get("metadata") or {}).get("namespace"), (m.obj.get("metadata") or {}).get("name"))
           == DRIVER_INSTALLER for m in sc.by_kind.get("DaemonSet", [])):
        return []
    ns, name = DRIVER_INSTALLER
    out = []
    for m in sc.by_kind.get("NodePool", []):
        spec = m.obj.get("spec") or {}
        if nvidia.uses_dra(spec.get("labels") or {}):
            continue
        for i, acc in enumerate(spec.get("accelerators") or []):
            if (acc or {}).get("gpuDriverInstallation") == "INSTALLATION_DISABLED":
                out.append(_warn(m, f"spec.accelerators[{i}].gpuDriverInstallation", "manual driver installation "
                                 f"and no {name} DaemonSet (in {ns}) in the scenario: the nodes never get an NVIDIA "
                                 "driver, advertise no nvidia.com/gpu, and GPU pods stay Pending (as in the run)",
                                 f"kubectl apply -f {DRIVER_INSTALLER_URL} (a DaemonSet {name} in {ns}), or set "
                                 "gpuDriverInstallation: DEFAULT to let GKE install it"))
    return out


def _tpu_chips(sc: _Scenario) -> list[Diagnostic]:
    """On a multi-host TPU slice each worker pod runs on one VM and requests google.com/tpu = the VM's chips
    (../shared/reference/controllers-kueue-dra-deviceplugin-tpu-jobset.md §4, GKE "About TPUs in GKE"): the slice's
    TPU runtime initializes only when every host's chips belong to the workload."""
    from kubetwin import catalog
    from kubetwin.devices import tpu

    slices = []
    for m in sc.by_kind.get("NodePool", []):
        spec = m.obj.get("spec") or {}
        try:
            mt = catalog.machine_type(spec.get("machineType", ""))
        except catalog.CatalogError:
            continue
        if mt.tpu and tpu.is_multi_host(mt.name, tpu.pool_topology(spec)):
            slices.append((catalog.tpu_type(mt.tpu).gke_accelerator, tpu.pool_topology(spec), mt))
    out = []
    for m in sc.manifests:
        for prefix, pod_spec, _ in _pod_templates(m):
            sel = pod_spec.get("nodeSelector") or {}
            target = [mt for acc, topo, mt in slices if sel.get(tpu.ACCELERATOR_LABEL) == acc
                      and sel.get(tpu.TOPOLOGY_LABEL) == topo]
            if not target:
                continue
            chips = pod_requests({"spec": pod_spec}).get(tpu.RESOURCE, 0)
            if chips != target[0].tpu_chips:
                out.append(_warn(m, f"{prefix}.containers", f"runs on a multi-host TPU slice "
                                 f"({sel[tpu.TOPOLOGY_LABEL]} of {target[0].name}) but requests {chips} "
                                 f"{tpu.RESOURCE}: each pod of a multi-host slice must consume all chips of its host "
                                 f"({target[0].tpu_chips}); the slice's TPU runtime does not start otherwise (the "
                                 "twin schedules the pods as written and does not model that failure)",
                                 f"request {tpu.RESOURCE}: {target[0].tpu_chips} per pod (limits), one pod per host"))
    return out


def _pods_at_once(m: Manifest, prefix: str, pod_spec: dict, pod_meta: dict) -> int:
    """How many pods this template runs at once (a Job's parallelism, a JobSet's replicas x parallelism, a
    workload's replicas, a Kueue pod group's total count): more than one may span nodes."""
    from kubetwin.workloads.training_spec import object_pods

    spec = m.obj.get("spec") or {}
    if m.kind in ("Job", "JobSet"):
        for tmpl_spec, count in object_pods(m.kind, spec):
            if tmpl_spec is pod_spec:
                return count
        return 1
    if m.kind == "Pod":
        total = str((pod_meta.get("annotations") or {}).get("kueue.x-k8s.io/pod-group-total-count") or "1")
        return int(total) if total.isdigit() else 1
    replicas = spec.get("replicas", 1)
    return replicas if isinstance(replicas, int) else 1


def _gpudirect_setup(sc: _Scenario) -> list[Diagnostic]:
    """A pod of several on a GPUDirect pool (A3 High/Mega, A3 Ultra, A4, A4X) without what GKE's GPUDirect guides
    set up gets no GPUDirect: NCCL falls back to TCP over eth0 between nodes (workloads/gpudirect.py). One pod (one
    node) needs none of it: its ranks talk over NVLink. The template's pool is the one its nodeSelector matches
    (every GPU pool when it has none; affinity is not read). Said only for workloads whose step time the twin
    models (training.kubetwin.io/* annotations): for any other pod the transport changes nothing the run reports."""
    from kubetwin.workloads import gpudirect
    from kubetwin.workloads.training_spec import has_training

    def trains(o: object) -> bool:
        if isinstance(o, dict):
            ann = o.get("annotations")
            return has_training(ann if isinstance(ann, dict) else None) or any(trains(v) for v in o.values())
        return isinstance(o, list) and any(trains(v) for v in o)

    pools = []
    for where, labels, _ in sc.node_label_sets:
        plugin = gpudirect.node_plugin({"metadata": {"labels": labels}})
        if labels.get(GKE_ACCELERATOR):
            pools.append((where, labels, plugin))
    if not any(plugin for _, _, plugin in pools):
        return []
    cluster = gpudirect.Cluster.of([m.obj for m in sc.manifests])
    out = []
    for m in sc.manifests:
        if not trains(m.obj):
            continue
        for prefix, pod_spec, pod_meta in _pod_templates(m):
            if not any(k == GPU for _, _, res in _container_resources(pod_spec) for k in res):
                continue
            selector = pod_spec.get("nodeSelector") or {}
            plugins = sorted({plugin for _, labels, plugin in pools
                              if plugin and set_matches(selector, labels)})
            if not plugins or _pods_at_once(m, prefix, pod_spec, pod_meta) < 2:
                continue
            for plugin in plugins:
                setup = gpudirect.check({"metadata": pod_meta, "spec": pod_spec}, plugin, cluster)
                if not setup.ok:
                    meta_path = prefix[:-len("spec")] + "metadata"
                    out.append(Diagnostic(m.file, m.line_of(meta_path), m.ref, meta_path,
                                          f"{_pods_at_once(m, prefix, pod_spec, pod_meta)} pods on GPUDirect nodes: "
                                          f"{setup.describe()}; the run times its collectives so",
                                          "add what is listed, as in GKE's guide (cloud.google.com/kubernetes-"
                                          "engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx, .../gpu-bandwidth-"
                                          "gpudirect-rdma), or run it on one node", "notice"))
    return out


def _reservation_targets(sc: _Scenario) -> list[Diagnostic]:
    """A pool that targets a specific reservation gets no VM unless Compute Engine can find it, it requires
    specific targeting, it is shared with the cluster's project and its shape fits the pool's VMs
    (autoscaler/reservations.py); the words are Compute Engine's and GKE's autoscaler's (reservations/matcher.go)."""
    from kubetwin.autoscaler import reservations as rsv

    by_name = {(rsv.owner(m.obj), m.obj["metadata"]["name"]): m.obj for m in sc.kind("Reservation", "kubetwin.io")}
    out = []
    for m in sc.kind("NodePool", "kubetwin.io"):
        spec = m.obj.get("spec") or {}
        target = rsv.affinity(spec)
        if target.type != rsv.SPECIFIC:
            continue
        fld = "spec.reservationAffinity.values"
        path = rsv.Reservations.target_name_of(spec)
        res = by_name.get((target.project, target.name))
        if res is None:
            out.append(_warn(m, fld, f"Could not find the given reservation with the following name: {path} (no "
                             "Reservation of that name and project in the scenario): the pool's VMs fail with "
                             f"{rsv.CAPACITY_EXCEEDED}", "add the Reservation, or name one the scenario has"))
            continue
        if not (res.get("spec") or {}).get("specificReservationRequired"):
            out.append(_warn(m, fld, f"Specified reservations [projects/{target.project}/reservations/{target.name}] "
                             "can not be targeted as specificReservationRequired is not set",
                             "create the Reservation with specificReservationRequired: true (gcloud "
                             "--require-specific-reservation), or consume it with ANY_RESERVATION"))
        elif not rsv.shared_with_cluster(res):
            out.append(_warn(m, fld, f"Reservation not found or incorrectly shared: {path} belongs to project "
                             f"{target.project} and is not shared with {rsv.PROJECT}", "set the Reservation's "
                             f"shareSettings: {{shareType: SPECIFIC_PROJECTS, projects: [{rsv.PROJECT}]}}"))
        for zone in spec.get("zones") or [DEFAULT_ZONE]:
            why = rsv.shape_mismatches(res, spec, zone)
            if why:
                out.append(_warn(m, fld, f"reservation {path} does not fit the pool's VMs in {zone}: "
                                 f"{'; '.join(why)}", "match the pool's machine type, GPUs and zone to the "
                                 "Reservation's"))
    return out


CHECKS: tuple[Callable[[_Scenario], list[Diagnostic]], ...] = (
    _cluster_queue_selector, _flavor_labels, _topology_levels, _uncovered_resources, _missing_local_queue,
    _local_queue_without_cluster_queue, _local_queue_stop_policy, _unmodelled_integration, _scale_to_zero,
    _device_class_driver, _gpu_toleration, _driver_installer, _tpu_chips, _gpudirect_setup, _reservation_targets)


def diagnostics(clean: list[Manifest]) -> list[Diagnostic]:
    """The pitfall warnings for a scenario, over its objects that have no error (validate's `clean`)."""
    sc = _Scenario([m for m in clean if isinstance(m.obj, dict)])
    out: list[Diagnostic] = []
    for check in CHECKS:
        out += check(sc)
    return out
