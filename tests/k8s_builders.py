"""Fluent builders for the core objects of a scenario, in the style of Kueue's test wrappers
(kubernetes-sigs/kueue pkg/util/testing/wrappers.go: ``MakeWorkload("w", "ns").Queue("q").Obj()``).

Every builder in tests/ works the same way: ``make_<kind>(name, ...)`` (or a named preset such as ``static_node``)
returns a wrapper, each setter changes the object and returns the wrapper, and ``.obj()`` ends the chain with a
copy of the manifest:

    make_pod("p").cpu("1").duration("1h").obj()
    make_pool("a3", "a3-highgpu-8g", 2).gpus("nvidia-h100-80gb", 8).spec(spot=True).obj()
    make_scenario("30m").seed(5).obj()
"""

from __future__ import annotations

import copy
from typing import Any, Self


class Wrapper:
    """A manifest being built; subclasses add setters for their kind's fields."""

    def __init__(self, obj: dict) -> None:
        self._obj = obj

    def name(self, name: str) -> Self:
        self._obj["metadata"]["name"] = name
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def label(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def obj(self) -> dict:
        """A copy of the manifest, so a wrapper can be ended twice (as upstream's Clone().Obj())."""
        return copy.deepcopy(self._obj)


class PodWrapper(Wrapper):
    def _container(self) -> dict:
        return self._obj["spec"]["containers"][0]

    def gpus(self, n: int) -> PodWrapper:
        self._container()["resources"].setdefault("limits", {})["nvidia.com/gpu"] = str(n)
        return self

    def cpu(self, v: str) -> PodWrapper:
        self._container()["resources"].setdefault("requests", {})["cpu"] = v
        return self

    def duration(self, d: str) -> PodWrapper:
        return self.annotation("kubetwin.io/duration", d)

    def create_at(self, t: str) -> PodWrapper:
        return self.annotation("kubetwin.io/create-at", t)

    def priority_class(self, name: str) -> PodWrapper:
        self._obj["spec"]["priorityClassName"] = name
        return self

    def node_selector(self, **labels: str) -> PodWrapper:
        self._obj["spec"]["nodeSelector"] = labels
        return self

    def node_name(self, node: str) -> PodWrapper:
        """Already bound to `node` (spec.nodeName set, as a static pod or a kubectl-created one)."""
        self._obj["spec"]["nodeName"] = node
        return self

    def init_container(self, name: str, cpu: str, sidecar: bool = False) -> PodWrapper:
        """An init container asking for `cpu`; a sidecar has restartPolicy Always (KEP-753)."""
        self._obj["spec"].setdefault("initContainers", []).append(
            {"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu}},
             **({"restartPolicy": "Always"} if sidecar else {})})
        return self


def make_pod(name: str, ns: str = "default") -> PodWrapper:
    return PodWrapper({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns,
                       "annotations": {}}, "spec": {"containers": [{"name": "c", "image": "busybox",
                                                                     "resources": {}}]}})


def init_pod(name: str, cpu: str) -> PodWrapper:
    """A pod with one container "main" asking for `cpu`, created at 0 s and running 1 h."""
    return PodWrapper({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default",
                                    "annotations": {"kubetwin.io/create-at": "0s", "kubetwin.io/duration": "1h"}},
                       "spec": {"containers": [{"name": "main", "image": "busybox",
                                                "resources": {"requests": {"cpu": cpu}}}]}})


class NodePoolWrapper(Wrapper):
    def gpus(self, accelerator: str, count: int, **fields: Any) -> NodePoolWrapper:
        """The machine's accelerators (GKE's guestAccelerator: type, count, partition size, sharing config)."""
        self._obj["spec"]["accelerators"] = [{"type": accelerator, "count": count, **fields}]
        return self

    def gpu_partition(self, size: str) -> NodePoolWrapper:
        """MIG: GKE's gpuPartitionSize (e.g. "1g.10gb") on the pool's accelerator."""
        self._obj["spec"]["accelerators"][0]["gpuPartitionSize"] = size
        return self

    def gpu_sharing(self, strategy: str, clients: int = 2) -> NodePoolWrapper:
        """GKE's gpuSharingConfig: TIME_SHARING or MPS with up to `clients` containers per GPU."""
        self._obj["spec"]["accelerators"][0]["gpuSharingConfig"] = {"gpuSharingStrategy": strategy,
                                                                    "maxSharedClientsPerGpu": clients}
        return self

    def autoscaling(self, min_nodes: int, max_nodes: int) -> NodePoolWrapper:
        self._obj["spec"]["autoscaling"] = {"minNodeCount": min_nodes, "maxNodeCount": max_nodes}
        return self

    def node_labels(self, **labels: str) -> NodePoolWrapper:
        """Labels on the pool's nodes, added to those it has."""
        self._obj["spec"].setdefault("labels", {}).update(labels)
        return self

    def spec(self, **fields: Any) -> NodePoolWrapper:
        """Any other NodePool spec field (spot, labels, taints, bootDelay, ...)."""
        self._obj["spec"].update(fields)
        return self


def make_pool(name: str, machine: str, nodes: int) -> NodePoolWrapper:
    return NodePoolWrapper({"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
                            "spec": {"machineType": machine, "nodeCount": nodes, "zones": ["us-central1-a"]}})


class NodeWrapper(Wrapper):
    def capacity(self, resources: dict[str, str]) -> NodeWrapper:
        """status.capacity, and the same allocatable (no system reservation)."""
        self._obj.setdefault("status", {}).update(capacity=resources, allocatable=dict(resources))
        return self

    def cpu(self, v: str) -> NodeWrapper:
        for field in ("capacity", "allocatable"):
            self._obj["status"][field]["cpu"] = v
        return self

    def ready(self, status: str) -> NodeWrapper:
        """The kubelet's Ready condition: "True", "False" or "Unknown"."""
        cond = self._obj["status"]["conditions"][0]
        cond["status"], cond["reason"] = status, "KubeletReady" if status == "True" else "KubeletNotReady"
        return self


def make_node(name: str) -> NodeWrapper:
    """A v1 Node labelled with its hostname, as the kubelet registers it."""
    return NodeWrapper({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})


def static_node(name: str) -> NodeWrapper:
    """A v1 Node given in the scenario (as KWOK fakes them): 4 CPUs, 16Gi, 110 pods, Ready."""
    return NodeWrapper({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "cloud.google.com/gke-nodepool": "static"}},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})


class ScenarioWrapper(Wrapper):
    def seed(self, n: int) -> ScenarioWrapper:
        self._obj["spec"]["seed"] = n
        return self

    def spec(self, **fields: Any) -> ScenarioWrapper:
        """Any other Scenario spec field (clusterAutoscaler, quotas, sampleInterval, ...)."""
        self._obj["spec"].update(fields)
        return self


def make_scenario(duration: str = "2h") -> ScenarioWrapper:
    """A Scenario "t" of `duration`, seed 1, reporting the summary."""
    return ScenarioWrapper({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
                            "spec": {"duration": duration, "seed": 1, "report": ["summary"]}})


class JobWrapper(Wrapper):
    def queue(self, name: str) -> JobWrapper:
        """Kueue's queue-name label: the Job waits in that LocalQueue."""
        return self.label("kueue.x-k8s.io/queue-name", name)

    def cpu(self, v: str) -> JobWrapper:
        self._obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = v
        return self

    def pods(self, n: int) -> JobWrapper:
        """parallelism = completions = n."""
        self._obj["spec"]["parallelism"] = self._obj["spec"]["completions"] = n
        return self

    def duration(self, d: str) -> JobWrapper:
        self._obj["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = d
        return self

    def create_at(self, t: str) -> JobWrapper:
        return self.annotation("kubetwin.io/create-at", t)


def make_job(name: str, ns: str = "default") -> JobWrapper:
    """A batch/v1 Job of one pod asking for 1 CPU for 30 minutes."""
    return JobWrapper({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
                       "spec": {"parallelism": 1, "completions": 1, "template": {
                           "metadata": {"annotations": {"kubetwin.io/duration": "30m"}},
                           "spec": {"restartPolicy": "Never", "containers": [
                               {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}})


class PriorityClassWrapper(Wrapper):
    def value(self, v: int) -> Self:
        self._obj["value"] = v
        return self


def make_priority_class(name: str) -> PriorityClassWrapper:
    """A scheduling.k8s.io/v1 PriorityClass (upstream's MakePriorityClass(name).PriorityValue(v))."""
    return PriorityClassWrapper({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}})


def make_namespace(name: str) -> Wrapper:
    return Wrapper({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


class ChangeWrapper(Wrapper):
    def patch(self, body: Any, patch_type: str = "strategic") -> ChangeWrapper:
        """`kubectl patch --type patch_type -p body` at the change's time."""
        self._obj["spec"].update(patch=body, patchType=patch_type)
        return self

    def action(self, name: str, **fields: Any) -> ChangeWrapper:
        """A shorthand (Cordon, Uncordon, Drain, Delete, Scale, Suspend, Resume) and its fields (replicas, drain)."""
        self._obj["spec"].update(action=name, **fields)
        return self


def make_change(name: str, at: str, api_version: str, kind: str, target: str, ns: str | None = None
                ) -> ChangeWrapper:
    """A kubetwin Change writing to `kind`/`target` at simulated time `at`; end it with .patch() or .action()."""
    t: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": target}
    if ns is not None:
        t["namespace"] = ns
    return ChangeWrapper({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Change", "metadata": {"name": name},
                          "spec": {"at": at, "target": t}})
class LeaderWorkerSetWrapper(Wrapper):
    """A LeaderWorkerSet (kubernetes-sigs/lws; as its test/testutils wrappers build one)."""

    def _lwt(self) -> dict:
        return self._obj["spec"]["leaderWorkerTemplate"]

    def replicas(self, n: int) -> LeaderWorkerSetWrapper:
        self._obj["spec"]["replicas"] = n
        return self

    def size(self, n: int) -> LeaderWorkerSetWrapper:
        self._lwt()["size"] = n
        return self

    def restart_policy(self, policy: str) -> LeaderWorkerSetWrapper:
        self._lwt()["restartPolicy"] = policy
        return self

    def startup_policy(self, policy: str) -> LeaderWorkerSetWrapper:
        self._obj["spec"]["startupPolicy"] = policy
        return self

    def subgroup(self, size: int, policy: str | None = None) -> LeaderWorkerSetWrapper:
        self._lwt()["subGroupPolicy"] = {"subGroupSize": size, **({"subGroupPolicyType": policy} if policy else {})}
        return self

    def rollout(self, **cfg: Any) -> LeaderWorkerSetWrapper:
        self._obj["spec"]["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": cfg}
        return self

    def worker_annotation(self, key: str, value: str) -> LeaderWorkerSetWrapper:
        """An annotation on the worker template (kubetwin.io/fail-after, ...)."""
        self._lwt()["workerTemplate"].setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self

    def worker_image(self, image: str) -> LeaderWorkerSetWrapper:
        self._lwt()["workerTemplate"]["spec"]["containers"][0]["image"] = image
        return self

    def leader_template(self, cpu: str = "1") -> LeaderWorkerSetWrapper:
        """A leader template of its own: the worker's container with another cpu request."""
        tmpl = copy.deepcopy(self._lwt()["workerTemplate"])
        tmpl["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
        tmpl["spec"]["containers"][0]["name"] = "leader"
        self._lwt()["leaderTemplate"] = tmpl
        return self


def make_lws(name: str, cpu: str = "1", ns: str = "default") -> LeaderWorkerSetWrapper:
    """One group of one pod (the CRD's defaults), each pod asking `cpu`."""
    return LeaderWorkerSetWrapper({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                   "metadata": {"name": name, "namespace": ns}, "spec": {"leaderWorkerTemplate": {
                                       "workerTemplate": {"spec": {"containers": [{
                                           "name": "worker", "image": "busybox",
                                           "resources": {"requests": {"cpu": cpu}}}]}}}}})
