"""Kueue's manager Configuration (`config.kueue.x-k8s.io` v1beta2 and v1beta1 `Configuration`), a scenario object.

It is the file users put in the `kueue-manager-config` ConfigMap (`controller_manager_config.yaml`). The twin reads
the fields that change what Kueue decides, with Kueue's own defaults, and validates them:

- ``waitForPodsReady`` (kubernetes-sigs/kueue apis/config/v1beta2/configuration_types.go ``WaitForPodsReady``,
  ``RequeuingStrategy``; defaults from apis/config/v1beta2/defaults.go): in v1beta2 the struct's presence enables it
  (apis/config/v1beta1/configuration_conversion.go drops it when v1beta1 ``enable`` is false); ``timeout`` 30m
  (``DefaultWaitForPodsReadyTimeout``), ``blockAdmission`` false, ``recoveryTimeout`` = ``timeout`` ("0s" turns it
  off), ``requeuingStrategy`` {``timestamp`` Eviction, ``backoffLimitCount`` unset = requeue forever,
  ``backoffBaseSeconds`` 60, ``backoffMaxSeconds`` 3600}. v1beta1 (apis/config/v1beta1/defaults.go): ``enable``
  (false), ``timeout`` 5m (``defaultPodsReadyTimeout``) and ``blockAdmission`` true when enabled.
- ``fairSharing``: v1beta2 presence enables it and ``preemptionStrategies`` is required (pkg/config/validation.go
  validateFairSharing, one of the three supported lists); v1beta1 has ``enable`` and the conversion fills in
  [LessThanOrEqualToFinalShare, LessThanInitialShare].
- ``admissionFairSharing`` {usageHalfLifeTime, usageSamplingInterval (5m), resourceWeights}: validated and kept;
  the scheduler core does not order by it yet (a notice).
- ``manageJobsWithoutQueueName`` (false): validated and kept; the twin manages only queued jobs (true: a notice).
- ``featureGates``: ``PartialAdmission`` (on) switches partial admission, ``SchedulingEquivalenceHashing`` (on)
  the queues' bulk move of equivalent workloads to the inadmissible set; other known gates are accepted.
- ``clientConnection`` {``qps``, ``burst``}: the manager's API client (apis/config/v1beta2/defaults.go
  ``DefaultClientConnectionQPS`` 300, ``DefaultClientConnectionBurst`` 500, also the release manifests' values,
  config/components/manager/controller_manager_config.yaml); cmd/kueue/main.go makes it one token bucket for all
  of the manager's requests, and a negative qps turns it off. Kueue's writes wait on it (`sim.apiclient`).
- ``integrations.frameworks``: which kinds Kueue manages; defaults.go sets ["batch/job"] when the list is empty,
  so a Configuration without ``jobset.x-k8s.io/jobset`` leaves queued JobSets unmanaged (they start at once). With
  no Configuration at all the twin manages Jobs, JobSets, plain Pods (``pod``), LeaderWorkerSets
  (``leaderworkerset.x-k8s.io/leaderworkerset``, `controller.lws`), Kubeflow TrainJobs and PyTorchJobs; the release
  manifests' config at kubernetes-sigs/kueue@ff69552e lists batch/job, jobset, trainer.kubeflow.org/trainjob, pod and
  leaderworkerset (with kubeflow.org/pytorchjob commented out); listing the LWS framework without ``pod`` enables the
  pod framework only for the LWS's pods (ImplicitlyEnabledFrameworkNames).

The fields that change Kueue's decisions but are not modelled (`UNMODELLED`: managedJobsNamespaceSelector,
resources, objectRetentionPolicies, multiKueue, integrations.externalFrameworks / labelKeysToCopy, ...) are each a
validate notice saying what the run does instead; the controller-manager plumbing (webhook, metrics,
leaderElection, controller, ...) is accepted and has no effect on a run. Durations are Go
``time.Duration`` strings as ``metav1.Duration`` decodes them ("5m", "1h30m").

Where Kueue reads it: the manager runs with ``--config=/controller_manager_config.yaml``, a subPath mount of the
key ``controller_manager_config.yaml`` of the ConfigMap ``kueue-manager-config`` in ``kueue-system``
(kubernetes-sigs/kueue@ff69552e config/components/manager/kustomization.yaml: configMapGenerator ``manager-config``
from that file; config/default/kustomization.yaml: namespace kueue-system, namePrefix ``kueue-``;
config/default/manager_config_patch.yaml: the flag and the mount; the Helm chart names it
``{{fullname}}-manager-config``). pkg/config/config.go fromFile decodes it strictly (serializer.EnableStrict), so a
file that is not YAML, or not a Configuration, stops the manager. The twin reads that ConfigMap (`from_configmap`)
exactly as it reads a bare Configuration document in the scenario (the file itself, a twin convenience); a scenario
giving both is refused (`scenario_diagnostics`): a cluster has one file, and picking one silently could run with
settings the author did not mean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.loader import Manifest, load_text

GROUP = "config.kueue.x-k8s.io"
API_VERSIONS = (f"{GROUP}/v1beta2", f"{GROUP}/v1beta1")
KIND = "Configuration"
DEFAULT_NAME = "kueue-manager-config"  # stored under the ConfigMap's name when the file has no metadata
CONFIGMAP_NAMESPACE = "kueue-system"  # config/default/kustomization.yaml namespace
CONFIGMAP_KEY = "controller_manager_config.yaml"  # config/components/manager/kustomization.yaml files
# integrations.frameworks names of the kinds the twin's job framework runs (pkg/controller/jobs/*).
FRAMEWORK_KINDS = {"batch/job": "Job", "jobset.x-k8s.io/jobset": "JobSet", "pod": "Pod",
                   "trainer.kubeflow.org/trainjob": "TrainJob", "kubeflow.org/pytorchjob": "PyTorchJob",
                   "leaderworkerset.x-k8s.io/leaderworkerset": "LeaderWorkerSet"}
DEFAULT_FRAMEWORKS = ("batch/job",)  # defaults.go defaultJobFrameworkName
# configuration_types.go Integrations.Frameworks: the built-in integrations (validateIntegrations: NotSupported).
BUILTIN_FRAMEWORKS = (
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice", "ray.io/raycluster",
    "jobset.x-k8s.io/jobset", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob", "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper", "sparkoperator.k8s.io/sparkapplication", "pod", "deployment",
    "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")

# apis/config/v1beta2/defaults.go DefaultClientConnectionQPS / DefaultClientConnectionBurst (kubernetes-sigs/kueue
# #12440 raised them from 50 / 100, the values test/performance/scheduler/minimalkueue still uses).
DEFAULT_CLIENT_QPS = 300.0
DEFAULT_CLIENT_BURST = 500

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
DEFAULT_PREEMPTION_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
# pkg/config/validation.go: the supported preemptionStrategies lists.
SUPPORTED_STRATEGIES = ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), (LESS_THAN_INITIAL_SHARE,), DEFAULT_PREEMPTION_STRATEGIES)

# Kueue feature gates the twin knows (pkg/features/kube_features.go); others are accepted with a notice.
KNOWN_GATES = frozenset({
    "PartialAdmission", "FlavorFungibility", "PrioritySortingWithinCohort", "TopologyAwareScheduling",
    "AdmissionFairSharing", "KueueDRAIntegration", "FairSharingPrioritizeNonBorrowing",
    "FlavorFungibilityPreserveScanProgress", "PrioritizePreemptorWorkloads", "ConcurrentAdmission",
    "MultiKueue", "ProvisioningACC", "VisibilityOnDemand", "LocalQueueMetrics", "LendingLimit",
    "ElasticJobsViaWorkloadSlices", "ManagedJobsNamespaceSelector", "ObjectRetentionPolicies",
    "SchedulingEquivalenceHashing", "HierarchicalCohorts", "TASFailedNodeReplacementFailFast",
    "WorkloadLevelWaitForPodsReady", "DynamicResourceAllocation",
})

_GO_DURATION = re.compile(r"^[+-]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$")
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(value: object) -> float:
    """A Go time.Duration string ("90s", "5m", "1h30m", "0") in seconds; ValueError otherwise."""
    text = str(value).strip() if isinstance(value, str) else None
    if text == "0":
        return 0.0
    if text is None or not _GO_DURATION.match(text):
        raise ValueError(f"time: invalid duration {value!r}: write a Go duration such as 90s, 5m or 1h30m")
    seconds = sum(float(n) * _GO_UNITS[u] for n, u in _GO_PART.findall(text))
    return -seconds if text.startswith("-") else seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # Go decodes "3" into an int32 field as an error


def _duration(v: object) -> object:
    if v is None:
        return v
    if go_duration(v) < 0:
        raise ValueError(f"invalid duration {v!r}: must not be negative")
    return v


class RequeuingStrategyModel(_Strict):
    timestamp: Literal["Eviction", "Creation"] | None = None
    backoffLimitCount: int | None = None
    backoffBaseSeconds: int | None = None
    backoffMaxSeconds: int | None = None

    @field_validator("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds")
    @classmethod
    def _non_negative(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError("must be greater than or equal to 0")
        return v


class WaitForPodsReadyV1beta2(_Strict):
    timeout: str | None = None
    blockAdmission: bool | None = None
    recoveryTimeout: str | None = None
    requeuingStrategy: RequeuingStrategyModel | None = None
    maxTimeoutOnWorkload: str | None = None

    _check = field_validator("timeout", "recoveryTimeout", "maxTimeoutOnWorkload")(_duration)


class WaitForPodsReadyV1beta1(WaitForPodsReadyV1beta2):
    enable: bool = False


class FairSharingV1beta2(_Strict):
    preemptionStrategies: list[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]] | None = None

    @field_validator("preemptionStrategies")
    @classmethod
    def _supported(cls, v: list[str] | None) -> list[str] | None:
        if v and tuple(v) not in SUPPORTED_STRATEGIES:
            raise ValueError(f"unsupported list {v}: use one of " + ", ".join(str(list(s)) for s in
                                                                             SUPPORTED_STRATEGIES))
        return v


class FairSharingV1beta1(FairSharingV1beta2):
    enable: bool = False


class IntegrationsModel(_Strict):
    frameworks: list[str] | None = None
    externalFrameworks: list[str] | None = None
    labelKeysToCopy: list[str] | None = None
    podOptions: Any = None  # v1beta1, deprecated

    @field_validator("frameworks")
    @classmethod
    def _builtin(cls, v: list[str] | None) -> list[str] | None:
        for f in v or []:
            if f not in BUILTIN_FRAMEWORKS:
                raise ValueError(f"Unsupported value: {f!r}: supported values: " + ", ".join(BUILTIN_FRAMEWORKS))
        if v and len(set(v)) != len(v):
            raise ValueError("Duplicate value: a framework is listed twice")
        return v


class AdmissionFairSharingModel(_Strict):
    usageHalfLifeTime: str | None = None
    usageSamplingInterval: str | None = None
    resourceWeights: dict[str, float] | None = None

    _check = field_validator("usageHalfLifeTime", "usageSamplingInterval")(_duration)


class ClientConnectionModel(BaseModel):
    """apis/config/v1beta2 configuration_types.go ClientConnection: the manager's API client limits."""

    model_config = ConfigDict(extra="forbid")
    qps: float | None = None
    burst: int | None = None


class _ConfigurationBase(BaseModel):
    """The top level: modelled fields typed, the manager's other fields accepted as they are."""

    model_config = ConfigDict(extra="forbid")
    apiVersion: str
    kind: Literal["Configuration"]
    metadata: dict[str, Any] | None = None
    namespace: str | None = None
    manageJobsWithoutQueueName: bool = False
    managedJobsNamespaceSelector: dict[str, Any] | None = None
    admissionFairSharing: AdmissionFairSharingModel | None = None
    featureGates: dict[str, bool] | None = None
    # Accepted, no effect on a run (controller-manager plumbing).
    webhook: Any = None
    leaderElection: Any = None
    metrics: Any = None
    health: Any = None
    pprofBindAddress: Any = None
    controller: Any = None
    tls: Any = None
    internalCertManagement: Any = None
    clientConnection: ClientConnectionModel | None = None
    integrations: IntegrationsModel | None = None
    multiKueue: Any = None
    resources: Any = None
    objectRetentionPolicies: Any = None
    visibilityServer: Any = None


class ConfigurationV1beta2(_ConfigurationBase):
    waitForPodsReady: WaitForPodsReadyV1beta2 | None = None
    fairSharing: FairSharingV1beta2 | None = None


class ConfigurationV1beta1(_ConfigurationBase):
    waitForPodsReady: WaitForPodsReadyV1beta1 | None = None
    fairSharing: FairSharingV1beta1 | None = None
    queueVisibility: Any = None


# ---------------------------------------------------------------------------------------------------- parsed


@dataclass(frozen=True)
class WaitForPodsReady:
    """waitForPodsReady with defaults applied; times in seconds. backoff_limit_count None = requeue forever."""

    timeout: float = 1800.0
    block_admission: bool = False
    recovery_timeout: float | None = 1800.0  # None: recovery timeout checking off ("0s")
    timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600

    def backoff(self, count: int) -> float:
        """Seconds until requeue after the count-th eviction: base * 2^(count-1), capped at max.

        workload.UpdateRequeueState uses wait.Backoff with Jitter 0.0001 (up to +0.01% of each step); the twin
        leaves the jitter out so that runs stay deterministic, and keeps second precision as metav1.Time does."""
        return float(min(self.backoff_base_seconds * 2 ** max(0, count - 1), self.backoff_max_seconds))


@dataclass(frozen=True)
class KueueConfig:
    """What the twin's Kueue reads from the Configuration; ``KueueConfig()`` is Kueue without a config file."""

    wait_for_pods_ready: WaitForPodsReady | None = None
    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = DEFAULT_PREEMPTION_STRATEGIES
    admission_fair_sharing: dict | None = None
    manage_jobs_without_queue_name: bool = False
    feature_gates: dict[str, bool] = field(default_factory=dict)
    frameworks: tuple[str, ...] = tuple(FRAMEWORK_KINDS)
    client_qps: float = DEFAULT_CLIENT_QPS  # clientConnection.qps (negative: no client-side rate limiting)
    client_burst: int = DEFAULT_CLIENT_BURST  # clientConnection.burst

    @property
    def partial_admission(self) -> bool:
        return self.feature_gates.get("PartialAdmission", True)

    @property
    def equivalence_hashing(self) -> bool:
        """SchedulingEquivalenceHashing (beta, on since kubernetes-sigs/kueue fab9b7ce70; `kueue.queue`)."""
        return self.feature_gates.get("SchedulingEquivalenceHashing", True)

    @property
    def managed_kinds(self) -> frozenset[str]:
        return frozenset(FRAMEWORK_KINDS[f] for f in self.frameworks if f in FRAMEWORK_KINDS)


def parse(obj: dict) -> KueueConfig:
    """A (valid) Configuration dict, either version, as a KueueConfig with Kueue's defaults."""
    v1beta1 = obj.get("apiVersion") == f"{GROUP}/v1beta1"
    wfpr = obj.get("waitForPodsReady")
    wait = None
    if wfpr is not None and (not v1beta1 or wfpr.get("enable")):
        timeout = go_duration(wfpr["timeout"]) if wfpr.get("timeout") else (300.0 if v1beta1 else 1800.0)
        recovery = go_duration(wfpr["recoveryTimeout"]) if wfpr.get("recoveryTimeout") is not None else timeout
        block = wfpr.get("blockAdmission")
        rs = wfpr.get("requeuingStrategy") or {}
        wait = WaitForPodsReady(
            timeout=timeout, block_admission=(v1beta1 if block is None else bool(block)),
            recovery_timeout=recovery or None, timestamp=rs.get("timestamp") or "Eviction",
            backoff_limit_count=rs.get("backoffLimitCount"),
            backoff_base_seconds=int(60 if rs.get("backoffBaseSeconds") is None else rs["backoffBaseSeconds"]),
            backoff_max_seconds=int(3600 if rs.get("backoffMaxSeconds") is None else rs["backoffMaxSeconds"]))
    conn = obj.get("clientConnection") or {}
    fs = obj.get("fairSharing")
    fair = fs is not None and (not v1beta1 or bool(fs.get("enable")))
    strategies = tuple((fs or {}).get("preemptionStrategies") or DEFAULT_PREEMPTION_STRATEGIES)
    return KueueConfig(wait_for_pods_ready=wait, fair_sharing=fair, preemption_strategies=strategies,
                       admission_fair_sharing=obj.get("admissionFairSharing"),
                       manage_jobs_without_queue_name=bool(obj.get("manageJobsWithoutQueueName")),
                       feature_gates=dict(obj.get("featureGates") or {}),
                       frameworks=tuple((obj.get("integrations") or {}).get("frameworks") or DEFAULT_FRAMEWORKS),
                       client_qps=float(DEFAULT_CLIENT_QPS if conn.get("qps") is None else conn["qps"]),
                       client_burst=int(DEFAULT_CLIENT_BURST if conn.get("burst") is None else conn["burst"]))


# ---------------------------------------------------------------------------------------------------- validate


def _path(loc: tuple) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _hint(e: Mapping[str, Any], v1beta1: bool) -> str:
    if e["type"] == "literal_error":
        return f"use one of {e.get('ctx', {}).get('expected', '')}"
    if e["type"] == "extra_forbidden":
        name = str(e["loc"][-1])
        if name == "enable" and not v1beta1:
            return ("config.kueue.x-k8s.io/v1beta2 has no enable: the section's presence turns it on "
                    "(v1beta1 had enable: true)")
        return "remove it, or check its spelling against Kueue's Configuration API (apis/config/v1beta2)"
    return ""


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """Unknown fields and wrong values in a Configuration, each naming file:line, the field path and the fix."""
    v1beta1 = m.obj.get("apiVersion") == f"{GROUP}/v1beta1"
    model = ConfigurationV1beta1 if v1beta1 else ConfigurationV1beta2
    ref = m.ref
    out: list[Diagnostic] = []
    try:
        model.model_validate(m.obj)
    except ValidationError as exc:
        for e in exc.errors():
            # pydantic adds the failing union member / literal to loc for list items; keep the field path
            loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("literal[")))
            fld = _path(loc)
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = f'strict decoding error: unknown field "{fld}"'
            elif e["type"] == "literal_error":
                msg = f"Unsupported value: {e.get('input')!r}: {msg}"
            else:
                msg = f"Invalid value: {e.get('input')!r}: {msg}"
            out.append(Diagnostic(m.file, m.line_of(fld), ref, fld, msg, _hint(e, v1beta1)))
    fs = m.obj.get("fairSharing")
    if not v1beta1 and (fs == {} or (isinstance(fs, dict) and "preemptionStrategies" in fs
                                     and not fs["preemptionStrategies"])):
        fld = "fairSharing.preemptionStrategies"
        out.append(Diagnostic(m.file, m.line_of(fld), ref, fld, "Required value: must be specified",
                              "list the strategies, e.g. preemptionStrategies: [LessThanOrEqualToFinalShare, "
                              "LessThanInitialShare]"))
    if any(d.severity == "error" for d in out):
        return out
    for gate in sorted(m.obj.get("featureGates") or {}):
        if gate not in KNOWN_GATES:
            fld = f"featureGates.{gate}"
            out.append(Diagnostic(m.file, m.line_of(fld), ref, fld, f"feature gate {gate} is not one the twin "
                                  "knows: it is accepted and has no effect on the run", "", "notice"))
    frameworks = (m.obj.get("integrations") or {}).get("frameworks") or []
    if "jobset.x-k8s.io/jobset" not in frameworks:
        fld = "integrations.frameworks" if frameworks else "integrations"
        out.append(Diagnostic(m.file, m.line_of(fld), ref, fld,
                              f"Kueue manages only {', '.join(frameworks or DEFAULT_FRAMEWORKS)} with this "
                              "Configuration: JobSets labelled kueue.x-k8s.io/queue-name are not queued and start "
                              "at once", "add jobset.x-k8s.io/jobset to integrations.frameworks to queue JobSets",
                              "notice"))
    for fld, message in _unmodelled(m.obj):
        out.append(Diagnostic(m.file, m.line_of(fld), ref, fld, message, "", "notice"))
    wfpr = m.obj.get("waitForPodsReady") or {}
    if v1beta1 and wfpr and not wfpr.get("enable"):
        out.append(Diagnostic(m.file, m.line_of("waitForPodsReady"), ref, "waitForPodsReady",
                              "waitForPodsReady.enable is false: the section has no effect",
                              "set enable: true to turn it on", "notice"))
    return out


# Configuration fields that change what Kueue decides and that the twin's Kueue does not model: what Kueue does with
# each (apis/config/v1beta2/configuration_types.go) and what the run does instead. The controller-manager plumbing
# (health, metrics, webhook, leaderElection, controller, pprofBindAddress, tls,
# internalCertManagement, visibilityServer, namespace) changes no decision and is accepted without a notice.
UNMODELLED: dict[str, str] = {
    "manageJobsWithoutQueueName": "Kueue would also manage Jobs, JobSets and Pods without "
                                  "kueue.x-k8s.io/queue-name (outside managedJobsNamespaceSelector's excluded "
                                  "namespaces): suspend them and hold them until a LocalQueue admits them; the run "
                                  "starts them at once, unqueued",
    "managedJobsNamespaceSelector": "Kueue would manage jobs only in the namespaces it selects; the run manages "
                                    "every queued job in every namespace",
    "admissionFairSharing": "Kueue would order a ClusterQueue's workloads by their LocalQueues' decayed usage; "
                            "the run orders them by priority and creation time",
    "resources": "Kueue would exclude or transform resources (excludeResourcePrefixes, transformations, "
                 "quotaCheckStrategy) before checking quota; the run checks every resource as requested",
    "objectRetentionPolicies": "Kueue would delete finished or deactivated Workloads after the retention time; "
                               "the run keeps them",
    "multiKueue": "MultiKueue dispatches workloads to worker clusters; the run admits them in this cluster",
    "integrations.externalFrameworks": "Kueue would manage these external kinds; the run does not queue them",
    "integrations.labelKeysToCopy": "Kueue would copy these labels from jobs to their Workloads; the run's "
                                    "Workloads do not carry them",
    "waitForPodsReady.maxTimeoutOnWorkload": "the run uses waitForPodsReady.timeout for every workload",
    "queueVisibility": "Kueue v1beta1's pending-workloads visibility in ClusterQueue status; the run does not "
                       "write it",
}


def _unmodelled(obj: dict) -> list[tuple[str, str]]:
    """(field path, notice) for each decision-changing field given that the twin does not model."""
    out = []
    for fld, what in UNMODELLED.items():
        parent, _, leaf = fld.rpartition(".")
        holder = obj.get(parent) if parent else obj
        value = holder.get(leaf) if isinstance(holder, dict) else None
        if value is None or value is False or value == [] or value == {}:
            continue
        if fld == "manageJobsWithoutQueueName" and value is not True:
            continue
        out.append((fld, f"{fld} is not modelled: {what}"))
    return out


# ---------------------------------------------------------------------------------------------------- the ConfigMap


def _meta(m: Manifest) -> dict:
    meta = m.obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def is_manager_configmap(m: Manifest) -> bool:
    """A ConfigMap named kueue-manager-config, in any namespace (only kueue-system's is read)."""
    return m.kind == "ConfigMap" and m.obj.get("apiVersion") == "v1" and _meta(m).get("name") == DEFAULT_NAME


def _read_configmap(m: Manifest) -> tuple[Manifest | None, list[Diagnostic]]:
    """The Configuration in kueue-system/kueue-manager-config's key as a Manifest whose lines are the ConfigMap
    file's (its own diagnostics not yet checked), or the errors that stop Kueue's manager from starting."""
    ref, fld = m.ref, f"data.{CONFIGMAP_KEY}"
    data = m.obj.get("data") or {}
    if CONFIGMAP_KEY not in data:
        have = ", ".join(sorted(map(str, data))) or "none"
        return None, [Diagnostic(m.file, m.line_of("data"), ref, "data", f"Kueue's manager reads "
                                 f"--config=/controller_manager_config.yaml from key {CONFIGMAP_KEY} of this "
                                 f"ConfigMap, and it has no such key (keys: {have}): the manager does not start",
                                 f"put the Configuration under data.{CONFIGMAP_KEY}: |")]
    text = str(data[CONFIGMAP_KEY])
    base = m.blocks.get(fld)  # a literal block: the text's line k is the file's line base + k
    key_line = m.line_of(fld)

    def where(line: int) -> int:
        return base + line if base is not None and line > 0 else key_line

    try:
        docs = load_text(text, m.file)
    except KubetwinError as exc:
        return None, [Diagnostic(m.file, where(d.line), ref, fld, f"{d.message} in the manager's config file "
                                 f"({CONFIGMAP_KEY}): Kueue's manager does not start", d.hint)
                      for d in exc.diagnostics]
    if len(docs) != 1 or docs[0].kind != KIND or docs[0].obj.get("apiVersion") not in API_VERSIONS:
        got = docs[0].kind if len(docs) == 1 else f"{len(docs)} documents"
        return None, [Diagnostic(m.file, where(docs[0].line if docs else 0), ref, fld,
                                 f"{CONFIGMAP_KEY} must hold one Kueue Configuration ({' or '.join(API_VERSIONS)}), "
                                 f"got {got or 'no kind'}: Kueue's manager does not start",
                                 "write apiVersion: config.kueue.x-k8s.io/v1beta2, kind: Configuration at its top")]
    inner = docs[0]
    shifted = {k: where(v) for k, v in inner.lines.items()}
    return Manifest(inner.obj, m.file, where(inner.line), shifted), []


def configmap_diagnostics(m: Manifest) -> list[Diagnostic]:
    """What Kueue's manager would refuse in its ConfigMap (file:line of the ConfigMap's file, field paths under
    data[controller_manager_config.yaml]); a kueue-manager-config outside kueue-system is a notice: nothing reads
    it."""
    if not is_manager_configmap(m):
        return []
    ns = _meta(m).get("namespace") or "default"
    if ns != CONFIGMAP_NAMESPACE:
        return [Diagnostic(m.file, m.line_of("metadata.namespace"), m.ref, "metadata.namespace",
                           f"Kueue's manager reads its configuration from ConfigMap {DEFAULT_NAME} in "
                           f"{CONFIGMAP_NAMESPACE}; this one is in {ns} and has no effect on the run",
                           f"set metadata.namespace: {CONFIGMAP_NAMESPACE}", "notice")]
    inner, errors = _read_configmap(m)
    if inner is None:
        return errors
    prefix = f"data[{CONFIGMAP_KEY}]"
    return [Diagnostic(d.file, d.line, m.ref, f"{prefix}.{d.field}" if d.field else prefix, d.message, d.hint,
                       d.severity) for d in diagnostics(inner)]


def from_configmap(m: Manifest) -> dict | None:
    """The Configuration document kueue-system/kueue-manager-config holds, None for any other object (or one
    whose key does not decode: validate refuses it)."""
    if not is_manager_configmap(m) or (_meta(m).get("namespace") or "default") != CONFIGMAP_NAMESPACE:
        return None
    inner, _ = _read_configmap(m)
    return inner.obj if inner is not None else None


def _bare(m: Manifest) -> bool:
    return m.kind == KIND and m.obj.get("apiVersion") in API_VERSIONS


def find(manifests: list[Manifest]) -> KueueConfig | None:
    """The KueueConfig a scenario gives, from the ConfigMap Kueue reads or a bare Configuration document (the last
    one wins among bare documents, as before); None when it gives none."""
    found = [obj for m in manifests for obj in ([m.obj] if _bare(m) else [from_configmap(m)]) if obj is not None]
    return parse(found[-1]) if found else None


def scenario_diagnostics(manifests: list[Manifest]) -> list[Diagnostic]:
    """Both forms at once is an error naming both: the manager has one config file, and the twin will not guess
    which of two possibly different settings the author meant."""
    cms = [m for m in manifests if from_configmap(m) is not None]
    bare = [m for m in manifests if _bare(m)]
    if not cms or not bare:
        return []
    cm, doc = cms[-1], bare[-1]
    return [Diagnostic(doc.file, doc.line, doc.ref, "", f"Kueue's configuration is given twice: this "
                       f"Configuration document and ConfigMap {CONFIGMAP_NAMESPACE}/{DEFAULT_NAME} "
                       f"({cm.file}:{cm.line}); Kueue's manager reads only the ConfigMap's {CONFIGMAP_KEY}",
                       "keep one: the ConfigMap is what a cluster has (remove this document), or remove the "
                       "ConfigMap to use this document")]
