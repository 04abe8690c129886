"""GKE multi-network support for Pods needs Dataplane V2 and multi-networking on the cluster (Scenario
spec.cluster.networkConfig, the cluster API's datapathProvider and enableMultiNetworking). GKE's "Set up
multi-network support for Pods" page: "Multi-network support for Pods requires GKE Dataplane V2". The default is a
cluster as Google's GPUDirect-RDMA and H4D guides create it (both on), so the guides' objects validate; a cluster
without it refuses the Network kinds in kubectl's words and warns on pods that name networks."""

from __future__ import annotations

import json

import pytest
from gpudirect_builders import cluster_objects, set_up
from k8s_builders import make_pool, make_scenario
from test_h4d import h4d_pool

from kubetwin.api.loader import Manifest, load_text
from kubetwin.runner import run
from kubetwin.validation import multinetwork
from kubetwin.validation.validate import validate

P = "training.kubetwin.io/"
TRAIN = {P + "params": "8B", P + "steps": "20", P + "global-batch-size": "64", P + "sequence-length": "4096",
         P + "fsdp": "true"}


def gpu_job(pods: int = 2) -> dict:
    tmpl = {"metadata": {"annotations": dict(TRAIN)}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "trainer", "image": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": set_up(tmpl, "rdma")}}


def a3u() -> dict:
    return make_pool("a3u", "a3-ultragpu-8g", 2).spec(zones=["us-central1-b"]).obj()


def scenario(**network_config: object) -> dict:
    s = make_scenario("2h").obj()
    if network_config:
        s["spec"]["cluster"] = {"networkConfig": dict(network_config)}
    return s


def diags(*objs: dict) -> list:
    return validate([Manifest(o, "t.yaml", 1) for o in objs])


def h4d_rdma_objects() -> list[dict]:
    """GKE's H4D guide (run-hpc-workloads): one RDMA GKENetworkParamSet and its Device Network, and a pod whose
    second interface is on it."""
    params = {"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "rdma-0"},
              "spec": {"vpc": "h4d-rdma-net", "vpcSubnet": "h4d-rdma-sub-0", "deviceMode": "RDMA"}}
    net = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "rdma-0"},
           "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                        "name": "rdma-0"}}}
    ifaces = [{"interfaceName": "eth0", "network": "default"}, {"interfaceName": "eth1", "network": "rdma-0"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mpi-0", "namespace": "default", "annotations": {
        "networking.gke.io/default-interface": "eth0", "networking.gke.io/interfaces": json.dumps(ifaces),
        "kubetwin.io/duration": "30m"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "mpi", "image": "hpc",
                                                            "resources": {"requests": {"cpu": "180"}}}]}}
    return [params, net, pod]


def test_default_cluster_has_multi_networking_and_the_rdma_guide_validates() -> None:
    objs = [scenario(), a3u(), *cluster_objects("rdma"), gpu_job()]
    assert [d for d in diags(*objs) if d.severity in ("error", "warning")] == []
    assert multinetwork.enabled([Manifest(scenario(), "t.yaml", 1)])


def test_h4d_cloud_rdma_objects_validate_and_run_on_a_multi_network_cluster() -> None:
    objs = [scenario(), h4d_pool(nodes=1), *h4d_rdma_objects()]
    assert [d for d in diags(*objs) if d.severity in ("error", "warning")] == []
    result = run(objects=objs)
    pods = [o for _, _, _, o in result.history if o["kind"] == "Pod"]
    assert pods[-1]["status"]["phase"] == "Succeeded"


def test_multi_networking_on_a_legacy_datapath_is_refused_at_its_line() -> None:
    text = """apiVersion: kubetwin.io/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  duration: 1h
  cluster:
    networkConfig:
      datapathProvider: LEGACY_DATAPATH
      enableMultiNetworking: true
"""
    errs = [d for d in validate(load_text(text, "s.yaml")) if d.severity == "error"]
    assert len(errs) == 1, errs
    d = errs[0]
    assert (d.file, d.line, d.field) == ("s.yaml", 9, "spec.cluster.networkConfig.enableMultiNetworking")
    assert "Multi-network support for Pods requires GKE Dataplane V2" in d.message
    assert "--enable-dataplane-v2" in d.hint


@pytest.mark.parametrize("cfg", [{"enableMultiNetworking": False},
                                 {"datapathProvider": "LEGACY_DATAPATH", "enableMultiNetworking": False},
                                 {"datapathProvider": "ADVANCED_DATAPATH", "enableMultiNetworking": False}])
def test_without_multi_networking_network_kinds_are_refused_and_pods_warned(cfg: dict) -> None:
    objs = [scenario(**cfg), a3u(), *cluster_objects("rdma"), gpu_job()]
    found = diags(*objs)
    errs = [d for d in found if d.severity == "error"]
    assert sorted({d.obj.split("/")[0] for d in errs}) == ["GKENetworkParamSet", "Network"]
    assert len(errs) == 16  # 8 GKENetworkParamSets + 8 Networks of the RDMA guide
    assert all(d.message.startswith('no matches for kind "') and 'in version "networking.gke.io/v1"' in d.message
               and d.field == "kind" and "ensure CRDs are installed first" in d.hint for d in errs)
    warns = [d for d in found if d.severity == "warning"]
    assert [d.field for d in warns] == ['spec.template.metadata.annotations["networking.gke.io/interfaces"]']
    assert "only the pod's default interface" in warns[0].message
    assert "enableMultiNetworking: true" in warns[0].hint


def test_h4d_rdma_pod_on_a_cluster_without_multi_networking() -> None:
    objs = [scenario(enableMultiNetworking=False), h4d_pool(nodes=1), *h4d_rdma_objects()]
    found = diags(*objs)
    assert sorted(d.obj.split("/")[0] for d in found if d.severity == "error") == ["GKENetworkParamSet", "Network"]
    assert [d.obj for d in found if d.severity == "warning"] == ["Pod/default/mpi-0"]


def test_a_pod_without_interfaces_needs_no_multi_networking() -> None:
    pod = h4d_rdma_objects()[2]
    del pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
    found = diags(scenario(enableMultiNetworking=False), h4d_pool(nodes=1), pod)
    assert [d for d in found if d.severity in ("error", "warning")] == []


def test_datapath_provider_is_an_enum() -> None:
    errs = [d for d in diags(scenario(datapathProvider="CALICO")) if d.severity == "error"]
    assert [d.field for d in errs] == ["spec.cluster.networkConfig.datapathProvider"]
