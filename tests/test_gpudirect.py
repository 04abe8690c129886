"""GPUDirect needs its set-up (issue 31 item 3): a pod on A3 High (TCPX), A3 Mega (TCPXO), A3 Ultra or A4 (RDMA)
gets GPUDirect only with the multi-network interfaces, the NCCL plugin and (TCPX/TCPXO) the receive-data-path
daemon GKE's guides set up; without them NCCL runs over TCP on eth0 between nodes, the step time says so, and
validate gives a notice naming what is missing. One node needs none of it."""

from __future__ import annotations

import copy
import json

import pytest
from gpudirect_builders import SHAPES, cluster_objects, set_up
from k8s_builders import make_pool, make_scenario

from kubetwin.api.loader import Manifest
from kubetwin.runner import run
from kubetwin.validation.validate import validate
from kubetwin.workloads import gpudirect

P = "training.kubetwin.io/"
TRAIN = {P + "params": "8B", P + "steps": "200", P + "global-batch-size": "64", P + "sequence-length": "4096",
         P + "fsdp": "true"}


def template(gpus: int = 8) -> dict:
    return {"metadata": {"annotations": dict(TRAIN)}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "trainer", "image": "pytorch", "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def job(tmpl: dict, pods: int = 2) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "template": tmpl}}


# ------------------------------------------------------------------------------------------ the rule, per piece
def _drop_annotation(key):
    def f(t, objs):
        del t["metadata"]["annotations"][key]
    return f


def _drop_kind(kind, name=None):
    def f(t, objs):
        objs[:] = [o for o in objs if not (o["kind"] == kind and (name is None or o["metadata"]["name"] == name))]
    return f


def _drop_volume(host_path):
    def f(t, objs):
        names = {v["name"] for v in t["spec"]["volumes"] if v.get("hostPath", {}).get("path") == host_path}
        t["spec"]["volumes"] = [v for v in t["spec"]["volumes"] if v["name"] not in names]
        for c in t["spec"]["containers"]:
            c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m["name"] not in names]
    return f


def _drop_env(name):
    def f(t, objs):
        t["spec"]["containers"][0]["env"] = [e for e in t["spec"]["containers"][0]["env"] if e["name"] != name]
    return f


def _drop_sidecar(t, objs):
    t["spec"]["containers"] = t["spec"]["containers"][:1]


def _fewer_interfaces(t, objs):
    ifaces = json.loads(t["metadata"]["annotations"]["networking.gke.io/interfaces"])
    t["metadata"]["annotations"]["networking.gke.io/interfaces"] = json.dumps(ifaces[:-1])


def _duplicate_interface(t, objs):
    ifaces = json.loads(t["metadata"]["annotations"]["networking.gke.io/interfaces"])
    ifaces[-1] = {**ifaces[-1], "network": ifaces[-2]["network"]}
    t["metadata"]["annotations"]["networking.gke.io/interfaces"] = json.dumps(ifaces)


def _wrong_device_mode(t, objs):
    for o in objs:
        if o["kind"] == "GKENetworkParamSet":
            o["spec"]["deviceMode"] = "NetDevice" if o["spec"]["deviceMode"] == "RDMA" else "RDMA"


# piece -> (how to remove it, which capabilities it applies to, words the notice must contain)
PIECES = {
    "default-interface": (_drop_annotation("networking.gke.io/default-interface"), "tcpx tcpxo rdma",
                          "networking.gke.io/default-interface"),
    "interfaces": (_drop_annotation("networking.gke.io/interfaces"), "tcpx tcpxo rdma",
                   "networking.gke.io/interfaces"),
    "one interface short": (_fewer_interfaces, "tcpx tcpxo rdma", "GPU NIC network(s) of the"),
    "one network twice": (_duplicate_interface, "tcpx tcpxo rdma", "GPU NIC network(s) of the"),
    "Network": (lambda t, o: _drop_kind("Network", o[0]["metadata"]["name"])(t, o), "tcpx tcpxo rdma",
                "does not exist"),
    "GKENetworkParamSet": (lambda t, o: _drop_kind("GKENetworkParamSet", o[0]["metadata"]["name"])(t, o),
                           "tcpx tcpxo rdma", "GKENetworkParamSet"),
    "deviceMode": (_wrong_device_mode, "tcpx tcpxo rdma", "deviceMode"),
    "installer DaemonSet": (_drop_kind("DaemonSet"), "tcpx tcpxo rdma", "installer DaemonSet"),
    "LD_LIBRARY_PATH": (_drop_env("LD_LIBRARY_PATH"), "tcpx tcpxo rdma", "LD_LIBRARY_PATH"),
    "plugin library mount": (_drop_volume("/home/kubernetes/bin/nvidia/lib64"), "tcpx tcpxo", "lib64"),
    "nvidia mount (RDMA)": (_drop_volume("/home/kubernetes/bin/nvidia"), "rdma", "/home/kubernetes/bin/nvidia"),
    "gIB mount": (_drop_volume("/home/kubernetes/bin/gib"), "rdma", "/home/kubernetes/bin/gib"),
    "daemon sidecar": (_drop_sidecar, "tcpx tcpxo", "tcpgpudmarxd"),
    "tcpx socket volume": (_drop_volume("/run/tcpx"), "tcpx", "/run/tcpx"),
    "aperture devices": (_drop_volume("/dev/aperture_devices"), "tcpxo", "/dev/aperture_devices"),
    "LLCM env": (_drop_env("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"), "tcpxo", "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"),
}
CASES = [(shape, piece) for shape in SHAPES for piece, (_, caps, _) in PIECES.items()
         if SHAPES[shape][2] in caps.split()]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_full_set_up_gets_gpudirect(shape):
    plugin = SHAPES[shape][2]
    setup = gpudirect.check(set_up(template(), plugin), plugin, gpudirect.Cluster.of(cluster_objects(plugin)))
    assert setup.ok, setup.missing
    bare = gpudirect.check(template(), plugin, gpudirect.Cluster.of([]))
    assert not bare.ok and len(bare.missing) >= 4


@pytest.mark.parametrize(("shape", "piece"), CASES)
def test_each_missing_piece_is_named(shape, piece):
    plugin = SHAPES[shape][2]
    tmpl, objs = set_up(template(), plugin), cluster_objects(plugin)
    PIECES[piece][0](tmpl, objs)
    setup = gpudirect.check(tmpl, plugin, gpudirect.Cluster.of(objs))
    assert not setup.ok
    assert any(PIECES[piece][2] in m for m in setup.missing), setup.missing


# ------------------------------------------------------------------------------------------ validate
def _manifests(shape: str, tmpl: dict, objs: list[dict], pods: int = 2, gpu_direct: str | None = None):
    mt, gpu, _, _ = SHAPES[shape]
    pool = make_pool("gpu", mt, 2).gpus(gpu, 8).spec(zones=["us-central1-b"])
    if gpu_direct:
        pool = pool.spec(gpuDirect=gpu_direct)
    return [Manifest(o, "<o>", 0) for o in [make_scenario().obj(), pool.obj(), *objs, job(tmpl, pods)]]


def _notices(ms):
    return [d for d in validate(ms) if "GPUDirect" in d.message and not d.obj.startswith("DaemonSet/")]


@pytest.mark.parametrize(("shape", "piece"), CASES)
def test_validate_names_exactly_what_is_missing(shape, piece):
    plugin = SHAPES[shape][2]
    tmpl, objs = set_up(template(), plugin), cluster_objects(plugin)
    assert _notices(_manifests(shape, tmpl, objs)) == []  # complete: no notice
    PIECES[piece][0](tmpl, objs)
    notes = _notices(_manifests(shape, tmpl, objs))
    assert [n.severity for n in notes] == ["notice"] and notes[0].obj == "Job/default/train"
    assert PIECES[piece][2] in notes[0].message and "falls back" in notes[0].message
    assert notes[0].field == "spec.template.metadata"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_validate_is_silent_for_one_pod_and_for_pools_without_gpudirect(shape):
    assert _notices(_manifests(shape, template(), [], pods=1)) == []  # one node: NVLink only
    assert _notices(_manifests(shape, template(), [], gpu_direct="none")) == []  # the pool runs sockets anyway
    assert len(_notices(_manifests(shape, template(), []))) == 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_validate_is_silent_for_pods_whose_step_time_the_twin_does_not_model(shape):
    """A multi-pod Job that runs for its kubetwin.io/duration alone: the transport changes nothing the run reports,
    so a notice saying "the run times its collectives so" would be false (the Kueue and autoscaler examples)."""
    plain = template()
    plain["metadata"]["annotations"] = {"kubetwin.io/duration": "1h"}
    assert _notices(_manifests(shape, plain, [])) == []


def test_installer_daemonset_notice_says_it_is_read_not_run():
    notes = [d for d in validate([Manifest(o, "<o>", 0) for o in cluster_objects("tcpxo")])
             if d.obj.startswith("DaemonSet/")]
    assert len(notes) == 1 and "GPUDirect-TCPXO NCCL plugin" in notes[0].message and "not simulated" not in \
        notes[0].message


def test_network_kinds_are_accepted_and_checked_against_their_crds():
    objs = cluster_objects("rdma")
    assert [d for d in validate([Manifest(o, "<o>", 0) for o in objs]) if d.severity != "notice"] == []
    bad = copy.deepcopy(objs[0])
    bad["spec"]["deviceMode"] = "RoCE"
    errors = [d for d in validate([Manifest(bad, "<o>", 0)]) if d.severity == "error"]
    assert len(errors) == 1 and errors[0].field == "spec.deviceMode" and "RDMA" in errors[0].message


# ------------------------------------------------------------------------------------------ the run
def _train(shape: str, tmpl: dict, objs: list[dict], pods: int, tmp_path, name: str) -> dict:
    mt, gpu, _, _ = SHAPES[shape]
    out = tmp_path / name
    pool = make_pool("gpu", mt, pods).gpus(gpu, 8).spec(zones=["us-central1-b"]).obj()
    run(objects=[make_scenario("3h").obj(), pool, *objs, job(tmpl, pods)], out=out)
    return json.loads((out / "training.json").read_text())["default/train"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_run_uses_gpudirect_only_with_its_set_up(shape, tmp_path):
    plugin = SHAPES[shape][2]
    full = _train(shape, set_up(template(), plugin), cluster_objects(plugin), 2, tmp_path, "full")
    bare = _train(shape, template(), [], 2, tmp_path, "bare")
    assert full["placement"]["tier"] == plugin and "gpudirect_missing" not in full["placement"]
    assert bare["placement"]["tier"] == "tcp_fallback"
    missing = bare["placement"]["gpudirect_missing"]
    assert len(missing) == 1 and "networking.gke.io/interfaces" in missing[0] and "falls back" in missing[0]
    assert bare["breakdown"]["step_seconds"] > 1.5 * full["breakdown"]["step_seconds"]
    advice = bare["advice"][0]  # the what-if that completes the set-up gives the full set-up's job time
    assert advice["change"].startswith("complete the GPUDirect set-up")
    assert advice["job_seconds"] == pytest.approx(full["breakdown"]["job_seconds"])
    # one piece short is as slow as none at all
    tmpl, objs = set_up(template(), plugin), cluster_objects(plugin)
    PIECES["installer DaemonSet"][0](tmpl, objs)
    short = _train(shape, tmpl, objs, 2, tmp_path, "short")
    assert short["breakdown"]["step_seconds"] == bare["breakdown"]["step_seconds"]
    assert "installer DaemonSet" in short["placement"]["gpudirect_missing"][0]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_one_node_is_the_same_with_or_without_the_set_up(shape, tmp_path):
    plugin = SHAPES[shape][2]
    full = _train(shape, set_up(template(), plugin), cluster_objects(plugin), 1, tmp_path, "full")
    bare = _train(shape, template(), [], 1, tmp_path, "bare")
    assert full["breakdown"]["step_seconds"] == bare["breakdown"]["step_seconds"]
    assert "gpudirect_missing" not in bare["placement"]


def test_fast_socket_pool_falls_back_to_fast_socket_not_plain_tcp(tmp_path):
    """Without the set-up NCCL runs its socket transport; on a pool with --enable-fast-socket that is Fast Socket."""
    out = tmp_path / "fs"
    pool = make_pool("gpu", "a3-megagpu-8g", 2).gpus("nvidia-h100-mega-80gb", 8).spec(fastSocket=True).obj()
    run(objects=[make_scenario("3h").obj(), pool, job(template(), 2)], out=out)
    rec = json.loads((out / "training.json").read_text())["default/train"]
    assert rec["placement"]["tier"] == "tcp_fallback+fastsocket" and rec["placement"]["gpudirect_missing"]


@pytest.mark.parametrize(("replicas", "notices"), [(2, 1), (1, 0)])
def test_validate_reads_a_jobsets_size(replicas, notices):
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace":
                                                                                   "default"},
          "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": {
              "parallelism": 1, "completions": 1, "template": template()}}}]}}
    pool = make_pool("gpu", "a3-megagpu-8g", 2).gpus("nvidia-h100-mega-80gb", 8).obj()
    notes = _notices([Manifest(o, "<o>", 0) for o in (make_scenario().obj(), pool, js)])
    assert len(notes) == notices
    if notes:
        assert "GPUDirect-TCPXO" in notes[0].message and notes[0].field == \
            "spec.replicatedJobs[0].template.spec.template.metadata"


@pytest.mark.parametrize("plugin", ["tcpx", "tcpxo", "rdma", "rdma_a4x"])
def test_the_generated_guide_set_up_is_complete(plugin):
    tmpl, objs = gpudirect.guide_set_up(template(), plugin)
    assert gpudirect.check(tmpl, plugin, gpudirect.Cluster.of(objs)).ok
    assert [d for d in validate([Manifest(o, "<o>", 0) for o in objs]) if d.severity == "error"] == []
