"""DRANET (kubernetes-sigs/dranet, driver dra.net): a GPU node's RDMA NICs as DRA devices, claimed beside its GPUs
with matchAttribute resource.kubernetes.io/pcieRoot so each NIC sits on its GPU's PCIe root, and the training model
reading a pod that holds one NIC per GPU as having its GPUDirect-RDMA NICs.

Cases after the upstream project: the device names and attributes of pkg/inventory (db.go: a PCI network device is
named NormalizePCIAddress(address), carries dra.net/pciAddress, dra.net/rdma and the standardized pcieRoot /
numaNode; pkg/names/names_test.go: "0000:8a:00.0" -> "pci-0000-8a-00-0"), the classes of its examples
(examples/demo_nvidia_dranet/deviceclass.yaml: `dranet` = device.driver == "dra.net") and the claim of
examples/demo_nvidia_dranet/resourceclaims.yaml (GPUs and RDMA NICs in one claim, matchAttribute pcieRoot)."""

from __future__ import annotations

import json

import pytest
from dra_builders import TOLERATE, ClaimWrapper
from gpudirect_builders import installer, set_up
from k8s_builders import make_pool, make_scenario

from kubetwin.devices.dra import dranet
from kubetwin.runner import run

P = "training.kubetwin.io/"
TRAIN = {P + "params": "8B", P + "steps": "200", P + "global-batch-size": "64", P + "sequence-length": "4096",
         P + "fsdp": "true"}
DRA_LABELS = {"gke-no-default-nvidia-gpu-device-plugin": "true", dranet.ENABLED_LABEL: "true"}


def pool(machine: str = "a3-ultragpu-8g", gpu: str = "nvidia-h200-141gb", nodes: int = 1, gpus: int = 8,
         **labels: str) -> dict:
    return (make_pool("gpu", machine, nodes).gpus(gpu, gpus, gpuDriverInstallation="INSTALLATION_DISABLED")
            .spec(zones=["us-central1-b"]).node_labels(**(labels or DRA_LABELS)).obj())


def slices(res, driver: str) -> list[dict]:
    latest = {o["metadata"]["name"]: o for _, etype, o in res.versions("ResourceSlice") if etype != "DELETED"}
    return [o for o in latest.values() if o["spec"]["driver"] == driver]


def test_names_follow_dranet_normalize_pci_address() -> None:
    """pkg/names/names_test.go: a PCI address's ':' and '.' become '-' behind the "pci" prefix."""
    nic = dranet.nic("n", "a3-ultragpu-8g", 0, 8, {})
    address = nic["attributes"]["dra.net/pciAddress"]["string"]
    assert nic["name"] == "pci-" + address.replace(":", "-").replace(".", "-")


@pytest.mark.parametrize("machine,gpu,count", [("a3-ultragpu-8g", "nvidia-h200-141gb", 8),
                                               ("a4-highgpu-8g", "nvidia-b200", 8)])
def test_a_labelled_rdma_node_publishes_one_nic_per_gpu_with_its_pcie_root(machine, gpu, count) -> None:
    res = run(objects=[pool(machine, gpu)], duration="10m")
    [sl] = slices(res, "dra.net")
    devs = sl["spec"]["devices"]
    assert len(devs) == count == dranet.nic_count(machine)
    names = {o["metadata"]["name"] for _, _, o in res.versions("DeviceClass")}
    assert {"dranet", "mrdma.google.com", "gpu.nvidia.com"} <= names
    [gpus] = slices(res, "gpu.nvidia.com")
    gpu_roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in gpus["spec"]["devices"]]
    nic_roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in devs]
    assert nic_roots == gpu_roots  # NIC i beside GPU i (two roots, one per socket)
    a = devs[6]["attributes"]
    assert a["dra.net/rdma"] == {"bool": True} and a["dra.net/ifName"] == {"string": "gpu6rdma0"}
    assert a["dra.net/numaNode"] == {"int": 1} and a["resource.kubernetes.io/numaNode"] == {"int": 1}
    assert a["dra.net/rdmaDevice"] == {"string": "mlx5_6"} and a["gce.dra.net/machineType"]["string"] == machine


def test_no_nics_without_the_label_or_on_a_machine_without_rdma_nics() -> None:
    res = run(objects=[pool(**{"gke-no-default-nvidia-gpu-device-plugin": "true"})], duration="10m")
    assert slices(res, "dra.net") == [] and slices(res, "gpu.nvidia.com")
    tcpx = pool("a3-highgpu-8g", "nvidia-h100-80gb")
    tcpx["spec"]["zones"] = ["us-central1-a"]
    assert slices(run(objects=[tcpx], duration="10m"), "dra.net") == []


def gpu_nic_claim(name: str, gpus: int, nics: int, aligned: bool, gpu_selector: str | None = None) -> dict:
    c = ClaimWrapper({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                      "spec": {"devices": {"requests": []}}})
    c.request("gpu", "gpu.nvidia.com", gpus, selectors=(gpu_selector,) if gpu_selector else ())
    if nics:
        c.request("nic", "mrdma.google.com", nics)
    if aligned:
        c.match_attribute("resource.kubernetes.io/pcieRoot")
    return c.obj()


def claim_pod(name: str, claim: str, template: bool = False) -> dict:
    ref = {"name": "dev", ("resourceClaimTemplateName" if template else "resourceClaimName"): claim}
    meta = {"name": name, "annotations": {"kubetwin.io/duration": "1h"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"resourceClaims": [ref], "tolerations": TOLERATE, "containers": [
                {"name": "c", "image": "x", "resources": {"claims": [{"name": "dev"}]}}]}}


def allocated(res, claim: str) -> list[dict]:
    return res.last("ResourceClaim", claim, namespace="default")["status"]["allocation"]["devices"]["results"]


@pytest.mark.parametrize("aligned", [True, False])
def test_match_attribute_pcie_root_gives_the_nic_beside_the_gpu(aligned: bool) -> None:
    """The GPU on the second root (gpu-5, bus 0000:09) and one RDMA NIC: with the constraint the NIC is on the same
    root; without it the allocator takes the first NIC that fits, on the other root."""
    sel = 'device.attributes["resource.kubernetes.io"].pciBusID == "0000:09:00.0"'
    objs = [pool(), gpu_nic_claim("pair", 1, 1, aligned, sel), claim_pod("p", "pair")]
    res = run(objects=objs, duration="1h")
    results = {r["request"]: r for r in allocated(res, "pair")}
    assert results["gpu"]["device"] == "gpu-5" and results["nic"]["driver"] == "dra.net"
    [sl] = slices(res, "dra.net")
    nic = next(d for d in sl["spec"]["devices"] if d["name"] == results["nic"]["device"])
    root = nic["attributes"]["resource.kubernetes.io/pcieRoot"]["string"]
    assert (root == "pci0000:80") is aligned


def test_eight_aligned_pairs_fill_a_node_and_a_ninth_waits() -> None:
    objs = [pool()]
    for i in range(9):
        objs += [gpu_nic_claim(f"c{i}", 1, 1, True), claim_pod(f"p{i}", f"c{i}")]
    res = run(objects=objs, duration="30m")
    phases = {o["metadata"]["name"]: (o.get("status") or {}).get("phase") for _, _, o in res.versions("Pod")}
    assert sum(1 for p in phases.values() if p == "Running") == 8 and list(phases.values()).count("Pending") == 1


def test_the_autoscaler_scales_up_a_labelled_pool_for_a_gpu_and_nic_claim() -> None:
    """The cluster autoscaler's simulation of a new node includes the NICs DRANET will publish on it, so a pending
    pod whose claim asks for a GPU and an aligned RDMA NIC scales the pool up from zero."""
    scaled = pool(nodes=0)
    scaled["spec"].pop("nodeCount")
    scaled["spec"]["autoscaling"] = {"minNodeCount": 0, "maxNodeCount": 1}
    res = run(objects=[scaled, gpu_nic_claim("pair", 1, 1, True), claim_pod("p", "pair")], duration="1h")
    pod = res.last("Pod", "p")
    assert pod["status"]["phase"] == "Running" and pod["spec"].get("nodeName")
    results = {r["request"]: r["driver"] for r in allocated(res, "pair")}
    assert results == {"gpu": "gpu.nvidia.com", "nic": "dra.net"}


# ------------------------------------------------------------------------------ the training network model
def job(tmpl: dict, pods: int = 2) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "template": tmpl}}


def claim_template(nics: int) -> dict:
    """A whole node's 8 GPUs and `nics` NICs: no pcieRoot constraint (all 16 devices cannot share one of the node's
    two roots; a whole-node claim is aligned by taking everything)."""
    spec = gpu_nic_claim("x", 8, nics, False)["spec"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus-nics", "namespace": "default"}, "spec": {"spec": spec}}


def template(plugin_set_up: bool) -> dict:
    t = {"metadata": {"annotations": dict(TRAIN)}, "spec": {
        "restartPolicy": "Never", "tolerations": TOLERATE,
        "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "gpus-nics"}],
        "containers": [{"name": "trainer", "image": "pytorch", "resources": {"claims": [{"name": "dev"}]}}]}}
    if plugin_set_up:  # GKE's RDMA guide's NCCL plugin mounts, without the multi-network annotations
        t = set_up(t, "rdma")
        for key in ("networking.gke.io/default-interface", "networking.gke.io/interfaces"):
            del t["metadata"]["annotations"][key]
    return t


def train(tmp_path, name: str, nics: int, plugin_set_up: bool = True) -> dict:
    out = tmp_path / name
    objs = [make_scenario("3h").obj(), pool(nodes=2), claim_template(nics), job(template(plugin_set_up))]
    if plugin_set_up:
        objs.append(installer("rdma"))
    run(objects=objs, out=out)
    return json.loads((out / "training.json").read_text())["default/train"]


def test_a_pod_with_a_dranet_nic_per_gpu_uses_gpudirect_rdma(tmp_path) -> None:
    full = train(tmp_path, "nics", 8)
    assert full["placement"]["tier"] == "rdma" and "gpudirect_missing" not in full["placement"]
    none = train(tmp_path, "no-nics", 0)  # GPUs by claim, no NICs and no interfaces: NCCL on sockets
    assert none["placement"]["tier"] == "tcp_fallback"
    assert "networking.gke.io/interfaces" in none["placement"]["gpudirect_missing"][0]
    assert none["breakdown"]["step_seconds"] > 1.5 * full["breakdown"]["step_seconds"]


def test_fewer_nics_than_gpus_or_no_plugin_is_not_gpudirect(tmp_path) -> None:
    half = train(tmp_path, "half", 4)
    assert half["placement"]["tier"] == "tcp_fallback"
    assert "it holds 4 for 8 GPUs" in half["placement"]["gpudirect_missing"][0]
    bare = train(tmp_path, "bare", 8, plugin_set_up=False)
    assert bare["placement"]["tier"] == "tcp_fallback"
    assert "installer DaemonSet" in bare["placement"]["gpudirect_missing"][0]
