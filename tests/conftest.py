"""Small fluent builders so each test reads like its scenario (in the style of Kueue's MakeWorkload)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubetwin.api.conditions import conditions_of, find_condition, is_condition_true

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


class PodBuilder:
    def __init__(self, name: str, ns: str = "default") -> None:
        self.obj: dict = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns,
                          "annotations": {}}, "spec": {"containers": [{"name": "c", "image": "busybox",
                                                                        "resources": {}}]}}

    def gpus(self, n: int) -> PodBuilder:
        self.obj["spec"]["containers"][0]["resources"].setdefault("limits", {})["nvidia.com/gpu"] = str(n)
        return self

    def cpu(self, v: str) -> PodBuilder:
        self.obj["spec"]["containers"][0]["resources"].setdefault("requests", {})["cpu"] = v
        return self

    def duration(self, d: str) -> PodBuilder:
        self.obj["metadata"]["annotations"]["kubetwin.io/duration"] = d
        return self

    def create_at(self, t: str) -> PodBuilder:
        self.obj["metadata"]["annotations"]["kubetwin.io/create-at"] = t
        return self

    def priority_class(self, name: str) -> PodBuilder:
        self.obj["spec"]["priorityClassName"] = name
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self.obj["spec"]["nodeSelector"] = labels
        return self

    def obj_(self) -> dict:
        return self.obj


def make_pod(name: str, ns: str = "default") -> PodBuilder:
    return PodBuilder(name, ns)


def make_pool(name: str, machine: str, nodes: int, gpu: str | None = None, count: int = 0, **spec) -> dict:
    s = {"machineType": machine, "nodeCount": nodes, "zones": ["us-central1-a"], **spec}
    if gpu:
        s["accelerators"] = [{"type": gpu, "count": count}]
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": s}


def scenario(duration: str = "2h", seed: int = 1, **spec) -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
            "spec": {"duration": duration, "seed": seed, "report": ["summary"], **spec}}


def write_yaml(path: Path, objs: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED


def final_objects(result, kind: str) -> dict[str, dict]:
    """The objects of `kind` as they stand when the run ends (deleted ones gone), by name."""
    out: dict[str, dict] = {}
    for _, _, etype, o in result.history:
        if o["kind"] == kind:
            if etype == "DELETED":
                out.pop(o["metadata"]["name"], None)
            else:
                out[o["metadata"]["name"]] = o
    return out


def static_node(name: str, cpu: str = "4", ready: str = "True") -> dict:
    """A v1 Node given in the scenario (as KWOK fakes them)."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "cloud.google.com/gke-nodepool": "static"}},
        "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": ready,
                                   "reason": "KubeletReady" if ready == "True" else "KubeletNotReady"}]}}


def missing_shared_trace(path: Path) -> str | None:
    """A RequestTrace file (under ../shared) that this checkout does not have: tests that need it skip."""
    if path.is_dir():
        return None
    for doc in yaml.safe_load_all(path.read_text()):
        if (doc or {}).get("kind") == "RequestTrace" and (doc.get("spec") or {}).get("path"):
            if not (path.parent / doc["spec"]["path"]).exists():
                return doc["spec"]["path"]
    return None


def condition(obj: dict, ctype: str) -> dict:
    """The object's status condition of that type ({} when it has none): apimachinery's FindStatusCondition."""
    return find_condition(conditions_of(obj), ctype) or {}


def is_true(obj: dict, ctype: str) -> bool:
    """Whether the object's condition of that type is True: apimachinery's IsStatusConditionTrue."""
    return is_condition_true(conditions_of(obj), ctype)


def bound_pod(name: str, node: str, cpu: str, at: str = "0s") -> dict:
    """A pod already bound to `node` (spec.nodeName set, as a static pod or a kubectl-created one)."""
    pod = make_pod(name).cpu(cpu).duration("1h").create_at(at).obj_()
    pod["spec"]["nodeName"] = node
    return pod


def init_pod(name: str, cpu: str, init: list[tuple[str, str, bool]] = (), at: str = "0s") -> dict:
    """A pod with one container asking for `cpu`, and init containers (name, cpu, sidecar?) in order."""
    spec: dict = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if init:
        spec["initContainers"] = [{"name": n, "image": "busybox", "resources": {"requests": {"cpu": c}},
                                   **({"restartPolicy": "Always"} if sidecar else {})} for n, c, sidecar in init]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"kubetwin.io/create-at": at, "kubetwin.io/duration": "1h"}},
            "spec": spec}
