"""One registry of the kinds the twin knows: what the API server's discovery and each kind's definition say.

For a custom resource everything comes from the CRD YAML shipped in kubetwin/api/crds/ (scope, plural and short
names, served versions, additionalPrinterColumns); the table `CRDS` adds only what a CRD cannot say: which file,
whether the twin simulates it, when `kubetwin run` creates it and where its pod templates are. Built-in and twin
kinds get one line each in `BUILT_IN` (names and scopes from `kubectl api-resources` on Kubernetes v1.34).

Everyone asks this module: the store's namespacing (`is_cluster_scoped`), validate's "not simulated" notice
(`is_simulated`), `kubetwin run`'s creation order (`create_order`), `kubetwin get`'s resource names and CRD
columns (`resolve`, `printer_columns`) and every walk over a workload's pod templates (`pod_templates`).
A test or a plug-in adds a kind with `REGISTRY.register(...)` (or `registered(...)` for a temporary one).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

TWIN_GROUP = "kubetwin.io"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class PrinterColumn:
    """One additionalPrinterColumns entry: kubectl prints `name` upper-cased; priority > 0 only with -o wide."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0


@dataclass(frozen=True)
class KindInfo:
    """A kind as discovery and its definition describe it, plus the twin's own facts about it."""

    group: str  # "" for the core group
    kind: str
    versions: tuple[str, ...]  # served, preferred first
    plural: str
    short_names: tuple[str, ...] = ()
    namespaced: bool = True
    simulated: tuple[str, ...] | None = None  # versions the twin simulates: None = every served version
    create_order: int = 9  # `kubetwin run` creates lower first (what others refer to)
    # where the pod templates are, one step per nesting level ("spec.replicatedJobs[*].template" then
    # "spec.template"); ("",) for a Pod, whose template is the object itself; () for kinds without pods
    pod_templates: tuple[str, ...] = ()
    columns: dict[str, tuple[PrinterColumn, ...]] | None = None  # version -> CRD printer columns; None: built-in
    # the CustomResourceDefinition itself (api.crd validates and defaults against it); None for built-in kinds
    crd: dict | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def simulates(self, version: str) -> bool:
        return version in (self.versions if self.simulated is None else self.simulated)


# Built-in and twin kinds: (group, kind, versions, plural, short names, namespaced, create order, pod templates,
# simulated versions (None = all)). Kinds the twin does not simulate are listed so their names and scope are right.
_T = "spec.template"
BUILT_IN: tuple[KindInfo, ...] = tuple(KindInfo(g, k, v, p, s, ns, simulated=sim, create_order=o, pod_templates=t)
                                       for g, k, v, p, s, ns, o, t, sim in (
    ("", "Namespace", ("v1",), "namespaces", ("ns",), False, 0, (), None),
    ("", "Node", ("v1",), "nodes", ("no",), False, 2, (), None),
    ("", "ConfigMap", ("v1",), "configmaps", ("cm",), True, 3, (), None),
    ("", "Pod", ("v1",), "pods", ("po",), True, 9, ("",), None),
    ("", "PodTemplate", ("v1",), "podtemplates", (), True, 9, ("template",), None),
    ("", "Service", ("v1",), "services", ("svc",), True, 9, (), None),
    ("", "PersistentVolumeClaim", ("v1",), "persistentvolumeclaims", ("pvc",), True, 9, (), None),
    ("", "PersistentVolume", ("v1",), "persistentvolumes", ("pv",), False, 9, (), None),
    ("", "Event", ("v1",), "events", ("ev",), True, 9, (), ()),
    ("batch", "Job", ("v1",), "jobs", (), True, 9, (_T,), None),
    ("apps", "Deployment", ("v1",), "deployments", ("deploy",), True, 9, (_T,), None),
    ("apps", "ReplicaSet", ("v1",), "replicasets", ("rs",), True, 9, (_T,), None),
    ("apps", "StatefulSet", ("v1",), "statefulsets", ("sts",), True, 9, (_T,), ()),
    ("apps", "DaemonSet", ("v1",), "daemonsets", ("ds",), True, 9, (_T,), ()),
    ("policy", "PodDisruptionBudget", ("v1",), "poddisruptionbudgets", ("pdb",), True, 9, (), None),
    ("scheduling.k8s.io", "PriorityClass", ("v1",), "priorityclasses", ("pc",), False, 1, (), None),
    ("autoscaling", "HorizontalPodAutoscaler", ("v2",), "horizontalpodautoscalers", ("hpa",), True, 9, (), None),
    ("storage.k8s.io", "StorageClass", ("v1",), "storageclasses", ("sc",), False, 9, (), None),
    *(("resource.k8s.io", k, ("v1", "v1beta2", "v1beta1"), p, (), ns, o, (), None) for k, p, ns, o in (
        ("DeviceClass", "deviceclasses", False, 4), ("ResourceClaimTemplate", "resourceclaimtemplates", True, 4),
        ("ResourceClaim", "resourceclaims", True, 5), ("ResourceSlice", "resourceslices", False, 9))),
    ("config.kueue.x-k8s.io", "Configuration", ("v1beta2", "v1beta1"), "configurations", (), False, 9, (), None),
    ("datalayer.gke.io", "GCPDataSource", ("v1",), "gcpdatasources", (), True, 9, (), None),
    (TWIN_GROUP, "NodePool", ("v1alpha1",), "nodepools", (), False, 2, (), None),
    (TWIN_GROUP, "Reservation", ("v1alpha1",), "reservations", (), False, 1, (), None),  # Compute Engine's
    (TWIN_GROUP, "Scenario", ("v1alpha1",), "scenarios", (), False, 9, (), None),
    (TWIN_GROUP, "RequestTrace", ("v1alpha1",), "requesttraces", (), True, 9, (), None),
    (TWIN_GROUP, "Sweep", ("v1alpha1",), "sweeps", (), False, 9, (), ()),  # kubetwin sweep's input, not run
))

# Kueue's Workload: the twin creates them (kueue/controller/core.py) and queues bare ones from the manifests, but
# does not ship the 1.4 MB CRD
# (api/crds/README.md); its printer columns as kueue config/components/crd/bases/kueue.x-k8s.io_workloads.yaml.
_WORKLOAD_COLUMNS = (PrinterColumn("Queue", ".spec.queueName"),
                     PrinterColumn("Reserved in", ".status.admission.clusterQueue"),
                     PrinterColumn("Admitted", '.status.conditions[?(@.type=="Admitted")].status'),
                     PrinterColumn("Finished", '.status.conditions[?(@.type=="Finished")].status'),
                     PrinterColumn("Age", ".metadata.creationTimestamp", "date"))
WORKLOAD = KindInfo("kueue.x-k8s.io", "Workload", ("v1beta2", "v1beta1"), "workloads", ("wl",),
                    columns={"v1beta2": _WORKLOAD_COLUMNS, "v1beta1": _WORKLOAD_COLUMNS})

# The twin's Change (kubetwin.changes): a write at a simulated time; its columns say what it did.
CHANGE = KindInfo(TWIN_GROUP, "Change", ("v1alpha1",), "changes", (), False, create_order=9, columns={"v1alpha1": (
    PrinterColumn("At", ".spec.at"), PrinterColumn("Kind", ".spec.target.kind"),
    PrinterColumn("Target", ".spec.target.name"), PrinterColumn("Action", ".spec.action"),
    PrinterColumn("Phase", ".status.phase"), PrinterColumn("Message", ".status.message", priority=1),
    PrinterColumn("Age", ".metadata.creationTimestamp", "date"))})

# Custom resources: (group, kind) -> (CRD file in api/crds/, simulated versions (None = all served), create order,
# pod templates). Sources and licences of the files: api/crds/README.md.
CRDS: dict[tuple[str, str], tuple[str, tuple[str, ...] | None, int, tuple[str, ...]]] = {
    **{("kueue.x-k8s.io", k): (f"kueue.x-k8s.io_{p}.yaml", sim, o, ()) for k, p, sim, o in (
        ("ResourceFlavor", "resourceflavors", None, 5), ("Cohort", "cohorts", None, 5),
        ("WorkloadPriorityClass", "workloadpriorityclasses", None, 5), ("ClusterQueue", "clusterqueues", None, 6),
        ("LocalQueue", "localqueues", None, 7), ("AdmissionCheck", "admissionchecks", None, 9),
        ("ProvisioningRequestConfig", "provisioningrequestconfigs", None, 9),
        ("Topology", "topologies", None, 5))},  # Topology-aware scheduling: kueue/tas (docs/kueue-tas.md)
    ("jobset.x-k8s.io", "JobSet"): ("jobset.x-k8s.io_jobsets.yaml", None, 9,
                                    ("spec.replicatedJobs[*].template", "spec.template")),
    ("autoscaling.x-k8s.io", "ProvisioningRequest"): ("autoscaling.x-k8s.io_provisioningrequests.yaml", ("v1",), 9,
                                                      ()),
    ("inference.networking.x-k8s.io", "InferenceModel"): (
        "v0.5.0_inference.networking.x-k8s.io_inferencemodels.yaml", None, 9, ()),
    ("inference.networking.x-k8s.io", "InferencePool"): (
        "v0.5.0_inference.networking.x-k8s.io_inferencepools.yaml", None, 9, ()),
    ("inference.networking.x-k8s.io", "InferenceObjective"): (
        "inference.networking.x-k8s.io_inferenceobjectives.yaml", None, 9, ()),
    ("inference.networking.k8s.io", "InferencePool"): (
        "v1.6.0_inference.networking.k8s.io_inferencepools.yaml", None, 9, ()),
    ("keda.sh", "ScaledObject"): ("keda.sh_scaledobjects.yaml", None, 9, ()),
    # LeaderWorkerSet (kubernetes-sigs/lws): the leader's template, else the worker's, and the worker's
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml", None, 9,
        ("spec.leaderWorkerTemplate.{leaderTemplate,workerTemplate}",)),
    # Kubeflow Trainer v2 (kubeflow/trainer manifests/base/crds): the runtimes before the TrainJobs naming them
    # (the Trainer's webhook refuses a TrainJob whose runtime does not exist yet); controllers/trainer.py
    ("trainer.kubeflow.org", "TrainingRuntime"): (
        "trainer.kubeflow.org_trainingruntimes.yaml", None, 8,
        ("spec.template.spec.replicatedJobs[*].template.spec.template",)),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): (
        "trainer.kubeflow.org_clustertrainingruntimes.yaml", None, 8,
        ("spec.template.spec.replicatedJobs[*].template.spec.template",)),
    ("trainer.kubeflow.org", "TrainJob"): ("trainer.kubeflow.org_trainjobs.yaml", None, 9, ()),
    # the Kubeflow training operator v1's PyTorchJob (kubeflow/training-operator release-1.9); controllers/pytorchjob.py
    ("kubeflow.org", "PyTorchJob"): ("kubeflow.org_pytorchjobs.yaml", None, 9,
                                     ("spec.pytorchReplicaSpecs.{Master,Worker}.template",)),
    # GKE multi-networking: the Networks a GPUDirect pod's networking.gke.io/interfaces names and their params
    # (workloads/gpudirect.py reads them), created before the pods as the guides apply them.
    ("networking.gke.io", "GKENetworkParamSet"): ("networking.gke.io_gkenetworkparamsets.yaml", None, 1, ()),
    ("networking.gke.io", "Network"): ("networking.gke.io_networks.yaml", None, 1, ()),
    # GKE's ComputeClass (GoogleCloudPlatform/compute-class-api): the cluster autoscaler's priority rules
    # (autoscaler/computeclass.py, docs/computeclass.md), created before the pools and pods that use it
    ("cloud.google.com", "ComputeClass"): ("cloud.google.com_computeclasses.yaml", None, 1, ()),
    # Monitoring objects: what the twin's Prometheus scrapes (prometheus/targets.py, docs/monitoring.md)
    ("monitoring.googleapis.com", "PodMonitoring"): ("monitoring.googleapis.com_podmonitorings.yaml", None, 9, ()),
    ("monitoring.googleapis.com", "ClusterPodMonitoring"): (
        "monitoring.googleapis.com_clusterpodmonitorings.yaml", None, 9, ()),
    ("monitoring.coreos.com", "PodMonitor"): ("monitoring.coreos.com_podmonitors.yaml", None, 9, ()),
    ("monitoring.coreos.com", "ServiceMonitor"): ("monitoring.coreos.com_servicemonitors.yaml", None, 9, ()),
}

# Kinds the projects of these groups define for which the twin ships no CRD (names only, any version): validate
# accepts them with a "not simulated" notice; any other kind in a group of this table or of `CRDS` is refused as
# the API server's RESTMapper refuses it (`no matches for kind`). Sources: each project's config/crd/bases —
# kubernetes-sigs/kueue (released CRDs), kedacore/keda, kubernetes-sigs/gateway-api-inference-extension,
# kubernetes-sigs/gateway-api (standard and experimental channels), kubernetes/autoscaler (cluster-autoscaler
# apis: ProvisioningRequest, CapacityBuffer).
UNSHIPPED_KINDS: dict[str, tuple[str, ...]] = {
    "kueue.x-k8s.io": ("MultiKueueCluster", "MultiKueueConfig"),  # Workload: `WORKLOAD` below
    "keda.sh": ("ScaledJob", "TriggerAuthentication", "ClusterTriggerAuthentication"),
    "inference.networking.x-k8s.io": ("InferencePoolImport", "InferenceModelRewrite"),
    "autoscaling.x-k8s.io": ("CapacityBuffer",),
    "gateway.networking.k8s.io": ("GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant",
                                  "BackendTLSPolicy", "TCPRoute", "TLSRoute", "UDPRoute"),
    "jobset.x-k8s.io": (),
    "trainer.kubeflow.org": ("OptimizationJob",),  # kubeflow/trainer manifests/base/crds; the rest: `CRDS`
    # kubeflow/training-operator release-1.9 manifests/base/crds (PyTorchJob: `CRDS`)
    "kubeflow.org": ("TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"),
    # GKE's own groups (cloud.google.com/kubernetes-engine/docs): BackendConfig (ingress-configuration);
    # ManagedCertificate (managed-certs), FrontendConfig (ingress-configuration), GKE Gateway policies
    # (configure-gateway-resources), ServiceNetworkEndpointGroup (standalone NEGs) beside the multi-networking kinds
    # the twin ships; ComputeClass is shipped (`CRDS`).
    "cloud.google.com": ("BackendConfig",),  # ComputeClass: `CRDS`
    "networking.gke.io": ("ManagedCertificate", "FrontendConfig", "GCPBackendPolicy", "GCPGatewayPolicy",
                          "HealthCheckPolicy", "GCPSessionAffinityPolicy", "GCPSessionAffinityFilter",
                          "GCPTrafficDistributionPolicy", "GCPRoutingExtension", "GCPTrafficExtension",
                          "ServiceNetworkEndpointGroup", "NetworkLogging", "FQDNNetworkPolicy"),
    # kubernetes-sigs/lws config/crd/bases; prometheus-operator example/prometheus-operator-crd; GoogleCloudPlatform/
    # prometheus-engine charts/operator/crds (Managed Service for Prometheus, GKE's default)
    "leaderworkerset.x-k8s.io": (),  # LeaderWorkerSet: `CRDS`
    "monitoring.coreos.com": ("Alertmanager", "AlertmanagerConfig", "Probe", "Prometheus", "PrometheusAgent",
                              "PrometheusRule", "ScrapeConfig", "ThanosRuler"),  # PodMonitor, ServiceMonitor: CRDS
    "monitoring.googleapis.com": ("ClusterNodeMonitoring", "Rules", "ClusterRules", "GlobalRules",
                                  "OperatorConfig"),  # PodMonitoring, ClusterPodMonitoring: `CRDS`
}


# The versions every kind of `UNSHIPPED_KINDS` of these groups is served in (kedacore/keda config/crd/bases:
# v1alpha1 only); other groups' unshipped kinds accept any version.
UNSHIPPED_VERSIONS: dict[str, tuple[str, ...]] = {"keda.sh": ("v1alpha1",)}


# Built-in kinds outside `BUILT_IN` that are cluster-scoped (`kubectl api-resources --namespaced=false` on
# Kubernetes v1.34, less the subresource-only review kinds); every other built-in kind is namespaced. The twin
# stores these without a namespace and NamespaceLifecycle does not look at them.
BUILT_IN_CLUSTER_SCOPED = frozenset({
    "ComponentStatus", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding", "CustomResourceDefinition", "APIService", "CertificateSigningRequest",
    "ClusterTrustBundle", "FlowSchema", "PriorityLevelConfiguration", "IngressClass", "IPAddress", "ServiceCIDR",
    "RuntimeClass", "ClusterRole", "ClusterRoleBinding", "CSIDriver", "CSINode", "VolumeAttachment",
    "VolumeAttributesClass", "DeviceTaintRule", "StorageVersion", "StorageVersionMigration",
})


@functools.cache
def crd_document(filename: str) -> dict:
    """A shipped CRD file, parsed once."""
    text = resources.files("kubetwin.api").joinpath("crds", filename).read_text(encoding="utf-8")
    return next(d for d in yaml.load_all(text, Loader=_Loader) if d)


def version_key(name: str) -> tuple[int, int, int]:
    """Kubernetes version priority (GA > beta > alpha, then by number): discovery lists the preferred first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", name)
    if not m:
        return (-1, 0, 0)
    level = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (level, int(m.group(1)), int(m.group(3) or 0))


def from_crd(crd: dict, *, simulated: tuple[str, ...] | None = None, create_order: int = 9,
             pod_templates: tuple[str, ...] = ()) -> KindInfo:
    """A KindInfo from a CustomResourceDefinition: scope, names, served versions and printer columns."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    versions = tuple(sorted((v["name"] for v in served), key=version_key, reverse=True))
    columns = {v["name"]: tuple(PrinterColumn(c["name"], c["jsonPath"], c.get("type", "string"),
                                              int(c.get("priority", 0)))
                                for c in v.get("additionalPrinterColumns") or []) for v in served}
    return KindInfo(spec["group"], names["kind"], versions, names["plural"], tuple(names.get("shortNames") or ()),
                    spec.get("scope", "Namespaced") == "Namespaced", simulated, create_order, pod_templates,
                    columns, crd)


class KindRegistry:
    """Kinds by (group, kind), by kind name and by every name `kubectl get` accepts.

    A CRD kind can be registered lazily (a loader that parses its file): it is built the first time a query needs
    that kind, so validating a file of Pods parses no CRD and a ClusterQueue only its own."""

    def __init__(self, kinds: tuple[KindInfo, ...] = ()) -> None:
        self._by_group_kind: dict[tuple[str, str], KindInfo] = {}
        self._lazy: dict[tuple[str, str], Callable[[], KindInfo]] = {}
        self._by_kind: dict[str, tuple[KindInfo, ...]] = {}
        self._names: dict[str, KindInfo] = {}
        for info in kinds:
            self._by_group_kind[(info.group, info.kind)] = info
        self._reindex()

    def register(self, info: KindInfo) -> None:
        self._lazy.pop((info.group, info.kind), None)
        self._by_group_kind[(info.group, info.kind)] = info
        self._reindex()

    def register_lazy(self, group: str, kind: str, load: Callable[[], KindInfo]) -> None:
        self._by_group_kind.pop((group, kind), None)
        self._lazy[(group, kind)] = load
        self._reindex()

    def unregister(self, group: str, kind: str) -> None:
        self._by_group_kind.pop((group, kind), None)
        self._lazy.pop((group, kind), None)
        self._reindex()

    def _load(self, keys: list[tuple[str, str]]) -> None:
        if keys:
            for key in keys:
                self._by_group_kind[key] = self._lazy.pop(key)()
            self._reindex()

    def _load_all(self) -> None:
        self._load(sorted(self._lazy))

    def _reindex(self) -> None:
        by_kind: dict[str, list[KindInfo]] = {}
        names: dict[str, KindInfo] = {}
        for info in self._by_group_kind.values():
            by_kind.setdefault(info.kind, []).append(info)
            for n in (info.plural, info.singular, *info.short_names, f"{info.plural}.{info.group}",
                      f"{info.singular}.{info.group}"):
                names.setdefault(n.lower().rstrip("."), info)  # first registered keeps a shared name
        self._by_kind = {k: tuple(v) for k, v in by_kind.items()}
        self._names = names

    def __iter__(self) -> Iterator[KindInfo]:
        self._load_all()
        return iter(sorted(self._by_group_kind.values(), key=lambda i: (i.group, i.kind)))

    def is_custom(self, group: str, kind: str) -> bool:
        """Whether (group, kind) is defined by a CRD (parses nothing)."""
        if (group, kind) in self._lazy:
            return True
        info = self._by_group_kind.get((group, kind))
        return info is not None and info.crd is not None

    def custom_kinds(self) -> list[str]:
        """The kind names defined by CRDs (parses nothing)."""
        return sorted({k for g, k in (*self._lazy, *self._by_group_kind) if self.is_custom(g, k)})

    def groups_of(self, kind: str) -> list[str]:
        """The API groups that define a custom resource of this kind name (InferencePool has two; parses nothing)."""
        return sorted({g for g, k in (*self._lazy, *self._by_group_kind) if k == kind and self.is_custom(g, k)})

    def kinds_in_group(self, group: str) -> list[str]:
        """The kind names registered in an API group, built-in or custom (parses nothing)."""
        return sorted({k for g, k in (*self._lazy, *self._by_group_kind) if g == group})

    def get(self, group: str, kind: str) -> KindInfo | None:
        if (group, kind) in self._lazy:
            self._load([(group, kind)])
        return self._by_group_kind.get((group, kind))

    def of(self, api_version: str, kind: str) -> KindInfo | None:
        group, sep, _ = str(api_version).rpartition("/")
        return self.get(group if sep else "", kind)

    def by_kind(self, kind: str) -> tuple[KindInfo, ...]:
        self._load([k for k in sorted(self._lazy) if k[1] == kind])
        return self._by_kind.get(kind, ())

    def resolve(self, resource: str) -> KindInfo | None:
        """The kind `kubectl get RESOURCE` means: plural, singular, short name or kind, optionally `.group`."""
        self._load_all()
        return self._names.get(resource.lower())

    def is_cluster_scoped(self, kind: str) -> bool:
        infos = self.by_kind(kind)
        return not infos[0].namespaced if infos else kind in BUILT_IN_CLUSTER_SCOPED

    def is_simulated(self, api_version: str, kind: str) -> bool:
        info = self.of(api_version, kind)
        return info is not None and info.simulates(str(api_version).rpartition("/")[2])

    def create_order(self, kind: str) -> int:
        infos = self.by_kind(kind)
        return infos[0].create_order if infos else 9

    def printer_columns(self, obj: dict) -> tuple[PrinterColumn, ...] | None:
        """The CRD's columns for the object's version (None for kinds printed by built-in printers)."""
        info = self.of(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        if info is None or info.columns is None:
            return None
        version = str(obj.get("apiVersion") or "").rpartition("/")[2]
        return info.columns.get(version, info.columns.get(info.versions[0], ()))

    def pod_templates(self, obj: dict) -> list[PodTemplateRef]:
        info = self.of(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")) if isinstance(obj, dict) \
            else None
        if info is None:
            infos = self.by_kind(str(obj.get("kind") or "")) if isinstance(obj, dict) else ()
            info = infos[0] if infos else None
        return _walk(obj, info.pod_templates) if info is not None and info.pod_templates else []


@dataclass(frozen=True)
class PodTemplateRef:
    """One pod template of an object: where it is, the template (for a Pod, the object) and the templates between
    (a JobSet's Job template), each as (field path, dict)."""

    path: str  # "" for a Pod itself
    template: dict
    parents: tuple[tuple[str, dict], ...] = field(default=())

    def at(self, sub: str) -> str:
        """The field path of `sub` inside the template ("spec", "metadata")."""
        return f"{self.path}.{sub}" if self.path else sub

    @property
    def spec(self) -> dict:
        s = self.template.get("spec")
        return s if isinstance(s, dict) else {}

    @property
    def metadata(self) -> dict:
        m = self.template.get("metadata")
        return m if isinstance(m, dict) else {}


def _resolve(holder: Any, path: str, base: str) -> list[tuple[str, dict]]:
    """The dicts at `path` under holder (a [*] step iterates a list), with their full field paths; anything
    malformed is skipped (validation reports it)."""
    found: list[tuple[str, Any]] = [(base, holder)]
    for step in [s for s in path.split(".") if s]:
        name, star = (step[:-3], True) if step.endswith("[*]") else (step, False)
        # "{a,b}": either field, in that order (a LeaderWorkerSet's leaderTemplate and workerTemplate)
        names = name[1:-1].split(",") if name.startswith("{") and name.endswith("}") else [name]
        nxt: list[tuple[str, Any]] = []
        for p, h in found:
            for name in names:
                v = h.get(name) if isinstance(h, dict) else None
                here = f"{p}.{name}" if p else name
                if star:
                    nxt += [(f"{here}[{i}]", x) for i, x in enumerate(v)] if isinstance(v, list) else []
                elif v is not None:
                    nxt.append((here, v))
        found = nxt
    return [(p, h) for p, h in found if isinstance(h, dict)]


def _walk(obj: dict, steps: tuple[str, ...]) -> list[PodTemplateRef]:
    if steps == ("",):
        return [PodTemplateRef("", obj)]
    level: list[tuple[str, dict, tuple[tuple[str, dict], ...]]] = [("", obj, ())]
    for i, step in enumerate(steps):
        found = [(p, h, parents) for path, holder, parents in level for p, h in _resolve(holder, step, path)]
        inner = i < len(steps) - 1  # the next step starts inside these templates: they become parents
        level = [(p, h, (*parents, (p, h)) if inner else parents) for p, h, parents in found]
    return [PodTemplateRef(p, h, parents) for p, h, parents in level]


def default_registry() -> KindRegistry:
    """The built-in kinds, Kueue's Workload and every shipped CRD (each parsed when first asked for)."""
    registry = KindRegistry((*BUILT_IN, WORKLOAD, CHANGE))
    for (group, kind), (f, sim, o, t) in CRDS.items():
        registry.register_lazy(group, kind, functools.partial(_shipped, f, sim, o, t))
    return registry


def _shipped(filename: str, simulated: tuple[str, ...] | None, create_order: int,
             pod_templates: tuple[str, ...]) -> KindInfo:
    return from_crd(crd_document(filename), simulated=simulated, create_order=create_order,
                    pod_templates=pod_templates)


REGISTRY = default_registry()


@contextlib.contextmanager
def registered(info: KindInfo) -> Iterator[KindInfo]:
    """Register a kind for the duration of a with-block (tests, plug-ins tried out)."""
    old = REGISTRY.get(info.group, info.kind)
    REGISTRY.register(info)
    try:
        yield info
    finally:
        if old is None:
            REGISTRY.unregister(info.group, info.kind)
        else:
            REGISTRY.register(old)


def is_cluster_scoped(kind: str) -> bool:
    return REGISTRY.is_cluster_scoped(kind)


def is_simulated(api_version: str, kind: str) -> bool:
    return REGISTRY.is_simulated(api_version, kind)


def create_order(kind: str) -> int:
    return REGISTRY.create_order(kind)


def pod_templates(obj: dict) -> list[PodTemplateRef]:
    return REGISTRY.pod_templates(obj)
