"""Storage as Kubernetes runs it (issue 31, item 3): a claim binds only as the PV controller binds it, and a pod
uses a volume only as the access modes and the attach/detach controller allow. Across access modes (RWO, ROX, RWX,
RWOP), binding modes (Immediate, WaitForFirstConsumer), static and dynamic provisioning, one node and several."""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_scenario, static_node

from kubetwin.runner import run

MODES = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]
PD = "pd.csi.storage.gke.io"


def sc(name: str = "fast", mode: str = "Immediate", provisioner: str = PD, **extra: object) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": mode, "parameters": {"type": "pd-balanced"}, **extra}


def pvc(name: str = "data", cls: str | None = "fast", modes: tuple[str, ...] = ("ReadWriteOnce",), size: str = "50Gi",
        **spec: object) -> dict:
    body: dict = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec}
    if cls is not None:
        body["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": body}


def pv(name: str, size: str, modes: tuple[str, ...] = ("ReadWriteOnce",), cls: str = "fast", labels: dict | None = None,
       **spec: object) -> dict:
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": {
        "capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
        "csi": {"driver": PD, "volumeHandle": f"projects/p/zones/z/disks/{name}"}, **spec}}


def user(name: str, claim: str = "data", node: str | None = None, cpu: str = "1", duration: str = "30m",
         at: str | None = None) -> dict:
    w = make_pod(name).cpu(cpu).duration(duration)
    if node:
        w = w.node_selector(**{"kubernetes.io/hostname": node})
    if at:
        w = w.create_at(at)
    obj = w.obj()
    obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    obj["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return obj


def nodes(n: int) -> list[dict]:
    return [static_node(f"n{i}").obj() for i in range(1, n + 1)]


def last(res, kind: str, name: str) -> dict:
    return [o for _, _, etype, o in res.history if o["kind"] == kind and o["metadata"]["name"] == name
            and etype != "DELETED"][-1]


def first_time(res, kind: str, name: str, test) -> float | None:
    return next((t for t, _, etype, o in res.history if o["kind"] == kind and o["metadata"]["name"] == name
                 and etype != "DELETED" and test(o)), None)


def phase_at(kind: str, phase: str):
    return lambda o: (o.get("status") or {}).get("phase") == phase


def events(res, reason: str) -> list[tuple[float, str, str, str]]:
    return [(e.first_seen, e.event["involvedObject"]["name"], e.event["type"], e.message)
            for e in res.recorded_events(reason)]


def volumes_of(res) -> list[dict]:
    names = {o["metadata"]["name"] for _, _, _, o in res.history if o["kind"] == "PersistentVolume"}
    return [last(res, "PersistentVolume", n) for n in sorted(names)]


# -- binding ------------------------------------------------------------------------------------------------
FILESTORE = "filestore.csi.storage.gke.io"


@pytest.mark.parametrize(("mode", "driver"), [("ReadWriteOnce", PD), ("ReadOnlyMany", PD), ("ReadWriteOncePod", PD),
                                              ("ReadWriteOnce", FILESTORE), ("ReadWriteMany", FILESTORE)])
def test_immediate_dynamic_provisioning_binds_at_creation_with_the_provisioners_events(mode: str, driver: str) -> None:
    cls = sc(provisioner=driver, parameters={"tier": "zonal"} if driver == FILESTORE else {"type": "pd-balanced"})
    res = run(objects=[make_scenario("1h").obj(), *nodes(1), cls, pvc(modes=(mode,)), user("p")])
    claim = last(res, "PersistentVolumeClaim", "data")
    name = f"pvc-{claim['metadata']['uid']}"
    assert claim["status"] == {"phase": "Bound", "accessModes": [mode], "capacity": {"storage": "50Gi"}}
    assert claim["spec"]["volumeName"] == name
    assert first_time(res, "PersistentVolumeClaim", "data", phase_at("", "Bound")) == 0.0
    volume = last(res, "PersistentVolume", name)
    assert volume["status"]["phase"] == "Bound" and volume["spec"]["claimRef"]["name"] == "data"
    assert volume["spec"]["accessModes"] == [mode] and volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert [m for *_, m in events(res, "ExternalProvisioning")] == [
        f"Waiting for a volume to be created either by the external provisioner '{driver}' or manually by the system "
        "administrator. If volume creation is delayed, please verify that the provisioner is running and correctly "
        "registered."]
    assert volume["spec"]["csi"]["driver"] == driver
    assert [m for *_, m in events(res, "Provisioning")] == [
        'External provisioner is provisioning volume for claim "default/data"']
    assert [m for *_, m in events(res, "ProvisioningSucceeded")] == [f"Successfully provisioned volume {name}"]
    assert first_time(res, "Pod", "p", phase_at("", "Running")) == 0.0


@pytest.mark.parametrize("mode", MODES)
def test_static_binding_picks_the_smallest_matching_volume(mode: str) -> None:
    """Too small, wrong access mode, wrong class, wrong volume mode and unselected volumes are passed over; of the
    matching ones the smallest wins (FindMatchingVolume)."""
    other = next(m for m in MODES if m != mode)
    vols = [pv("small", "10Gi", (mode,)), pv("wrong-mode", "60Gi", (other,)), pv("other-class", "60Gi", (mode,),
            cls="slow"), pv("block", "60Gi", (mode,), volumeMode="Block"), pv("unlabelled", "70Gi", (mode,)),
            pv("big", "500Gi", (mode,), labels={"tier": "a"}), pv("right", "100Gi", (mode,), labels={"tier": "a"})]
    claim = pvc(modes=(mode,), selector={"matchLabels": {"tier": "a"}})
    res = run(objects=[make_scenario("1h").obj(), *nodes(1), sc(), *vols, claim, user("p")])
    bound = last(res, "PersistentVolumeClaim", "data")
    assert (bound["spec"]["volumeName"], bound["status"]["capacity"]) == ("right", {"storage": "100Gi"})
    assert {v["metadata"]["name"]: v["status"]["phase"] for v in volumes_of(res)} == {
        "small": "Available", "wrong-mode": "Available", "other-class": "Available", "block": "Available",
        "unlabelled": "Available", "big": "Available", "right": "Bound"}
    assert not events(res, "ExternalProvisioning")  # a matching volume: nothing is provisioned


def test_prebinding_by_claim_ref_and_by_volume_name() -> None:
    """A volume pre-bound to the claim (claimRef) wins over a smaller match; a claim naming its volume binds to
    it; one naming a volume too small gets VolumeMismatch and stays Pending; one naming a volume that does not
    exist stays Pending."""
    ref = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"}
    objs = [make_scenario("1h").obj(), *nodes(1), sc(), pv("small", "60Gi"), pv("reserved", "900Gi", claimRef=ref),
            pv("named", "80Gi"), pv("tiny", "1Gi"), pvc(), pvc("by-name", volumeName="named"),
            pvc("mismatch", volumeName="tiny"), pvc("missing", volumeName="nope")]
    res = run(objects=objs)
    assert last(res, "PersistentVolumeClaim", "data")["spec"]["volumeName"] == "reserved"
    assert last(res, "PersistentVolumeClaim", "by-name")["status"]["phase"] == "Bound"
    assert last(res, "PersistentVolume", "named")["spec"]["claimRef"]["name"] == "by-name"
    for name in ("mismatch", "missing"):
        assert last(res, "PersistentVolumeClaim", name)["status"]["phase"] == "Pending"
    assert [(n, t, m) for _, n, t, m in events(res, "VolumeMismatch")] == [
        ("mismatch", "Warning", 'Cannot bind to requested volume "tiny": requested PV is too small')]
    assert last(res, "PersistentVolume", "small")["status"]["phase"] == "Available"


def test_a_claim_without_a_class_gets_gkes_default_and_an_empty_class_binds_only_classless_volumes() -> None:
    classless = pv("classless", "100Gi", cls="")
    objs = [make_scenario("1h").obj(), *nodes(1), classless, pvc("defaulted", cls=None), pvc("empty", cls=""),
            pvc("empty2", cls=""), user("p", "defaulted")]
    res = run(objects=objs)
    defaulted = last(res, "PersistentVolumeClaim", "defaulted")
    assert defaulted["spec"]["storageClassName"] == "standard-rwo"  # DefaultStorageClass admission
    assert defaulted["status"]["phase"] == "Bound"  # standard-rwo binds WaitForFirstConsumer: p is its consumer
    assert last(res, "PersistentVolumeClaim", "empty")["spec"]["volumeName"] == "classless"
    assert last(res, "PersistentVolumeClaim", "empty2")["status"]["phase"] == "Pending"
    assert [(n, m) for _, n, _, m in events(res, "FailedBinding")] == [
        ("empty2", "no persistent volumes available for this claim and no storage class is set")]


@pytest.mark.parametrize(("cls", "mode", "disk"), [("standard-rwo", "WaitForFirstConsumer", "pd-balanced"),
                                                    ("premium-rwo", "WaitForFirstConsumer", "pd-ssd"),
                                                    ("standard", "Immediate", "pd-standard")])
def test_gkes_built_in_classes_exist_without_a_manifest(cls: str, mode: str, disk: str) -> None:
    res = run(objects=[make_scenario("1h").obj(), *nodes(1), pvc(cls=cls), user("p", at="10m")])
    bound_at = first_time(res, "PersistentVolumeClaim", "data", phase_at("", "Bound"))
    assert bound_at == (600.0 if mode == "WaitForFirstConsumer" else 0.0)
    assert not events(res, "ProvisioningFailed")
    assert [v["spec"]["csi"]["driver"] for v in volumes_of(res)] == [PD]  # gce-pd is migrated to the CSI driver


def test_read_write_many_on_a_persistent_disk_filesystem_is_refused_by_the_pd_csi_driver() -> None:
    """A shared filesystem needs Filestore (or Parallelstore, Lustre): the PD CSI driver refuses a ReadWriteMany
    mount volume, so the claim stays Pending and so do its pods (GKE's default class is a PD)."""
    res = run(objects=[make_scenario("30m").obj(), *nodes(2), pvc(cls="standard", modes=("ReadWriteMany",)),
                       user("a"), user("b")])
    assert last(res, "PersistentVolumeClaim", "data")["status"]["phase"] == "Pending" and not volumes_of(res)
    assert [(n, t, m) for _, n, t, m in events(res, "ProvisioningFailed")] == [
        ("data", "Warning", 'failed to provision volume with StorageClass "standard": rpc error: code = '
         "InvalidArgument desc = VolumeCapabilities is invalid: specified multi writer with mount access type")]
    assert not events(res, "Scheduled")


# -- a class that does not exist ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3])
def test_a_missing_storage_class_leaves_the_claim_and_its_pods_pending(n: int) -> None:
    res = run(objects=[make_scenario("30m").obj(), *nodes(n), pvc(cls="x"), user("p")])
    assert last(res, "PersistentVolumeClaim", "data")["status"]["phase"] == "Pending"
    assert [(name, t, m) for _, name, t, m in events(res, "ProvisioningFailed")] == [
        ("data", "Warning", 'storageclass.storage.k8s.io "x" not found')]
    assert not volumes_of(res)
    assert last(res, "Pod", "p")["status"]["phase"] == "Pending" and not events(res, "Scheduled")
    assert events(res, "FailedScheduling")[0][3] == (
        f"0/{n} nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/{n} nodes are "
        f"available: {n} Preemption is not helpful for scheduling.")


def test_a_class_created_later_provisions_then() -> None:
    late = sc()
    late["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    res = run(objects=[make_scenario("30m").obj(), *nodes(1), pvc(), user("p"), late])
    assert first_time(res, "PersistentVolumeClaim", "data", phase_at("", "Bound")) == 300.0
    assert first_time(res, "Pod", "p", lambda o: bool(o["spec"].get("nodeName"))) == 300.0


# -- WaitForFirstConsumer -----------------------------------------------------------------------------------
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("n", [1, 2])
def test_wait_for_first_consumer_binds_when_the_pod_is_scheduled(static: bool, n: int) -> None:
    objs = [make_scenario("1h").obj(), *nodes(n), sc(mode="WaitForFirstConsumer"), pvc(), user("p", at="10m")]
    if static:
        objs.append(pv("disk", "100Gi"))
    res = run(objects=objs)
    assert first_time(res, "PersistentVolumeClaim", "data", phase_at("", "Bound")) == 600.0
    assert [(t, m) for t, _, _, m in events(res, "WaitForFirstConsumer")] == [
        (0.0, "waiting for first consumer to be created before binding")]
    # VolumeBinding's PreBind: the pod is bound to its node only once its claim is, at the same instant
    order = [(o["kind"], (o.get("status") or {}).get("phase"), bool(o["spec"].get("nodeName")))
             for t, _, _, o in res.history if t == 600.0 and o["kind"] in ("Pod", "PersistentVolumeClaim")]
    claim_bound = order.index(("PersistentVolumeClaim", "Bound", False))
    assert claim_bound < next(i for i, (kind, _, node) in enumerate(order) if kind == "Pod" and node)
    assert first_time(res, "Pod", "p", lambda o: bool(o["spec"].get("nodeName"))) == 600.0
    assert not events(res, "FailedScheduling")
    claim = last(res, "PersistentVolumeClaim", "data")
    pod = last(res, "Pod", "p")
    assert first_time(res, "Pod", "p", phase_at("", "Running")) == 600.0
    if static:
        assert claim["spec"]["volumeName"] == "disk" and not events(res, "ExternalProvisioning")
    else:
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == pod["spec"]["nodeName"]
        assert claim["spec"]["volumeName"] == f"pvc-{claim['metadata']['uid']}"


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_wait_for_first_consumer_claim_of_a_pod_that_never_fits_stays_pending(static: bool) -> None:
    objs = [make_scenario("1h").obj(), *nodes(2), sc(mode="WaitForFirstConsumer"), pvc(), user("p", cpu="64")]
    if static:
        objs.append(pv("disk", "100Gi"))
    res = run(objects=objs)
    assert last(res, "PersistentVolumeClaim", "data")["status"]["phase"] == "Pending"
    assert [v["status"]["phase"] for v in volumes_of(res)] == (["Available"] if static else [])
    assert [m for *_, m in events(res, "WaitForFirstConsumer")] == [
        "waiting for first consumer to be created before binding"]
    assert "Insufficient cpu" in events(res, "FailedScheduling")[0][3]


# -- access modes and the attach/detach controller ----------------------------------------------------------
@pytest.mark.parametrize("binding", ["Immediate", "WaitForFirstConsumer"])
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_read_write_once_on_two_nodes_is_a_multi_attach_error_until_the_first_pod_ends(binding: str,
                                                                                       static: bool) -> None:
    objs = [make_scenario("2h").obj(), *nodes(2), sc(mode=binding), pvc(), user("a", node="n1"),
            user("b", node="n2", at="1m")]
    if static:
        objs.append(pv("disk", "100Gi"))
    res = run(objects=objs)
    volume = last(res, "PersistentVolumeClaim", "data")["spec"]["volumeName"]
    assert [(t, n, ty, m) for t, n, ty, m in events(res, "FailedAttachVolume")] == [
        (60.0, "b", "Warning", f'Multi-Attach error for volume "{volume}" Volume is already used by pod(s) a')]
    assert first_time(res, "Pod", "b", lambda o: bool(o["spec"].get("nodeName"))) == 60.0  # scheduled
    waiting = first_time(res, "Pod", "b", lambda o: any(
        cs["state"].get("waiting", {}).get("reason") == "ContainerCreating"
        for cs in (o.get("status") or {}).get("containerStatuses") or []))
    assert waiting == 60.0
    assert first_time(res, "Pod", "b", phase_at("", "Running")) == 1800.0  # when a ends and the disk detaches
    assert [(t, m) for t, n, _, m in events(res, "FailedMount") if n == "b"] == [
        (183.0, "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to "
         "process volumes=[]: context deadline exceeded")]
    attached = [(t, n) for t, n, _, _ in events(res, "SuccessfulAttachVolume")]
    assert attached == [(0.0, "a"), (1800.0, "b")]


@pytest.mark.parametrize(("mode", "volume_mode"), [("ReadOnlyMany", "Filesystem"), ("ReadWriteMany", "Block")])
def test_many_node_modes_attach_to_every_node(mode: str, volume_mode: str) -> None:
    """A PD attaches read-only to many nodes, or read-write to many as a multi-writer block device."""
    res = run(objects=[make_scenario("1h").obj(), *nodes(3), sc(), pvc(modes=(mode,), volumeMode=volume_mode),
                       *(user(f"p{i}", node=f"n{i}") for i in (1, 2, 3))])
    assert not events(res, "FailedAttachVolume")
    assert [first_time(res, "Pod", f"p{i}", phase_at("", "Running")) for i in (1, 2, 3)] == [0.0, 0.0, 0.0]


def test_read_write_once_pods_on_one_node_share_the_volume() -> None:
    res = run(objects=[make_scenario("1h").obj(), *nodes(2), sc(), pvc(),
                       user("a", node="n1"), user("b", node="n1")])
    assert not events(res, "FailedAttachVolume") and not events(res, "FailedScheduling")
    assert [first_time(res, "Pod", p, phase_at("", "Running")) for p in "ab"] == [0.0, 0.0]


def test_network_file_systems_are_not_attached_so_read_write_once_is_not_enforced_across_nodes() -> None:
    """Filestore's CSIDriver needs no attach: the attach/detach controller never sees it, as on GKE."""
    filestore = sc(provisioner="filestore.csi.storage.gke.io", parameters={"tier": "zonal"})
    res = run(objects=[make_scenario("1h").obj(), *nodes(2), filestore, pvc(size="1Ti"),
                       user("a", node="n1"), user("b", node="n2")])
    assert not events(res, "FailedAttachVolume") and not events(res, "SuccessfulAttachVolume")
    assert [first_time(res, "Pod", p, phase_at("", "Running")) for p in "ab"] == [0.0, 0.0]


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("binding", ["Immediate", "WaitForFirstConsumer"])
def test_read_write_once_pod_allows_one_pod_in_the_cluster(n: int, binding: str) -> None:
    res = run(objects=[make_scenario("2h").obj(), *nodes(n), sc(mode=binding), pvc(modes=("ReadWriteOncePod",)),
                       user("a"), user("b", at="1m")])
    assert events(res, "FailedScheduling")[0][1:] == (
        "b", "Warning", f"0/{n} nodes are available: {n} node has pod using PersistentVolumeClaim with the same name "
        f"and ReadWriteOncePod access mode. preemption: 0/{n} nodes are available: {n} No preemption victims found "
        "for incoming pod.")
    assert first_time(res, "Pod", "b", lambda o: bool(o["spec"].get("nodeName"))) == 1800.0  # requeued when a ends
    assert first_time(res, "Pod", "b", phase_at("", "Running")) == 1800.0
    assert not events(res, "FailedAttachVolume")


def _states(res) -> dict[tuple, list[tuple]]:
    """Per object, its (phase, node, volume, claimRef) at the end of each instant it changed in."""
    out: dict[tuple, dict[float, tuple]] = {}
    for t, _, etype, o in res.history:
        if o["kind"] not in ("Pod", "PersistentVolumeClaim", "PersistentVolume"):
            continue
        spec, st = o.get("spec") or {}, o.get("status") or {}
        out.setdefault((o["kind"], o["metadata"]["name"]), {})[t] = None if etype == "DELETED" else (
            st.get("phase"), spec.get("nodeName"), spec.get("volumeName"), (spec.get("claimRef") or {}).get("name"))
    return {k: sorted(v.items()) for k, v in out.items()}


def test_controllers_created_in_another_order_give_the_same_storage_run(monkeypatch) -> None:
    """The PV controller, the scheduler's volume binder, the attach/detach controller and the kubelet meet only
    through the store and the kubelet's volume gate: the order their watches are called in changes nothing."""
    from kubetwin.store.store import Store

    objs = [make_scenario("2h").obj(), *nodes(2), sc(), sc("late", mode="WaitForFirstConsumer"), pv("disk", "100Gi"),
            pvc(), pvc("rwop", modes=("ReadWriteOncePod",)), pvc("wffc", cls="late"), user("a", node="n1"),
            user("b", node="n2", at="1m"), user("c", "rwop"), user("d", "rwop", at="2m"), user("e", "wffc", at="3m"),
            user("f", "wffc", node="n2", at="4m")]
    forward = run(objects=objs)
    monkeypatch.setattr(Store, "reverse_dispatch", True)
    backward = run(objects=objs)
    assert _states(forward) == _states(backward)
    assert [m for *_, m in events(forward, "FailedAttachVolume")] == [m for *_, m in events(backward,
                                                                                            "FailedAttachVolume")]
    assert len(events(forward, "FailedAttachVolume")) == 2  # b on data; f (n2) on wffc, provisioned for e's node


def test_a_claim_provisioning_for_a_selected_node_fits_only_that_node_until_bound() -> None:
    """Two pods of one WaitForFirstConsumer claim at the same instant: the first selects n1; while the claim is
    unbound the second fits only n1 (FindPodVolumes' fast path), then, bound, anywhere: its node n2 gets the
    Multi-Attach error."""
    res = run(objects=[make_scenario("1h").obj(), *nodes(2), sc(mode="WaitForFirstConsumer"), pvc(),
                       user("a", node="n1"), user("b", node="n2")])
    assert events(res, "FailedScheduling")[0][1:] == ("b", "Warning", (
        "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 1 node(s) didn't "
        "match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
        "scheduling."))
    assert last(res, "PersistentVolumeClaim", "data")["metadata"]["annotations"][
        "volume.kubernetes.io/selected-node"] == "n1"
    assert [n for _, n, _, _ in events(res, "FailedAttachVolume")] == ["b"]


def test_what_the_twin_does_not_model_is_a_notice_naming_what_the_run_does() -> None:
    from kubetwin.api.loader import Manifest
    from kubetwin.validation.validate import validate

    affine = pv("local", "10Gi", nodeAffinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}})
    topo = sc("zonal", allowedTopologies=[{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                                      "values": ["us-central1-a"]}]}])
    foreign = sc("ebs", provisioner="ebs.csi.aws.com")
    clone = pvc("clone", dataSource={"kind": "PersistentVolumeClaim", "name": "data"})
    eph = make_pod("e").obj()
    eph["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]
    found = {(d.obj.split("/")[0], d.field): (d.severity, d.message)
             for d in validate([Manifest(o, "<t>", 0) for o in (affine, topo, foreign, clone, eph)])}
    assert found == {
        ("StorageClass", "allowedTopologies"): ("notice", "the twin does not check allowedTopologies: it "
                                                "provisions for whichever node the pod is scheduled to"),
        ("StorageClass", "provisioner"): ("notice", "provisioner 'ebs.csi.aws.com' is not a CSI driver GKE runs: "
                                          "the twin assumes it is installed and provisions claims of this class at "
                                          "once"),
        ("PersistentVolumeClaim", "spec.dataSource"): ("notice", "the twin does not copy from a "
                                                       "PersistentVolumeClaim: the claim is provisioned empty, at "
                                                       "once"),
        ("Pod", "spec.volumes[0].ephemeral"): ("notice", "generic ephemeral volumes are not modelled: the pod runs "
                                               "without waiting for its claim, and no PersistentVolumeClaim is "
                                               "created")}


def test_a_deleted_claims_volume_is_released_or_deleted_by_its_reclaim_policy() -> None:
    gone = pvc("tmp")
    gone["metadata"]["annotations"] = {"kubetwin.io/delete-at": "10m"}
    kept = pvc("kept-claim", cls="")
    kept["metadata"]["annotations"] = {"kubetwin.io/delete-at": "10m"}
    res = run(objects=[make_scenario("30m").obj(), *nodes(1), sc(), pv("disk", "100Gi", cls=""), gone, kept,
                       pvc("late", cls="")])
    deleted = [o["metadata"]["name"] for t, _, etype, o in res.history if o["kind"] == "PersistentVolume"
               and etype == "DELETED"]
    assert len(deleted) == 1 and deleted[0].startswith("pvc-")  # provisioned, reclaimPolicy Delete
    assert last(res, "PersistentVolume", "disk")["status"]["phase"] == "Released"  # manual: Retain
    assert last(res, "PersistentVolumeClaim", "late")["status"]["phase"] == "Pending"  # a Released volume stays taken
