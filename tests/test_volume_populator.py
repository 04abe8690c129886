"""PersistentVolumeClaim binding, the GKE Volume Populator's transfer time, and VolumeBinding in the scheduler."""

from __future__ import annotations

import pytest
from k8s_builders import make_namespace, make_node

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import Manifest
from kubetwin.controllers import volumes
from kubetwin.runner import run
from kubetwin.validation.validate import validate

TIB, GIB = 1024**4, 1024**3
SCENARIO = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
            "spec": {"duration": "2h"}}
PARALLELSTORE = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "parallelstore"},
                 "provisioner": "parallelstore.csi.storage.gke.io", "volumeBindingMode": "Immediate"}
HDML = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "hdml"},
        "provisioner": "pd.csi.storage.gke.io", "volumeBindingMode": "Immediate",
        "parameters": {"type": "hyperdisk-ml", "provisioned-throughput-on-create": "2400Mi"}}


def node(name: str) -> dict:
    return make_node(name).capacity({"cpu": "32", "memory": "128Gi", "pods": "110"}).obj()


def source(name: str = "dataset", size: str | None = "2Ti") -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if size is not None:
        meta["annotations"] = {"kubetwin.io/data-size": size}
    return {"apiVersion": "datalayer.gke.io/v1", "kind": "GCPDataSource", "metadata": meta,
            "spec": {"cloudStorage": {"serviceAccountName": "ksa", "uri": "gs://my-bucket/data/"}}}


def claim(name: str = "data", cls: str = "parallelstore", populated: bool = True) -> dict:
    spec: dict = {"accessModes": ["ReadWriteMany"], "storageClassName": cls,
                  "resources": {"requests": {"storage": "12Ti"}}}
    if populated:
        spec["dataSourceRef"] = {"apiGroup": "datalayer.gke.io", "kind": "GCPDataSource", "name": "dataset"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def trainer(name: str = "trainer", claim_name: str = "data") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": {
        "kubetwin.io/duration": "30m"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}},
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def phases(res, kind: str, name: str) -> list[tuple[float, str]]:
    """(time, status.phase) each time the object's phase changed."""
    out: list[tuple[float, str]] = []
    for t, _, etype, o in res.history:
        if o["kind"] == kind and o["metadata"]["name"] == name and etype != "DELETED":
            phase = (o.get("status") or {}).get("phase", "")
            if not out or out[-1][1] != phase:
                out.append((t, phase))
    return out


def events(res, reason: str) -> list[tuple[float, str, str]]:
    return [(e.first_seen, e.event["involvedObject"]["name"], e.message) for e in res.recorded_events(reason)]


def scheduled_at(res, pod: str) -> float:
    return next(t for t, name, _ in events(res, "Scheduled") if name == pod)


def test_populated_parallelstore_claim_delays_the_training_pod_by_size_over_rate() -> None:
    res = run(objects=[SCENARIO, node("n1"), node("n2"), PARALLELSTORE, source(), claim(), trainer()])
    transfer = 2 * TIB / (20 * GIB)  # 2 TiB at Parallelstore's 20 GiB/s import from Cloud Storage: 102.4 s
    assert transfer == pytest.approx(102.4)
    assert phases(res, "PersistentVolumeClaim", "data") == [(0.0, "Pending"), (pytest.approx(transfer), "Bound")]
    failed = events(res, "FailedScheduling")
    assert failed[0] == (0.0, "trainer", "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                         "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    assert scheduled_at(res, "trainer") == pytest.approx(transfer)  # requeued by the claim's update, no backoff left
    reasons = [(r, pytest.approx(t)) for r in (volumes.STARTED, volumes.FINISHED_OP, volumes.FINISHED)
               for t, _, _ in events(res, r)]
    assert reasons == [(volumes.STARTED, 0.0), (volumes.FINISHED_OP, transfer), (volumes.FINISHED, transfer)]
    assert [m for _, _, m in events(res, volumes.FINISHED)] == ["Populator finished"]
    bound = [o for _, _, _, o in res.history if o["kind"] == "PersistentVolumeClaim"][-1]
    assert bound["spec"]["volumeName"] == f"pvc-{bound['metadata']['uid']}"
    assert bound["status"]["capacity"] == {"storage": "12Ti"}


def test_hyperdisk_ml_transfer_runs_at_the_provisioned_throughput() -> None:
    res = run(objects=[SCENARIO, node("n1"), HDML, source(size="240Gi"), claim(cls="hdml"), trainer()])
    assert scheduled_at(res, "trainer") == pytest.approx(240 * GIB / (2400 * 1024**2))  # 102.4 s


def test_plain_claim_binds_at_once_and_the_pod_starts_at_zero() -> None:
    res = run(objects=[SCENARIO, node("n1"), PARALLELSTORE, claim(populated=False), trainer()])
    assert phases(res, "PersistentVolumeClaim", "data")[-1] == (0.0, "Bound")
    assert not events(res, "FailedScheduling")
    assert scheduled_at(res, "trainer") == 0.0


def test_missing_claim_keeps_the_pod_pending_with_the_listers_error() -> None:
    res = run(objects=[SCENARIO, node("n1"), trainer(claim_name="nope")], duration="10m")
    failed = events(res, "FailedScheduling")
    assert failed and failed[0][2] == ('0/1 nodes are available: persistentvolumeclaim "nope" not found. '
                                       "preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                                       "scheduling.")
    assert not events(res, "Scheduled")
    assert phases(res, "Pod", "trainer")[-1][1] == "Pending"


def test_claim_created_later_requeues_the_pod() -> None:
    late = claim(populated=False)
    late["metadata"]["annotations"] = {"kubetwin.io/create-at": "30s"}
    res = run(objects=[SCENARIO, node("n1"), PARALLELSTORE, late, trainer()], duration="10m")
    assert scheduled_at(res, "trainer") == 30.0


def test_source_created_after_its_claim_starts_the_transfer_then() -> None:
    late = source()
    late["metadata"]["annotations"]["kubetwin.io/create-at"] = "60s"
    res = run(objects=[SCENARIO, node("n1"), PARALLELSTORE, late, claim(), trainer()])
    assert events(res, "PopulatorDataSourceNotFound")[0][0] == 0.0
    assert scheduled_at(res, "trainer") == pytest.approx(60 + 102.4)


def test_gcp_data_source_validation() -> None:
    ok = validate([Manifest(source(), "<t>", 0)])
    assert ok == []
    no_size = validate([Manifest(source(size=None), "<t>", 0)])
    assert [d.severity for d in no_size] == ["notice"]
    bad = source(size="lots")
    bad["spec"]["cloudStorage"]["uri"] = "s3://x"
    bad["spec"]["cloudStorage"]["bucket"] = "x"
    msgs = [d.message for d in validate([Manifest(bad, "<t>", 0)]) if d.severity == "error"]
    assert len(msgs) == 3 and any("unknown field" in m for m in msgs) and any("gs://" in m for m in msgs)
    with pytest.raises(KubetwinError):
        run(objects=[SCENARIO, bad])


def test_claim_bound_in_one_namespace_requeues_its_pod_not_a_same_named_claims_pod_elsewhere() -> None:
    """Requeue hints are cached per pod group: the group must hold the namespace, or the verdict for a pod waiting
    on ns-a/data (still copying) is reused for a same-shaped pod waiting on ns-b/data (bound), which then sits out
    the 5-minute unschedulable flush."""
    objs: list[dict] = [SCENARIO, node("n1"), PARALLELSTORE]
    for ns, size in (("ns-a", "20Ti"), ("ns-b", "1Ti")):  # ns-a's pod fails first; ns-b's claim binds first
        objs.append(make_namespace(ns).obj())
        for obj in (source(size=size), claim(), trainer()):
            obj["metadata"]["namespace"] = ns
            objs.append(obj)
    res = run(objects=objs)
    scheduled = {o["metadata"]["namespace"]: t for t, _, etype, o in res.history
                 if o["kind"] == "Event" and o["reason"] == "Scheduled" and etype == "ADDED"}
    assert scheduled["ns-b"] == pytest.approx(TIB / (20 * GIB))  # 51.2 s: when its own claim is Bound
    assert scheduled["ns-a"] == pytest.approx(20 * TIB / (20 * GIB))
