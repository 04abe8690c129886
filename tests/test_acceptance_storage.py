"""Storage scenarios as the upstream projects' own docs and tests write them, judged against the real controllers'
phases, events and messages (issue 31, item 3, second pass):

- kubernetes.io "Configure a Pod to Use a PersistentVolume for Storage" (task-pv-volume / task-pv-claim /
  task-pv-pod, a class named `manual` that no StorageClass object defines), the storage-classes page's local
  volumes class (`kubernetes.io/no-provisioner`, WaitForFirstConsumer) and the persistent-volumes page's claim
  with a selector;
- kubernetes pkg/controller/volume/persistentvolume index_test.go TestFindingVolumeWithDifferentAccessModes (the PV
  controller searches the access-mode sets with the fewest modes first) and binder_test.go's matching cases;
- kube-scheduler's VolumeBinding PreBind (binder.go BindPodVolumes: the pod is bound to its node only once its
  claims are bound, up to bindTimeoutSeconds 600; checkBindings' "provisioning failed for PVC");
- a StatefulSet with volumeClaimTemplates, which the twin does not simulate: a notice, not silence.
"""

from __future__ import annotations

import pytest
from k8s_builders import make_scenario, static_node
from test_pv_binding import PD, events, first_time, last, nodes, phase_at, pv, pvc, sc, user, volumes_of

from kubetwin.api.loader import Manifest
from kubetwin.runner import run
from kubetwin.validation.validate import validate


def bound_at(res, pod: str) -> float | None:
    return first_time(res, "Pod", pod, lambda o: bool(o["spec"].get("nodeName")))


# -- "Configure a Pod to Use a PersistentVolume for Storage" ----------------------------------------------------
TASK_PV = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "task-pv-volume", "labels": {
    "type": "local"}}, "spec": {"storageClassName": "manual", "capacity": {"storage": "10Gi"},
                                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/mnt/data"}}}
TASK_PVC = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "task-pv-claim"},
            "spec": {"storageClassName": "manual", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "3Gi"}}}}
TASK_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "task-pv-pod"}, "spec": {
    "volumes": [{"name": "task-pv-storage", "persistentVolumeClaim": {"claimName": "task-pv-claim"}}],
    "containers": [{"name": "task-pv-container", "image": "nginx", "ports": [{"containerPort": 80,
                                                                               "name": "http-server"}],
                    "volumeMounts": [{"mountPath": "/usr/share/nginx/html", "name": "task-pv-storage"}]}]}}


def test_the_docs_task_pv_claim_binds_the_manual_volume_and_the_pod_runs() -> None:
    res = run(objects=[make_scenario("1h").obj(), *nodes(1), TASK_PV, TASK_PVC, TASK_POD])
    claim = last(res, "PersistentVolumeClaim", "task-pv-claim")
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}
    volume = last(res, "PersistentVolume", "task-pv-volume")
    assert volume["status"]["phase"] == "Bound" and volume["spec"]["claimRef"]["name"] == "task-pv-claim"
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"  # SetDefaults_PersistentVolume
    assert first_time(res, "Pod", "task-pv-pod", phase_at("", "Running")) == 0.0
    assert not events(res, "ProvisioningFailed") and not events(res, "ExternalProvisioning")


# -- the PV controller's matching (index_test.go, binder_test.go) -----------------------------------------------
def test_the_pv_controller_searches_the_access_mode_sets_with_the_fewest_modes_first() -> None:
    """index_test.go TestFindingVolumeWithDifferentAccessModes, with sizes that tell the rule from "smallest
    first": the claim gets the smallest volume of the first access-mode set (fewest modes) holding a match."""
    vols = [pv("gce", "20Gi", ("ReadWriteOnce", "ReadOnlyMany")), pv("ebs", "30Gi", ("ReadWriteOnce",)),
            pv("nfs", "10Gi", ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"))]
    cases = {"rwo": (("ReadWriteOnce",), "ebs"), "rwo-rox": (("ReadWriteOnce", "ReadOnlyMany"), "gce"),
             "all": (("ReadWriteMany", "ReadWriteOnce", "ReadOnlyMany"), "nfs"), "rwx": (("ReadWriteMany",), "nfs"),
             "rox": (("ReadOnlyMany",), "gce")}
    claims = [pvc(name, modes=modes, size="5Gi") for name, (modes, _) in cases.items()]
    assert len(claims) == len(cases) == 5
    for name in cases:  # one claim at a time: each sees all three volumes
        res = run(objects=[make_scenario("10m").obj(), sc(), *vols, next(c for c in claims
                                                                          if c["metadata"]["name"] == name)])
        assert last(res, "PersistentVolumeClaim", name)["spec"]["volumeName"] == cases[name][1], name


def test_a_volume_of_the_fewest_modes_set_already_bound_sends_the_claim_up_a_set() -> None:
    """index_test.go: "pretend the exact match is bound. should get the next level up of modes"."""
    taken = pv("ebs", "10Gi", ("ReadWriteOnce",), claimRef={"name": "other", "namespace": "default"})
    res = run(objects=[make_scenario("10m").obj(), sc(), taken, pv("gce", "10Gi", ("ReadWriteOnce", "ReadOnlyMany")),
                       pvc("c", modes=("ReadWriteOnce",), size="1Gi")])
    assert last(res, "PersistentVolumeClaim", "c")["spec"]["volumeName"] == "gce"


@pytest.mark.parametrize(("claim", "volume", "bound"), [
    # binder_test 1-7: a volume pre-bound to a claim of the same name and another UID
    ({}, {"claimRef": {"name": "data", "namespace": "default", "uid": "another-uid"}}, False),
    # a claim asking for Block never binds a Filesystem volume (CheckVolumeModeMismatches)
    ({"volumeMode": "Block"}, {}, False),
    # binder_test 1-11 / 1-12: the claim's label selector
    ({"selector": {"matchLabels": {"tier": "gold"}}}, {}, False),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]}]}},
     {"labels": {"tier": "silver"}}, True),
])
def test_binder_matching_cases(claim: dict, volume: dict, bound: bool) -> None:
    labels = volume.pop("labels", None)
    objs = [make_scenario("10m").obj(), sc(provisioner="kubernetes.io/no-provisioner"),
            pv("disk", "100Gi", labels=labels, **volume), pvc(**claim)]
    res = run(objects=objs)
    got = last(res, "PersistentVolumeClaim", "data")
    assert (got["status"]["phase"] == "Bound") is bound
    if not bound:
        assert got["spec"].get("volumeName") is None


def test_an_immediate_claim_of_a_class_without_a_provisioner_reports_no_volume_plugin() -> None:
    """provisionClaimOperation for `kubernetes.io/no-provisioner`: no in-tree plugin of that name (Warning
    ProvisioningFailed "no volume plugin matched name: kubernetes.io/no-provisioner", from
    persistentvolume-controller); the claim binds when a matching volume appears."""
    late = pv("disk", "100Gi")
    late["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    res = run(objects=[make_scenario("10m").obj(), sc(provisioner="kubernetes.io/no-provisioner"), pvc(), late])
    assert [(t, m) for _, _, t, m in events(res, "ProvisioningFailed")] == [
        ("Warning", "no volume plugin matched name: kubernetes.io/no-provisioner")]
    assert res.recorded_events("ProvisioningFailed")[0].event["source"]["component"] == "persistentvolume-controller"
    assert first_time(res, "PersistentVolumeClaim", "data", phase_at("", "Bound")) == 300.0


def test_a_claim_with_a_selector_is_not_provisioned() -> None:
    """A claim with a selector binds only a matching volume: csi-provisioner refuses to provision it
    (kubernetes-csi/external-provisioner pkg/controller/controller.go Provision: "claim Selector is not
    supported")."""
    res = run(objects=[make_scenario("10m").obj(), sc(), pvc(selector={"matchLabels": {"release": "stable"}})])
    assert last(res, "PersistentVolumeClaim", "data")["status"]["phase"] == "Pending" and not volumes_of(res)
    assert [(t, m) for _, _, t, m in events(res, "ProvisioningFailed")] == [
        ("Warning", 'failed to provision volume with StorageClass "fast": claim Selector is not supported')]


# -- WaitForFirstConsumer without a provisioner: local volumes (storage-classes "Local") ---------------------------
LOCAL_SC = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local-storage"},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}


def local_pv(name: str, node: str) -> dict:
    """The persistent-volumes page's local volume example, on `node`."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": {
        "capacity": {"storage": "100Gi"}, "volumeMode": "Filesystem", "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "local-storage",
        "local": {"path": "/mnt/disks/ssd1"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}


@pytest.mark.parametrize("n", [1, 3])
def test_a_local_claim_without_a_volume_leaves_the_pod_unschedulable_on_every_node(n: int) -> None:
    """checkVolumeProvisions: a class that cannot provision (no-provisioner) and no matching volume: each node
    fails VolumeBinding's Filter with ErrReasonBindConflict, UnschedulableAndUnresolvable; the claim waits."""
    res = run(objects=[make_scenario("30m").obj(), *nodes(n), LOCAL_SC,
                       pvc(cls="local-storage", size="50Gi"), user("p")])
    assert bound_at(res, "p") is None
    assert last(res, "PersistentVolumeClaim", "data")["status"]["phase"] == "Pending"
    assert "volume.kubernetes.io/selected-node" not in (last(res, "PersistentVolumeClaim", "data")["metadata"]
                                                        .get("annotations") or {})
    assert events(res, "FailedScheduling")[0][3] == (
        f"0/{n} nodes are available: {n} node(s) didn't find available persistent volumes to bind. preemption: "
        f"0/{n} nodes are available: {n} Preemption is not helpful for scheduling.")
    assert [m for *_, m in events(res, "WaitForFirstConsumer")] == [
        "waiting for first consumer to be created before binding"]


def test_a_local_volume_created_later_schedules_the_pod_onto_its_node() -> None:
    late = local_pv("local-n2", "n2")
    late["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    res = run(objects=[make_scenario("30m").obj(), *nodes(3), LOCAL_SC, pvc(cls="local-storage", size="50Gi"),
                       user("p"), late])
    assert bound_at(res, "p") == 300.0
    assert last(res, "Pod", "p")["spec"]["nodeName"] == "n2"  # the volume's node affinity
    assert last(res, "PersistentVolumeClaim", "data")["spec"]["volumeName"] == "local-n2"


@pytest.mark.parametrize("selector", [None, "n1"])
def test_a_bound_local_volume_keeps_its_pods_on_its_node(selector: str | None) -> None:
    """checkBoundClaims: a bound claim's volume with node affinity admits only its node (ErrReasonNodeConflict,
    UnschedulableAndUnresolvable)."""
    immediate = {**LOCAL_SC, "volumeBindingMode": "Immediate"}
    res = run(objects=[make_scenario("30m").obj(), *nodes(3), immediate, local_pv("local-n2", "n2"),
                       pvc(cls="local-storage", size="50Gi"), user("p", node=selector)])
    assert last(res, "PersistentVolumeClaim", "data")["spec"]["volumeName"] == "local-n2"
    if selector is None:
        assert last(res, "Pod", "p")["spec"]["nodeName"] == "n2"
        return
    assert bound_at(res, "p") is None
    assert events(res, "FailedScheduling")[0][3] == (
        "0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


# -- VolumeBinding's PreBind: the pod is bound to a node only once its claims are --------------------------------
PREBIND_TIMEOUT = ('running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded')


@pytest.mark.parametrize("cls", ["standard-rwo", "premium-rwo"])
def test_a_claim_its_provisioner_refuses_keeps_the_pod_pending_unbound_with_prebind_timeouts(cls: str) -> None:
    """ReadWriteMany on a PD filesystem through GKE's WaitForFirstConsumer classes: csi-provisioner's final error
    (InvalidArgument) keeps the selected node, so PreBind times out after bindTimeoutSeconds (600 s) and the pod
    goes back to the queue (backoff), unbound: Pending, never ContainerCreating on a node."""
    res = run(objects=[make_scenario("35m").obj(), *nodes(2), pvc(cls=cls, modes=("ReadWriteMany",)), user("p")])
    assert bound_at(res, "p") is None
    pod = last(res, "Pod", "p")
    assert pod["status"]["phase"] == "Pending" and not pod["status"].get("containerStatuses")
    assert [m for *_, m in events(res, "ProvisioningFailed")] == [
        f'failed to provision volume with StorageClass "{cls}": rpc error: code = InvalidArgument desc = '
        "VolumeCapabilities is invalid: specified multi writer with mount access type"]
    failed = [(t, m) for t, name, _, m in events(res, "FailedScheduling") if name == "p"]
    assert failed == [(600.0, PREBIND_TIMEOUT)]
    # retried after each timeout and its backoff (1 s, 2 s): PreBind waits again on the selected node
    assert [e.event["count"] for e in res.recorded_events("FailedScheduling")] == [3]
    # the claim's events once each while it stays refused (the twin's convention, docs/storage.md)
    assert [e.event["count"] for r in ("ExternalProvisioning", "Provisioning", "ProvisioningFailed")
            for e in res.recorded_events(r)] == [1, 1, 1]
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SchedulerError", PREBIND_TIMEOUT)
    assert not events(res, "Scheduled") and not events(res, "FailedMount")


def test_a_pod_waiting_in_prebind_holds_its_node_resources() -> None:
    """The assumed pod counts on its node while PreBind waits: a second pod that needs the rest of the node's CPU
    does not fit there; when PreBind gives up, the node is free again for the other pod."""
    objs = [make_scenario("15m").obj(), *nodes(1), pvc(cls="standard-rwo", modes=("ReadWriteMany",)),
            user("p", cpu="3"), user("q", claim="other", cpu="3", at="1m"), pvc("other", cls="standard-rwo")]
    res = run(objects=objs)
    assert bound_at(res, "p") is None
    assert bound_at(res, "q") == 600.0  # p's reservation released at its PreBind timeout
    assert "Insufficient cpu" in next(m for t, name, _, m in events(res, "FailedScheduling") if name == "q")


def test_deleting_a_pod_waiting_in_prebind_frees_its_reservation() -> None:
    gone = user("p", cpu="3")
    gone["metadata"]["annotations"]["kubetwin.io/delete-at"] = "2m"
    res = run(objects=[make_scenario("15m").obj(), *nodes(1), pvc(cls="standard-rwo", modes=("ReadWriteMany",)),
                       gone, user("q", claim="other", cpu="3", at="1m"), pvc("other", cls="standard-rwo")])
    assert bound_at(res, "q") == 120.0


# -- StatefulSet: not simulated, said so -------------------------------------------------------------------------
STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": {
    "selector": {"matchLabels": {"app": "nginx"}}, "serviceName": "nginx", "replicas": 3, "minReadySeconds": 10,
    "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {
        "terminationGracePeriodSeconds": 10, "containers": [{
            "name": "nginx", "image": "registry.k8s.io/nginx-slim:0.24", "ports": [{"containerPort": 80,
                                                                                   "name": "web"}],
            "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]}]}},
    "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "my-storage-class",
        "resources": {"requests": {"storage": "1Gi"}}}}]}}


def test_a_statefulset_with_volume_claim_templates_is_a_notice_not_silence() -> None:
    diags = validate([Manifest(o, "sts.yaml", i) for i, o in enumerate([make_scenario("1h").obj(),
                                                                          static_node("n1").obj(), STS])])
    notices = [d.message for d in diags if d.severity == "notice"]
    assert any("StatefulSet" in m and "not simulated" in m for m in notices), notices
    res = run(objects=[make_scenario("10m").obj(), static_node("n1").obj(), STS])
    assert not [o for _, _, _, o in res.history if o["kind"] in ("Pod", "PersistentVolumeClaim")]


__all__ = ["PD"]


# -- kubectl describe pvc ----------------------------------------------------------------------------------------
def test_describe_pvc_prints_kubectls_claim_describer(tmp_path) -> None:
    """describePersistentVolumeClaim's layout for the docs' bound claim and for a claim its provisioner refuses."""
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    run(objects=[make_scenario("1h").obj(), *nodes(1), TASK_PV, TASK_PVC, TASK_POD,
                 pvc("shared", cls="standard-rwo", modes=("ReadWriteMany",)), user("p", claim="shared")],
        out=tmp_path / "r")
    # at 50m: the provisioner's one ProvisioningFailed Event (t=0) is deleted an hour after it was written
    res = CliRunner().invoke(app, ["describe", "pvc", "--run", str(tmp_path / "r"), "--at", "50m"])
    assert res.exit_code == 0, res.output
    refused, bound = res.stdout.split("\n\n\n")  # by name: shared, task-pv-claim
    assert bound.splitlines() == [
        "Name:          task-pv-claim", "Namespace:     default", "StorageClass:  manual", "Status:        Bound",
        "Volume:        task-pv-volume", "Labels:        <none>",
        "Annotations:   pv.kubernetes.io/bind-completed: yes",
        "               pv.kubernetes.io/bound-by-controller: yes",
        "Finalizers:    [kubernetes.io/pvc-protection]", "Capacity:      10Gi", "Access Modes:  RWO",
        "VolumeMode:    Filesystem",
        "Used By:       task-pv-pod", "Events:        <none>"]
    assert refused.splitlines()[:5] == ["Name:          shared", "Namespace:     default",
                                        "StorageClass:  standard-rwo", "Status:        Pending", "Volume:        "]
    assert "Capacity:      \nAccess Modes:  \n" in refused and "Used By:       p\n" in refused
    assert "Warning  ProvisioningFailed" in refused


# -- GKE's Filestore CSI driver add-on: its classes exist only where it is enabled --------------------------------
FILESTORE_PVC = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "podpvc"}, "spec": {
    "accessModes": ["ReadWriteMany"], "storageClassName": "standard-rwx",
    "resources": {"requests": {"storage": "1Ti"}}}}  # GKE's Filestore guide's claim
FILESTORE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-server"}, "spec": {
    "containers": [{"name": "web-server", "image": "nginx", "volumeMounts": [
        {"mountPath": "/var/lib/www/html", "name": "mypvc"}]}],
    "volumes": [{"name": "mypvc", "persistentVolumeClaim": {"claimName": "podpvc", "readOnly": False}}]}}


@pytest.mark.parametrize("cls", ["standard-rwx", "premium-rwx", "zonal-rwx", "enterprise-rwx",
                                 "enterprise-multishare-rwx"])
def test_filestore_classes_exist_where_the_add_on_is_enabled(cls: str) -> None:
    claim = {**FILESTORE_PVC, "spec": {**FILESTORE_PVC["spec"], "storageClassName": cls}}
    scenario = make_scenario("1h").spec(gkeAddons=["GcpFilestoreCsiDriver"]).obj()
    res = run(objects=[scenario, *nodes(2), claim, FILESTORE_POD])
    assert bound_at(res, "web-server") == 0.0  # WaitForFirstConsumer: provisioned for the pod's node, then bound
    volume = last(res, "PersistentVolume", last(res, "PersistentVolumeClaim", "podpvc")["spec"]["volumeName"])
    assert volume["spec"]["csi"]["driver"] == "filestore.csi.storage.gke.io"
    created = last(res, "StorageClass", cls)
    assert created["volumeBindingMode"] == "WaitForFirstConsumer" and created["provisioner"] == (
        "filestore.csi.storage.gke.io")
    assert first_time(res, "Pod", "web-server", phase_at("", "Running")) == 0.0


def test_a_filestore_class_without_the_add_on_is_a_warning_and_not_found() -> None:
    objs = [make_scenario("30m").obj(), *nodes(1), FILESTORE_PVC, FILESTORE_POD]
    warnings = [d for d in validate([Manifest(o, "f.yaml", i) for i, o in enumerate(objs)])
                if d.severity == "warning"]
    assert [(d.obj, d.field) for d in warnings] == [("PersistentVolumeClaim/podpvc", "spec.storageClassName")]
    assert "GcpFilestoreCsiDriver" in warnings[0].message and "spec.gkeAddons" in warnings[0].hint
    res = run(objects=objs)
    assert [m for *_, m in events(res, "ProvisioningFailed")] == [
        'storageclass.storage.k8s.io "standard-rwx" not found']
    assert bound_at(res, "web-server") is None
    # the scenario's own class of that name is what the cluster has, add-on or not
    own = sc("standard-rwx", provisioner="filestore.csi.storage.gke.io", parameters={"tier": "standard"})
    assert not [d for d in validate([Manifest(o, "f.yaml", i) for i, o in enumerate([*objs, own])])
                if d.severity == "warning"]


# -- Storage Object in Use Protection (persistent-volumes concept page) -------------------------------------------
def test_a_claim_deleted_while_a_pod_uses_it_stays_terminating_until_the_pod_is_gone(tmp_path) -> None:
    """StorageObjectInUseProtection: the API server gives every claim the kubernetes.io/pvc-protection finalizer
    (and every volume kubernetes.io/pv-protection); deleting a claim a scheduled pod uses only marks it
    (deletionTimestamp: kubectl shows Terminating); the pvc-protection controller removes the finalizer once no
    scheduled pod names it, and the claim goes; its volume (reclaim Delete) then goes too."""
    claim = pvc("data", cls="standard-rwo")
    claim["metadata"]["annotations"] = {"kubetwin.io/delete-at": "5m"}
    pod = user("p", duration="20m")
    pod["metadata"]["annotations"]["kubetwin.io/delete-at"] = "10m"
    res = run(objects=[make_scenario("30m").obj(), *nodes(1), claim, pod], out=tmp_path / "r")
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    shown = CliRunner().invoke(app, ["describe", "pvc", "data", "--run", str(tmp_path / "r"), "--at", "6m"]).stdout
    assert "Status:        Terminating (lasts 60s)\n" in shown and "Used By:       p\n" in shown
    got = CliRunner().invoke(app, ["get", "pvc", "--run", str(tmp_path / "r"), "--at", "6m"]).stdout
    assert got.splitlines()[1].split()[:2] == ["data", "Terminating"]
    first = first_time(res, "PersistentVolumeClaim", "data", lambda o: True)
    assert first == 0.0
    created = [o for t, _, e, o in res.history if o["kind"] == "PersistentVolumeClaim" and e == "ADDED"][0]
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    volume = volumes_of(res)[0]
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    marked = first_time(res, "PersistentVolumeClaim", "data", lambda o: bool(o["metadata"].get("deletionTimestamp")))
    assert marked == 300.0
    gone = next(t for t, _, e, o in res.history if o["kind"] == "PersistentVolumeClaim" and e == "DELETED")
    assert gone == 600.0  # when the pod was deleted
    assert next(t for t, _, e, o in res.history if o["kind"] == "PersistentVolume" and e == "DELETED") == 600.0


def test_a_claim_no_pod_uses_is_deleted_at_once_and_a_terminating_claim_blocks_new_pods() -> None:
    claim = pvc("data", cls="fast")
    claim["metadata"]["annotations"] = {"kubetwin.io/delete-at": "5m"}
    res = run(objects=[make_scenario("30m").obj(), *nodes(1), sc(), claim])
    assert next(t for t, _, e, o in res.history if o["kind"] == "PersistentVolumeClaim" and e == "DELETED") == 300.0
    # a completed pod still names the claim: the claim stays Terminating (podUsesPVC: any scheduled pod)
    claim2 = pvc("data", cls="fast")
    claim2["metadata"]["annotations"] = {"kubetwin.io/delete-at": "5m"}
    late = user("late", at="6m")
    res = run(objects=[make_scenario("30m").obj(), *nodes(1), sc(), claim2, user("done", duration="1m"), late])
    assert not [t for t, _, e, o in res.history if o["kind"] == "PersistentVolumeClaim" and e == "DELETED"]
    assert bound_at(res, "late") is None
    assert events(res, "FailedScheduling")[0][1:] == ("late", "Warning", (
        '0/1 nodes are available: persistentvolumeclaim "data" is being deleted. preemption: 0/1 nodes are '
        "available: 1 Preemption is not helpful for scheduling."))


# -- ReadWriteOncePod and preemption (the ReadWriteOncePod GA blog / KEP-2485) ---------------------------------------
@pytest.mark.parametrize("n", [1, 2])
def test_a_higher_priority_pod_preempts_the_read_write_once_pod_holder(n: int) -> None:
    """VolumeRestrictions' PreFilterExtensions: removing the holder in preemption's dry run removes the conflict, so
    a higher-priority pod preempts the lower-priority pod that holds the ReadWriteOncePod claim, on its node."""
    from k8s_builders import make_priority_class

    high = make_priority_class("high").value(1000).obj()
    b = user("b", at="1m")
    b["spec"]["priorityClassName"] = "high"
    res = run(objects=[make_scenario("1h").obj(), *nodes(n), high, sc(), pvc(modes=("ReadWriteOncePod",)),
                       user("a"), b])
    assert [(name, m) for _, name, _, m in events(res, "Preempted")] == [
        ("a", f"Preempted by pod {last(res, 'Pod', 'b')['metadata']['uid']} on node "
              f"{last(res, 'Pod', 'a')['spec']['nodeName']}")]
    assert bound_at(res, "b") == 61.0  # after its 1 s backoff (the twin deletes a victim at once)
    assert last(res, "Pod", "b")["spec"]["nodeName"] == last(res, "Pod", "a")["spec"]["nodeName"]
    assert [m for _, name, _, m in events(res, "FailedScheduling") if name == "b"] == [
        f"0/{n} nodes are available: {n} node has pod using PersistentVolumeClaim with the same name and "
        "ReadWriteOncePod access mode."]


def test_a_claim_naming_a_volume_bound_to_another_claim_says_so() -> None:
    """syncUnboundClaim, spec.volumeName of a volume another claim holds (a Released Retain volume, say): Warning
    FailedBinding `volume "pv" already bound to a different claim.`, Pending."""
    held = pv("disk", "100Gi", claimRef={"name": "old", "namespace": "default", "uid": "old-uid"})
    res = run(objects=[make_scenario("10m").obj(), sc(), held, pvc("data", volumeName="disk")])
    assert last(res, "PersistentVolumeClaim", "data")["status"]["phase"] == "Pending"
    assert [(t, m) for _, _, t, m in events(res, "FailedBinding")] == [
        ("Warning", 'volume "disk" already bound to a different claim.')]


def test_gkes_default_class_marked_not_default_leaves_claims_without_a_class() -> None:
    """GKE's "change the default StorageClass": standard-rwo patched to is-default-class "false" and no other
    default: DefaultStorageClass sets no class, and the claim binds only class-less volumes (FailedBinding "no
    persistent volumes available for this claim and no storage class is set")."""
    demoted = sc("standard-rwo", mode="WaitForFirstConsumer")
    demoted["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "false"}
    res = run(objects=[make_scenario("10m").obj(), demoted, pvc("data", cls=None)])
    claim = last(res, "PersistentVolumeClaim", "data")
    assert "storageClassName" not in claim["spec"] and claim["status"]["phase"] == "Pending"
    assert [m for *_, m in events(res, "FailedBinding")] == [
        "no persistent volumes available for this claim and no storage class is set"]


def test_the_hyperdisk_ml_populator_guide_with_wait_for_first_consumer_waits_in_prebind() -> None:
    """GKE's "Automate data transfer from Cloud Storage to a Hyperdisk ML volume using GKE Volume Populator": its
    class binds WaitForFirstConsumer, so the pod waits unbound in PreBind while the data is copied; a copy longer
    than bindTimeoutSeconds fails PreBind once (600 s) and the retry binds the pod when the claim is Bound."""
    import test_volume_populator as populator

    hdml = {**populator.HDML, "volumeBindingMode": "WaitForFirstConsumer"}
    claim = populator.claim(cls="hdml")
    claim["spec"]["accessModes"] = ["ReadOnlyMany"]
    res = run(objects=[populator.SCENARIO, populator.node("n1"), hdml, populator.source(size="2Ti"), claim,
                       populator.trainer()])
    copy_s = 2 * 1024**4 / (2400 * 1024**2)  # 2 TiB at the class's provisioned 2400 MiB/s: 873.8 s
    assert populator.phases(res, "PersistentVolumeClaim", "data")[-1] == (pytest.approx(copy_s), "Bound")
    assert [(t, m) for t, _, m in populator.events(res, "FailedScheduling")] == [(600.0, PREBIND_TIMEOUT)]
    assert bound_at(res, "trainer") == pytest.approx(copy_s)
