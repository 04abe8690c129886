"""Watch handlers only enqueue work: a write from inside a handler is refused, and the order in which
controllers were created (the order their watches are called in) does not change a run's outcome.

client-go's informers hand events to ResourceEventHandlers that add keys to a workqueue; the controller's
workers do the writes later (k8s.io/sample-controller controller.go enqueueFoo; kube-controller-manager's
resourceclaim controller enqueuePod, the garbage collector's attemptToDelete queue).
"""

from __future__ import annotations

import re

import pytest
import yaml

from kubetwin.runner import run
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store, WriteDuringDispatch


def test_a_handler_that_writes_during_dispatch_is_refused() -> None:
    store = Store(Environment())

    def bad_handler(etype: str, obj: dict, old: dict | None) -> None:  # writes instead of enqueuing
        store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "copy", "namespace": "default"}})

    store.watch("Secret", bad_handler)
    with pytest.raises(WriteDuringDispatch, match=r"bad_handler handled ADDED Secret s and wrote \(create ConfigMap "
                                                  r"default/copy\) during dispatch"):
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})


def test_a_handler_that_enqueues_its_write_is_fine() -> None:
    env = Environment()
    store = Store(env)

    def good_handler(etype: str, obj: dict, old: dict | None) -> None:
        if etype == "ADDED":
            env.after(0, lambda: store.create({"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "copy", "namespace": "default"}}))

    store.watch("Secret", good_handler)
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})
    assert store.get("ConfigMap", "default", "copy") is None  # not yet: queued
    env.run(1)
    assert store.get("ConfigMap", "default", "copy") is not None


# DRA (claims from a template, released and deleted with their pods) + Kueue (JobSets admitted by quota, a
# ClusterQueue inactive for a missing AdmissionCheck, Workloads collected with their JobSet) + JobSet (a set
# deleted mid-run: the garbage collector takes its Jobs and pods).
SCENARIO = """
apiVersion: kubetwin.io/v1alpha1
kind: Scenario
metadata: {name: order}
spec: {duration: 2h, seed: 3}
---
apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: h100-dra}
spec:
  machineType: a3-highgpu-8g
  nodeCount: 1
  accelerators: [{type: nvidia-h100-80gb, count: 8, gpuDriverInstallation: INSTALLATION_DISABLED}]
  labels: {gke-no-default-nvidia-gpu-device-plugin: "true", nvidia.com/gpu.present: "true"}
---
apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: a100-dra}
spec:
  machineType: a2-highgpu-2g
  nodeCount: 1
  accelerators: [{type: nvidia-tesla-a100, count: 2, gpuDriverInstallation: INSTALLATION_DISABLED}]
  labels: {gke-no-default-nvidia-gpu-device-plugin: "true", nvidia.com/gpu.present: "true"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "6"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: checked}
spec:
  namespaceSelector: {}
  admissionChecksStrategy: {admissionChecks: [{name: missing-check}]}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "6"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gated, namespace: default}
spec: {clusterQueue: checked}
"""


def jobset(name: str, queue: str, replicas: int, pods: int, duration: str, **annotations: str) -> dict:
    pod_spec = {"restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "busybox", "resources": {
                    "requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}
    job = {"parallelism": pods, "completions": pods, "template": {
        "metadata": {"annotations": {"kubetwin.io/duration": duration}}, "spec": pod_spec}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue},
                         "annotations": annotations},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": job}}]}}


def objects() -> list[dict]:
    return [*yaml.safe_load_all(SCENARIO),
            jobset("train", "main", 2, 2, "30m"),
            jobset("scratch", "main", 1, 2, "1h", **{"kubetwin.io/delete-at": "10m"}),
            jobset("later", "main", 1, 4, "20m", **{"kubetwin.io/create-at": "1m"}),
            jobset("held", "gated", 1, 1, "10m")]


_SUFFIX = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}$")  # generateName's random suffix


def outcome(result) -> dict[tuple, list[tuple]]:
    """Per object (generated name suffixes dropped), its state at the end of each instant it changed in: where
    its pods ran and when, which claims were allocated and released, which Workloads were admitted or collected.
    Writes within one instant may interleave differently (controllers run concurrently in a cluster), and names
    drawn from the shared seeded generator may differ; what each instant ends with must not."""
    states: dict[tuple, dict[float, tuple]] = {}
    for t, _, etype, o in result.history:
        if o["kind"] not in ("Pod", "ResourceClaim", "Workload", "Job", "JobSet", "ClusterQueue", "LocalQueue"):
            continue
        st = o.get("status") or {}
        conds = tuple(sorted((c["type"], c["status"], c.get("reason", "")) for c in st.get("conditions") or []))
        key = (o["kind"], _SUFFIX.sub("", o["metadata"]["name"]))
        states.setdefault(key, {})[t] = None if etype == "DELETED" else (
            (o.get("spec") or {}).get("nodeName"), st.get("phase"), conds, bool(st.get("allocation")),
            len(st.get("reservedFor") or []), bool(st.get("admission")))
    out = {}
    for key, by_t in states.items():
        rows: list[tuple] = []
        for t, state in by_t.items():
            if not rows or rows[-1][1] != state:
                rows.append((t, state))
        out[key] = rows
    return out


def test_controllers_created_in_another_order_give_the_same_run(monkeypatch) -> None:
    forward = run(objects=objects())
    monkeypatch.setattr(Store, "reverse_dispatch", True)
    backward = run(objects=objects())
    # kube-scheduler may try a pod before its claim exists (DynamicResources: "waiting for resource claim to be
    # created") and again when it appears: attempts count the race, the outcome does not depend on it
    attempts = [r.summary.pop("scheduler") for r in (forward, backward)]
    assert attempts[0]["attempts"] <= attempts[1]["attempts"]
    # the JobSet controller's status updates count its syncs, which the order of the watches may split in two
    # (one status change written in two steps); the child Jobs it creates and updates do not depend on it
    jobset_requests = [r.summary.pop("jobset_api_client")["requests"] for r in (forward, backward)]
    for verb in ("create jobs", "update jobs", "delete jobs"):
        assert jobset_requests[0].get(verb) == jobset_requests[1].get(verb)
    assert forward.summary == backward.summary
    assert outcome(forward) == outcome(backward)
    # the scenario exercises what it is meant to: claims generated and deleted, a set deleted, a queue inactive
    kinds = {(etype, o["kind"]) for _, _, etype, o in forward.history}
    assert {("ADDED", "ResourceClaim"), ("DELETED", "ResourceClaim"), ("DELETED", "JobSet"), ("DELETED", "Job"),
            ("DELETED", "Workload")} <= kinds
    cq = [o for _, _, _, o in forward.history if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "checked"]
    assert any(c["type"] == "Active" and c["reason"] == "AdmissionCheckNotFound"
               for c in (cq[-1].get("status") or {}).get("conditions") or [])
    gated = [o for _, _, _, o in forward.history if o["kind"] == "LocalQueue" and o["metadata"]["name"] == "gated"]
    assert [(c["status"], c["reason"]) for c in gated[-1]["status"]["conditions"]] == [
        ("False", "ClusterQueueIsInactive")]
