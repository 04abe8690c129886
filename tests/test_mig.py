"""MIG profiles and layouts per GPU model, the device plugin's MIG strategies, and GKE's gpuPartitionSize."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.api.loader import load_text
from kubetwin.devices import mig
from kubetwin.runner import run
from kubetwin.validation.validate import validate

# NVIDIA's MIG user guide: instances of each profile that fit on one GPU
PER_GPU = {"1g": 7, "1g.2x": 4, "2g": 3, "3g": 2, "4g": 1, "7g": 1}
TABLES = {
    "A100-SXM4-40GB": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "A100-SXM4-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H100-SXM5-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H200-SXM5-141GB": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    "B200": ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
}


@pytest.mark.parametrize("model", list(TABLES))
def test_profile_table_and_homogeneous_partitions(model: str) -> None:
    table = mig.profiles(model)
    assert list(table) == TABLES[model]
    for name, p in table.items():
        if p.kind != "1g+me":
            assert mig.partition_count(model, name) == PER_GPU[p.kind], name
    assert [p.start for p in mig.layout(model, [TABLES[model][-1]])] == [0]  # the 7g instance is the whole GPU


def test_partition_counts_match_mig_parted_all_profile_configs(shared: Path) -> None:
    configs = yaml.safe_load((shared / "reference" / "mig" / "mig-parted-config-default.yaml").read_text())
    checked = 0
    for model in TABLES:
        for name, p in mig.profiles(model).items():
            entry = configs["mig-configs"].get(f"all-{name}")
            if p.kind == "1g+me" or not entry or any("device-filter" in e for e in entry):
                continue
            assert entry[0]["mig-devices"] == {name: mig.partition_count(model, name)}, name
            checked += 1
    assert checked >= 20


def test_seed_layout_places_like_nvidia_smi() -> None:
    # the seed: nvidia-smi mig -cgi 2g.20gb,2g.20gb,3g.40gb -C
    placed = mig.layout("H100-SXM5-80GB", ["2g.20gb", "2g.20gb", "3g.40gb"])
    assert [(p.profile.name, p.start) for p in placed] == [("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)]
    # 3g at 0 would leave only slice 6 for two 1g instances (no 1g starts at 7): the search moves 3g to 4
    placed = mig.layout("A100-SXM4-40GB", ["1g.5gb", "3g.20gb", "2g.10gb", "1g.5gb"])
    assert [(p.profile.name, p.start) for p in placed] == [("2g.10gb", 0), ("1g.5gb", 2), ("1g.5gb", 3),
                                                           ("3g.20gb", 4)]


@pytest.mark.parametrize("names, reason", [
    (["4g.40gb", "4g.40gb"], "fits at most 1 x 4g.40gb, 2 requested"),
    (["7g.80gb", "1g.10gb"], "needs 8 compute and 9 memory slices; a GPU has 7 and 8"),
    (["3g.40gb", "3g.40gb", "1g.10gb"], "needs 7 compute and 9 memory slices"),
    (["1g.10gb+me", "1g.10gb+me"], "fits at most 1 x 1g.10gb+me"),
    (["1g.5gb"], "H100-SXM5-80GB has no MIG profile '1g.5gb'; its profiles are 1g.10gb, 1g.10gb+me"),
])
def test_impossible_partitions_are_rejected_with_the_reason(names: list[str], reason: str) -> None:
    with pytest.raises(mig.MigError) as exc:
        mig.layout("H100-SXM5-80GB", names)
    assert reason in str(exc.value)


def test_device_plugin_mig_strategies() -> None:
    seed = [["2g.20gb", "2g.20gb", "3g.40gb"]]
    # mixed: the MIG GPU leaves nvidia.com/gpu; each profile is its own resource
    assert mig.advertised("mixed", "H100-SXM5-80GB", 1, seed) == {"nvidia.com/mig-2g.20gb": 2,
                                                                   "nvidia.com/mig-3g.40gb": 1}
    assert mig.advertised("mixed", "H100-SXM5-80GB", 2, seed) == {"nvidia.com/gpu": 1, "nvidia.com/mig-2g.20gb": 2,
                                                                   "nvidia.com/mig-3g.40gb": 1}
    # single: one profile everywhere, exposed as nvidia.com/gpu; the seed's mix is an error
    assert mig.advertised("single", "A100-SXM4-40GB", 2, [["1g.5gb"] * 7] * 2) == {"nvidia.com/gpu": 14}
    with pytest.raises(mig.MigError, match="more than one MIG device type present on node"):
        mig.advertised("single", "H100-SXM5-80GB", 1, seed)
    assert mig.advertised("none", "H100-SXM5-80GB", 8, seed) == {"nvidia.com/gpu": 8}


def _pool_yaml(accelerator_type: str, machine: str, size: str) -> str:
    return f"""apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata:
  name: mig
spec:
  machineType: {machine}
  nodeCount: 1
  accelerators:
  - type: {accelerator_type}
    count: {1 if machine.endswith('1g') else 8}
    gpuPartitionSize: {size}
"""


def test_gke_partition_size_validated_against_the_gpu() -> None:
    msgs = [d.render() for d in validate(load_text(_pool_yaml("nvidia-h100-80gb", "a3-highgpu-8g", "1g.5gb"),
                                                   "pool.yaml"))]
    assert any("pool.yaml:11" in m and "spec.accelerators[0].gpuPartitionSize: Invalid value: gpuPartitionSize "
               "'1g.5gb' is not a partition of H100-SXM5-80GB; use one of 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, "
               "4g.40gb, 7g.80gb" in m for m in msgs), msgs
    msgs = [d.render() for d in validate(load_text(_pool_yaml("nvidia-l4", "g2-standard-8", "1g.5gb"), "l4.yaml"))]
    assert any("nvidia-l4 does not support multi-instance GPUs" in m for m in msgs), msgs
    assert not validate(load_text(_pool_yaml("nvidia-tesla-a100", "a2-highgpu-1g", "1g.5gb"), "ok.yaml"))


def test_partitioned_node_advertises_every_instance_as_a_gpu() -> None:
    pool = make_pool("mig", "a2-highgpu-1g", 1).spec(driverInstallDelay="0s").gpus("nvidia-tesla-a100", 1).obj()
    pool["spec"]["accelerators"][0]["gpuPartitionSize"] = "1g.5gb"
    pods = [make_pod(f"p{i}").gpus(1).obj() for i in range(8)]
    result = run(objects=[make_scenario("30m").obj(), pool, *pods])
    node = [o for _, _, _, o in result.history if o["kind"] == "Node"][-1]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    assert node["metadata"]["labels"]["cloud.google.com/gke-gpu-partition-size"] == "1g.5gb"
    assert result.summary["pods"]["by_phase"] == {"Pending": 1, "Running": 7}
