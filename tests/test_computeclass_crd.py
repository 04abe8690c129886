"""GKE's ComputeClass is checked against the real CRD (GoogleCloudPlatform/compute-class-api
cloud.google.com_computeclasses.yaml, shipped in kubetwin/api/crds/ with its licence).

Ported cases: compute-class-api api/cloud.google.com/v1/types_test.go (8067eaeb), each named by its test function
and case name. Upstream evaluates one CEL rule alone over a spec or priority; here the whole object goes through
the API server's checks, so a case asserts whether *that rule's message* is among the errors (other rules may fire
on the same minimal input, e.g. `affinity: Specific` without `specific[]`).
"""

from __future__ import annotations

import pytest

from kubetwin.api import crd
from kubetwin.api.loader import load_text
from kubetwin.validation.validate import validate

GPU_TOPOLOGY = ("GPU Topology is supported only for A4X machine family or nvidia-gb200 GPU type together with "
                "placement (workload) policy")
SPEC_MIN_CAPACITY = ("Spec-level MinimumCapacity requires all priorities to have machine specifications (machineType, "
                     "gpu, tpu, or specific reservation)")
PRIORITY_MIN_CAPACITY = "Priority-level MinimumCapacity requires a machineType, gpu, tpu, or specific reservation"
NODEPOOLS = "Nodepool field cannot be set along with other nodepool configuration fields"
ANP = ("acceleratorNetworkProfile must be a valid resource ID up to 63 characters (lowercase letters, numbers, "
       "hyphens)")


def _cc(spec: dict) -> dict:
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "cc"}, "spec": spec}


def _messages(spec: dict) -> list[str]:
    return [e.message for e in crd.check(_cc(spec))]


def _fires(message: str, spec: dict) -> bool:
    return any(message in m for m in _messages(spec))


# types_test.go TestGpuTopologyValidationRule
GPU_TOPOLOGY_CASES = [
    ("valid:_no_gpu_topology", [{"machineFamily": "c3"}], True),
    ("valid:_gpu_topology_with_a4x_with_placement",
     [{"machineFamily": "a4x", "gpu": {"topology": "1x72"}, "placement": {"policyName": "workloadPolicy"}}], True),
    ("invalid:_gpu_topology_with_a4x_without_placement",
     [{"machineFamily": "a4x", "gpu": {"topology": "1x72"}}], False),
    ("valid:_gpu_topology_with_nvidia-gb200_with_placement",
     [{"gpu": {"type": "nvidia-gb200", "topology": "1x72"}, "placement": {"policyName": "workloadPolicy"}}], True),
    ("invalid:_gpu_topology_with_nvidia-gb200_without_policy",
     [{"gpu": {"type": "nvidia-gb200", "topology": "1x72"}}], False),
    ("valid:_nvidia-gb200_with_policy_without_topology",
     [{"machineFamily": "a4x", "gpu": {"type": "nvidia-gb200"}, "placement": {"policyName": "workloadPolicy"}}],
     True),
    ("invalid:_gpu_topology_with_c3", [{"machineFamily": "c3", "gpu": {"topology": "1x72"}}], False),
    ("invalid:_gpu_topology_with_other_gpu_type", [{"gpu": {"type": "nvidia-h100-80gb", "topology": "1x72"}}],
     False),
    ("valid:_gpu_without_topology", [{"machineFamily": "c3", "gpu": {"type": "nvidia-h100-80gb"}}], True),
]


@pytest.mark.parametrize(("name", "priorities", "valid"), GPU_TOPOLOGY_CASES, ids=[c[0] for c in GPU_TOPOLOGY_CASES])
def test_gpu_topology_rule(name: str, priorities: list, valid: bool) -> None:
    assert _fires(GPU_TOPOLOGY, {"priorities": priorities}) is not valid


# types_test.go TestMinimumCapacityValidationRule, the "Spec/" cases
SPEC_MIN_CASES = [
    ("valid:_no_spec_level_min_capacity", None, [{"machineFamily": "n1"}], True),
    ("valid:_spec_level_min_capacity_with_machineType", 1, [{"machineType": "n1-standard-1"}], True),
    ("valid:_spec_level_min_capacity_with_gpu", 1, [{"gpu": {"type": "nvidia-tesla-t4"}}], True),
    ("valid:_spec_level_min_capacity_with_tpu", 1, [{"tpu": {"type": "v3-8"}}], True),
    ("valid:_spec_level_min_capacity_with_specific_reservation", 1, [{"reservations": {"affinity": "Specific"}}],
     True),
    ("invalid:_spec_level_min_capacity_with_missing_machine_spec", 1, [{"machineFamily": "n1"}], False),
    ("invalid:_spec_level_min_capacity_with_none_reservation", 1, [{"reservations": {"affinity": "None"}}], False),
]


@pytest.mark.parametrize(("name", "target", "priorities", "valid"), SPEC_MIN_CASES, ids=[c[0] for c in SPEC_MIN_CASES])
def test_spec_minimum_capacity_rule(name: str, target: int | None, priorities: list, valid: bool) -> None:
    spec: dict = {"priorities": priorities}
    if target is not None:
        spec["minimumCapacity"] = {"targetNodeCount": target}
    assert _fires(SPEC_MIN_CAPACITY, spec) is not valid


# types_test.go TestMinimumCapacityValidationRule, the "Priority/" cases
PRIORITY_MIN_CASES = [
    ("valid:_no_priority_level_min_capacity", {"machineFamily": "n1"}, True),
    ("valid:_priority_level_min_capacity_with_machineType",
     {"minimumCapacity": {"targetNodeCount": 1}, "machineType": "n1-standard-1"}, True),
    ("valid:_priority_level_min_capacity_with_gpu",
     {"minimumCapacity": {"targetNodeCount": 1}, "gpu": {"type": "nvidia-tesla-t4"}}, True),
    ("valid:_priority_level_min_capacity_with_tpu",
     {"minimumCapacity": {"targetNodeCount": 1}, "tpu": {"type": "v3-8"}}, True),
    ("valid:_priority_level_min_capacity_with_specific_reservation",
     {"minimumCapacity": {"targetNodeCount": 1}, "reservations": {"affinity": "Specific"}}, True),
    ("invalid:_priority_level_min_capacity_with_missing_machine_spec",
     {"minimumCapacity": {"targetNodeCount": 1}, "machineFamily": "n1"}, False),
]


@pytest.mark.parametrize(("name", "priority", "valid"), PRIORITY_MIN_CASES, ids=[c[0] for c in PRIORITY_MIN_CASES])
def test_priority_minimum_capacity_rule(name: str, priority: dict, valid: bool) -> None:
    assert _fires(PRIORITY_MIN_CAPACITY, {"priorities": [priority]}) is not valid


# types_test.go TestNodepoolValidationRule (upstream writes allocationStrategy as a map, which only its lone CEL rule
# accepts; the CRD types it as a string enum, so the ports use "lowest-cost")
NODEPOOL_CASES = [
    ("valid:_no_nodepools", {"machineFamily": "n1"}, True),
    ("valid:_only_nodepools", {"nodepools": ["pool1", "pool2"]}, True),
    ("valid:_nodepools_and_allocationStrategy", {"nodepools": ["pool1"], "allocationStrategy": "lowest-cost"},
     True),
    ("valid:_nodepools_and_priorityScore", {"nodepools": ["pool1"], "priorityScore": 100}, True),
    ("valid:_nodepools_allocationStrategy_and_priorityScore",
     {"nodepools": ["pool1"], "allocationStrategy": "lowest-cost", "priorityScore": 100}, True),
    ("invalid:_nodepools_and_machineFamily", {"nodepools": ["pool1"], "machineFamily": "n1"}, False),
    ("invalid:_nodepools_allocationStrategy_and_machineType",
     {"nodepools": ["pool1"], "allocationStrategy": "lowest-cost", "machineType": "n1-standard-1"}, False),
    ("invalid:_nodepools_and_gpu", {"nodepools": ["pool1"], "gpu": {"type": "nvidia-tesla-t4"}}, False),
]


@pytest.mark.parametrize(("name", "priority", "valid"), NODEPOOL_CASES, ids=[c[0] for c in NODEPOOL_CASES])
def test_nodepools_rule(name: str, priority: dict, valid: bool) -> None:
    assert _fires(NODEPOOLS, {"priorities": [priority]}) is not valid


# types_test.go TestAcceleratorNetworkProfileValidationRule (the field's own rule plus its MaxLength=63)
ANP_CASES = [
    ("valid:_auto", "auto", True),
    ("valid:_auto_prefix", "auto-my-profile", True),
    ("valid:_standalone_profile_name", "my-custom-profile", True),
    ("valid:_single_letter", "a", True),
    ("valid:_max_length_63", "a" * 63, True),
    ("invalid:_uppercase", "Auto", False),
    ("invalid:_starts_with_number", "1profile", False),
    ("invalid:_starts_with_hyphen", "-profile", False),
    ("invalid:_ends_with_hyphen", "profile-", False),
    ("invalid:_too_long_64_chars", "a" * 64, False),
    ("invalid:_empty_string", "", False),
    ("invalid:_auto_prefix_trailing_hyphen", "auto-", False),
    ("invalid:_auto_prefix_special_chars", "auto-my_profile", False),
    ("invalid:_auto_prefix_uppercase", "auto-MyProfile", False),
]


@pytest.mark.parametrize(("name", "value", "valid"), ANP_CASES, ids=[c[0] for c in ANP_CASES])
def test_accelerator_network_profile_rule(name: str, value: str, valid: bool) -> None:
    msgs = _messages({"priorities": [{"machineType": "a4-highgpu-8g", "acceleratorNetworkProfile": value}]})
    # a 64-character value is stopped by the schema's maxLength first (the API server then skips the CEL rules)
    assert (not msgs) is valid


def test_whole_object_defaults_and_enum() -> None:
    """The CRD's defaults (whenUnsatisfiable DoNotScaleUp, nodePoolAutoCreation.enabled false, priorities [],
    gpu.driverVersion default) are what the API server stores; an unknown enum value is refused in its words."""
    out = crd.apply_defaults(_cc({"priorities": [{"gpu": {"type": "nvidia-l4", "count": 1}}]}))
    assert out["spec"]["whenUnsatisfiable"] == "DoNotScaleUp"
    assert out["spec"]["nodePoolAutoCreation"] == {"enabled": False}
    assert out["spec"]["priorities"][0]["gpu"]["driverVersion"] == "default"
    assert _messages({"whenUnsatisfiable": "Maybe"}) == [
        'Unsupported value: "Maybe": supported values: "ScaleUpAnyway", "DoNotScaleUp"', crd.INCOMPLETE]
    assert _messages({"priorities": [{"machineFamily": "n4", "machineType": "n4-standard-8"}]}) == [
        "Invalid value: \"object\": MachineFamily and MachineType cannot be set together"]
    assert _messages({"priorities": [{"spot": True, "flexStart": {"enabled": True}}]}) == [
        "Invalid value: \"object\": Flex Start provisioning model is incompatible with Spot"]
    assert _messages({"priorities": [{"reservations": {"affinity": "AnyBestEffort", "specific": [{"name": "r"}]}}]}
                     ) == ["Invalid value: \"object\": Unable to set specific reservations for non specific affinity"]


def test_validate_gives_file_line_path_and_fix() -> None:
    """`kubetwin validate` refuses what the CRD refuses, at the field's line, with the field path and a fix."""
    text = ("apiVersion: cloud.google.com/v1\nkind: ComputeClass\nmetadata: {name: cc}\nspec:\n  priorities:\n"
            "  - machineFamily: g2\n    spot: true\n  whenUnsatisfiable: ScaleUp\n")
    diags = [d for d in validate(load_text(text, "cc.yaml")) if d.severity == "error"]
    assert len(diags) == 1
    d = diags[0]
    assert (d.file, d.line) == ("cc.yaml", 8)
    assert d.field == "spec.whenUnsatisfiable" and "ScaleUpAnyway" in d.hint
