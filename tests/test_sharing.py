"""Time-slicing and MPS: the device plugin's config, GKE's gpuSharingConfig, and the one-shared-GPU rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.api.loader import load_text
from kubetwin.devices.sharing import parse_plugin_config
from kubetwin.runner import run
from kubetwin.validation.validate import validate


def _config(**timeslicing: object) -> dict:
    return {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 10}],
                                                         **timeslicing}}}


def test_time_slicing_multiplies_allocatable() -> None:
    cfg, problems = parse_plugin_config(_config())
    assert problems == []
    assert cfg.advertised({"nvidia.com/gpu": 8, "cpu": 8000}) == {"nvidia.com/gpu": 80, "cpu": 8000}
    cfg, _ = parse_plugin_config(_config(renameByDefault=True))
    assert cfg.advertised({"nvidia.com/gpu": 8}) == {"nvidia.com/gpu.shared": 80}
    assert not cfg.fail_requests_greater_than_one


def test_mps_fails_requests_above_one_by_default() -> None:
    cfg, problems = parse_plugin_config({"version": "v1", "sharing": {"mps": {"resources": [
        {"name": "nvidia.com/gpu", "replicas": 4}]}}})
    assert problems == [] and cfg.strategy == "mps" and cfg.fail_requests_greater_than_one


@pytest.mark.parametrize("doc, field, message", [
    ({**_config(), "version": "v2"}, "version", "unknown version: 'v2'"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}}, "sharing.timeSlicing.resources",
     "no resources are configured"),
    (_config(resources=[{"name": "nvidia.com/gpu", "replicas": 1}]), "sharing.timeSlicing.resources[0].replicas",
     "number of replicas must be >= 2"),
    (_config(resources=[{"name": "amd.com/gpu", "replicas": 2}]), "sharing.timeSlicing.resources[0].name",
     "unsupported resource name 'amd.com/gpu'"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
                                   "mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
     "sharing", "timeSlicing and mps are mutually exclusive"),
])
def test_bad_plugin_configs(doc: dict, field: str, message: str) -> None:
    _, problems = parse_plugin_config(doc)
    assert any(p.field == field and message in p.message for p in problems), problems


def test_corrected_seed_configmap_shares_each_gpu_four_ways(shared: Path) -> None:
    docs = list(yaml.safe_load_all((shared / "reference" / "seed-manifests-corrected.yaml").read_text()))
    cm = next(d for d in docs if d and d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "time-slicing-config")
    cfg, problems = parse_plugin_config(yaml.safe_load(cm["data"]["any"]))
    assert problems == []
    assert cfg.advertised({"nvidia.com/gpu": 8}) == {"nvidia.com/gpu": 32}


def _shared_pool(machine: str, gpus: int, strategy: str = "TIME_SHARING", clients: int = 4) -> dict:
    pool = make_pool("shared", machine, 1).spec(driverInstallDelay="0s").gpus("nvidia-l4", gpus).obj()
    pool["spec"]["accelerators"][0]["gpuSharingConfig"] = {"gpuSharingStrategy": strategy,
                                                           "maxSharedClientsPerGpu": clients}
    return pool


def test_gke_time_sharing_node_labels_and_allocatable() -> None:
    pods = [make_pod(f"p{i}").gpus(1).obj() for i in range(5)]
    result = run(objects=[make_scenario("30m").obj(), _shared_pool("g2-standard-8", 1), *pods])
    node = [o for _, _, _, o in result.history if o["kind"] == "Node"][-1]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    labels = node["metadata"]["labels"]
    assert labels["cloud.google.com/gke-gpu-sharing-strategy"] == "time-sharing"
    assert labels["cloud.google.com/gke-max-shared-clients-per-gpu"] == "4"
    assert result.summary["pods"]["by_phase"] == {"Pending": 1, "Running": 4}


def test_more_than_one_shared_gpu_fails_admission_on_the_node() -> None:
    result = run(objects=[make_scenario("30m").obj(), _shared_pool("g2-standard-24", 2),
                          make_pod("greedy").gpus(2).obj()])
    pod = [o for _, _, _, o in result.history if o["kind"] == "Pod"][-1]
    assert pod["spec"]["nodeName"]  # the scheduler sees 8 shared GPUs and binds it
    assert pod["status"]["phase"] == "Failed" and pod["status"]["reason"] == "UnexpectedAdmissionError"
    assert pod["status"]["message"] == (
        "Pod Allocate failed due to rpc error: code = Unknown desc = [invalid request for sharing GPU "
        "(time-sharing), at most 1 nvidia.com/gpu can be requested on GPU nodes], which is unexpected")


def test_gke_sharing_config_validated() -> None:
    text = yaml.safe_dump(_shared_pool("g2-standard-8", 1, "MPS", 64), sort_keys=False)
    msgs = [d.render() for d in validate(load_text(text, "pool.yaml"))]
    assert any("spec.accelerators[0].gpuSharingConfig.maxSharedClientsPerGpu: Invalid value: 64: MPS supports at "
               "most 48 clients per GPU" in m for m in msgs), msgs
    text = yaml.safe_dump(_shared_pool("g2-standard-8", 1, "SPACE_SHARING", 2), sort_keys=False)
    msgs = [d.render() for d in validate(load_text(text, "pool.yaml"))]
    assert any("gpuSharingConfig.gpuSharingStrategy: Unsupported value: 'SPACE_SHARING'" in m for m in msgs), msgs
