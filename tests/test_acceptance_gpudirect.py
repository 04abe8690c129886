"""GPUDirect as GKE's guides write it, verbatim (issue 31 item 3, second pass): the NCCL test pods and installer
DaemonSets of GoogleCloudPlatform/container-engine-accelerators@992db81 (gpudirect-tcpx/nccl-test-latest.yaml,
gpudirect-tcpxo/nccl-test-latest.yaml, gpudirect-rdma/nccl-test.yaml and the nccl-*-installer.yaml files, copied
into tests/data/gpudirect-guides/ unchanged, Apache-2.0), with the guides' GKENetworkParamSet/Network objects
("Maximize GPU network bandwidth ..." pages: vpc1..vpcN / rdma-0..rdma-7, deviceMode NetDevice / RDMA). The guide's
pod spec, run as a two-pod training Job on its machine: the tier with nothing missing; each piece removed: one
validate notice naming exactly that piece, and the run on the socket fallback."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from gpudirect_builders import SHAPES, network_names, network_object, param_set
from k8s_builders import make_pool, make_scenario

from kubetwin.api.loader import Manifest
from kubetwin.runner import run
from kubetwin.validation.validate import validate
from kubetwin.workloads import gpudirect

DATA = Path(__file__).parent / "data" / "gpudirect-guides"
GUIDE = {"tcpx": ("tcpx-nccl-test-latest.yaml", "nccl-tcpx-installer.yaml", "a3-high"),
         "tcpxo": ("tcpxo-nccl-test-latest.yaml", "nccl-tcpxo-installer.yaml", "a3-mega"),
         "rdma": ("rdma-nccl-test.yaml", "nccl-rdma-installer.yaml", "a3-ultra")}
P = "training.kubetwin.io/"
TRAIN = {P + "params": "8B", P + "steps": "200", P + "global-batch-size": "64", P + "sequence-length": "4096",
         P + "fsdp": "true"}


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


def guide(plugin: str) -> tuple[dict, list[dict]]:
    """The guide's first NCCL test pod as a pod template (its metadata and spec unchanged, plus the twin's training
    annotations), and the cluster objects: the guide's networks and its installer DaemonSet, verbatim."""
    test, installer, _ = GUIDE[plugin]
    pod = next(d for d in _docs(test) if d["kind"] == "Pod")
    meta = copy.deepcopy(pod["metadata"])
    meta["annotations"] = {**meta.get("annotations", {}), **TRAIN}
    meta.pop("name", None)
    spec = copy.deepcopy(pod["spec"])
    spec["restartPolicy"] = "Never"
    names = network_names(plugin)
    objs = [*(param_set(n, plugin) for n in names), *(network_object(n) for n in names), *_docs(installer)]
    return {"metadata": meta, "spec": spec}, objs


def job(tmpl: dict, pods: int = 2) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "template": tmpl}}


def _gpu(t: dict) -> dict:
    return next(c for c in t["spec"]["containers"] if "nvidia.com/gpu" in (c.get("resources") or {}).get("limits",
                                                                                                        {}))


def _drop_host_path(path: str):
    def f(t: dict, objs: list[dict]) -> None:
        names = {v["name"] for v in t["spec"]["volumes"] if (v.get("hostPath") or {}).get("path") == path}
        t["spec"]["volumes"] = [v for v in t["spec"]["volumes"] if v["name"] not in names]
        for c in [*t["spec"].get("initContainers", []), *t["spec"]["containers"]]:
            c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m["name"] not in names]
    return f


def _drop_env(name: str):
    def f(t: dict, objs: list[dict]) -> None:
        gpu = _gpu(t)
        gpu["env"] = [e for e in gpu.get("env", []) if e["name"] != name]
    return f


def _drop_annotation(key: str):
    def f(t: dict, objs: list[dict]) -> None:
        del t["metadata"]["annotations"][key]
    return f


def _drop_object(kind: str, name: str | None = None):
    def f(t: dict, objs: list[dict]) -> None:
        objs[:] = [o for o in objs if not (o["kind"] == kind and name in (None, o["metadata"]["name"]))]
    return f


def _drop_daemon(t: dict, objs: list[dict]) -> None:
    t["spec"]["containers"] = [c for c in t["spec"]["containers"] if "tcpgpudmarxd" not in c["image"]]


# piece -> (how to remove it, the flavours it applies to, the words the notice must name)
PIECES = {
    "default-interface annotation": (_drop_annotation("networking.gke.io/default-interface"), "tcpx tcpxo rdma",
                                     "networking.gke.io/default-interface"),
    "interfaces annotation": (_drop_annotation("networking.gke.io/interfaces"), "tcpx tcpxo rdma",
                              "networking.gke.io/interfaces"),
    "a Network": (lambda t, o: _drop_object("Network", network_names(_flavour(o))[1])(t, o), "tcpx tcpxo rdma",
                  "does not exist"),
    "a GKENetworkParamSet": (lambda t, o: _drop_object("GKENetworkParamSet", network_names(_flavour(o))[0])(t, o),
                             "tcpx tcpxo rdma", "GKENetworkParamSet"),
    "installer DaemonSet": (_drop_object("DaemonSet"), "tcpx tcpxo rdma", "installer"),
    "LD_LIBRARY_PATH": (_drop_env("LD_LIBRARY_PATH"), "tcpx tcpxo rdma", "LD_LIBRARY_PATH"),
    "plugin library volume": (_drop_host_path("/home/kubernetes/bin/nvidia/lib64"), "tcpx tcpxo",
                              "/home/kubernetes/bin/nvidia/lib64"),
    "nvidia directory volume": (_drop_host_path("/home/kubernetes/bin/nvidia"), "rdma", "/home/kubernetes/bin/nvidia"),
    "gIB volume": (_drop_host_path("/home/kubernetes/bin/gib"), "rdma", "/home/kubernetes/bin/gib"),
    "RxDM sidecar": (_drop_daemon, "tcpx tcpxo", "tcpgpudmarxd"),
    "tcpx socket volume": (_drop_host_path("/run/tcpx"), "tcpx", "/run/tcpx"),
    "aperture devices volume": (_drop_host_path("/dev/aperture_devices"), "tcpxo", "/dev/aperture_devices"),
    "LLCM directory env": (_drop_env("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"), "tcpxo",
                           "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"),
}
CASES = [(plugin, piece) for plugin in GUIDE for piece, (_, flavours, _) in PIECES.items()
         if plugin in flavours.split()]


def _flavour(objs: list[dict]) -> str:
    modes = {(o.get("spec") or {}).get("deviceMode") for o in objs if o["kind"] == "GKENetworkParamSet"}
    names = {o["metadata"]["name"] for o in objs if o["kind"] in ("GKENetworkParamSet", "Network")}
    return "rdma" if "RDMA" in modes else ("tcpxo" if "vpc8" in names else "tcpx")


def _manifests(plugin: str, tmpl: dict, objs: list[dict]) -> list[Manifest]:
    mt, gpu, _, _ = SHAPES[GUIDE[plugin][2]]
    pool = make_pool("gpu", mt, 2).gpus(gpu, 8).spec(zones=["us-central1-b"]).obj()
    return [Manifest(o, "<o>", 0) for o in [make_scenario("3h").obj(), pool, *objs, job(tmpl)]]


def _notices(ms: list[Manifest]) -> list:
    return [d for d in validate(ms) if "GPUDirect" in d.message and not d.obj.startswith("DaemonSet/")]


@pytest.mark.parametrize("plugin", sorted(GUIDE))
def test_the_guides_pod_as_written_gets_gpudirect(plugin: str, tmp_path) -> None:
    tmpl, objs = guide(plugin)
    cap = SHAPES[GUIDE[plugin][2]][2]
    assert gpudirect.check(tmpl, cap, gpudirect.Cluster.of(objs)).missing == ()
    assert _notices(_manifests(plugin, tmpl, objs)) == []
    run(objects=[m.obj for m in _manifests(plugin, tmpl, objs)], out=tmp_path / "r")
    placement = json.loads((tmp_path / "r" / "training.json").read_text())["default/train"]["placement"]
    assert placement["tier"] == cap and "gpudirect_missing" not in placement


@pytest.mark.parametrize(("plugin", "piece"), CASES)
def test_each_piece_removed_from_the_guide_is_named(plugin: str, piece: str) -> None:
    tmpl, objs = guide(plugin)
    PIECES[piece][0](tmpl, objs)
    notes = _notices(_manifests(plugin, tmpl, objs))
    assert len(notes) == 1, [n.message for n in notes]
    assert PIECES[piece][2] in notes[0].message, notes[0].message
    assert "falls back" in notes[0].message and notes[0].obj == "Job/default/train"
