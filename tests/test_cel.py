"""CEL as the DRA allocator runs it: the CEL vectors C1-C12 of ../shared/conformance/dra/dra_vectors.md on the
example H100 device, and the Kubernetes CEL library functions."""

from __future__ import annotations

import pytest

from kubetwin.cel import CelError, DeviceView, compile_selector
from kubetwin.devices.dra import convert, nvidia

H100 = DeviceView.of("gpu.nvidia.com", nvidia.devices("n", "nvidia-h100-80gb", 1)[0])
G = 'device.attributes["gpu.nvidia.com"]'
CAP = 'device.capacity["gpu.nvidia.com"]'


@pytest.mark.parametrize("expr, expected", [
    ('device.driver == "gpu.nvidia.com"', True),  # C1
    (f'{CAP}.memory.compareTo(quantity("40Gi")) >= 0', True),  # C2
    (f'{CAP}.memory.isGreaterThan(quantity("80Gi"))', False),  # C3: 81559Mi < 80Gi
    (f'{G}.cudaComputeCapability.compareTo(semver("9.0.0")) >= 0', True),  # C9
    (f'{G}.?productName.orValue("") == "NVIDIA H100 80GB HBM3"', True),  # C10
    (f'cel.bind(g, {G}, g.type == "gpu" && g.architecture == "Hopper")', True),  # C11
    (f'{G}.productName.lowerAscii().matches("^.*a100.*$")', False),  # C12
    (f'{G}.?index.orValue(-1) == -1', True),
    (f'{CAP}.memory == quantity("81559Mi") && {CAP}.memory == quantity("85520809984")', True),
])
def test_selector_values(expr: str, expected: bool) -> None:
    assert compile_selector(expr).matches(H100) is expected


@pytest.mark.parametrize("expr, error", [
    ('device.driver == "gpu.nvidia.com" && device.attributes["memory"].quantity >= "40Gi"',
     "no such key: quantity"),  # C4: the seed's selector compiles, then fails at allocation time
    (f'{G}.memory.compareTo(quantity("40Gi")) >= 0', "no such key: memory"),  # C5: memory is a capacity
    (f'{G}.index == 0', "no such key: index"),  # C8: index removed from the driver in Sep 2025
    ('device.attributes["x.example.com"].foo == 1', "no such key: foo"),  # unknown domain: an empty map
    ('quantity("12 apples").sign() == 1', "quantities must match the regular expression"),
])
def test_runtime_errors(expr: str, error: str) -> None:
    with pytest.raises(CelError) as exc:
        compile_selector(expr).matches(H100)
    assert exc.value.kind == "runtime" and error in exc.value.message


@pytest.mark.parametrize("expr, error", [
    (f'{CAP}.memory >= quantity("40Gi")', "<input>:1:42: found no matching overload for '_>=_' applied to "
                                          "'(kubernetes.Quantity, kubernetes.Quantity)'"),  # C6
    (f'{CAP}.memory >= "40Gi"', "found no matching overload for '_>=_' applied to '(kubernetes.Quantity, "
                                "string)'"),  # C7
    ("noSuchVar", "<input>:1:1: undeclared reference to 'noSuchVar' (in container '')"),  # D10
    ("device.foo == 1", "undeclared reference to 'device.foo'"),
    ('device.driver + "x"', "must evaluate to bool or the unknown type, not string"),
    ("device.driver ==", "Syntax error"),
])
def test_compile_errors(expr: str, error: str) -> None:
    with pytest.raises(CelError) as exc:
        compile_selector(expr)
    assert exc.value.kind == "compile" and error in exc.value.message
    if "<input>" in error:
        assert exc.value.message.startswith("compilation failed: ERROR: <input>:")
        assert "\n | " in exc.value.message  # cel-go's source line and caret


def test_compile_once() -> None:
    assert compile_selector('device.driver == "a"') is compile_selector('device.driver == "a"')


@pytest.mark.parametrize("expr, expected", [
    ('quantity("1") == quantity("1000m")', True),
    ('quantity("1.5").add(quantity("500m")) == quantity("2")', True),
    ('quantity("5").sub(2).asInteger() == 3', True),
    ('quantity("1Gi").asApproximateFloat() == 1073741824.0', True),
    ('quantity("500m").isInteger()', False),
    ('quantity("-3").sign() == -1', True),
    ('isQuantity("40Gi") && !isQuantity("forty")', True),
    ('quantity("40Gi").isLessThan(quantity("41Gi"))', True),
    ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
    ('semver("1.10.0").isGreaterThan(semver("1.9.0"))', True),
    ('semver("v1.2", true) == semver("1.2.0")', True),
    ('semver("2.3.4").major() == 2 && semver("2.3.4").minor() == 3 && semver("2.3.4").patch() == 4', True),
    ('isSemver("1.2.3") && !isSemver("1.2")', True),
    ('[1, 2, 3].isSorted() && ![3, 1].isSorted()', True),
    ('[3, 1, 2].max() == 3 && ["b", "a"].min() == "a" && [1, 2].sum() == 3', True),
    ('"a,b".split(",").size() == 2 && "  x ".trim() == "x" && "ABC".lowerAscii() == "abc"', True),
])
def test_kubernetes_library(expr: str, expected: bool) -> None:
    assert compile_selector(expr).matches(H100) is expected


def test_v1beta1_slice_and_claim_convert_to_v1() -> None:
    sl = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "s"},
          "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "p", "resourceSliceCount": 1},
                   "devices": [{"name": "dev", "basic": {"attributes": {"a": {"int": 1}}}}]}}
    out = convert.to_v1(sl)
    assert out["apiVersion"] == "resource.k8s.io/v1"
    assert out["spec"]["devices"] == [{"name": "dev", "attributes": {"a": {"int": 1}}}]
    assert sl["spec"]["devices"][0]["basic"]  # the input is not mutated
    rc = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim", "metadata": {"name": "c"},
          "spec": {"devices": {"requests": [{"name": "r", "deviceClassName": "k", "allocationMode": "All"},
                                            {"name": "s", "firstAvailable": [{"name": "x", "deviceClassName": "k"}]}]}}}
    reqs = convert.to_v1(rc)["spec"]["devices"]["requests"]
    assert reqs == [{"name": "r", "exactly": {"deviceClassName": "k", "allocationMode": "All"}},
                    {"name": "s", "firstAvailable": [{"name": "x", "deviceClassName": "k",
                                                      "allocationMode": "ExactCount", "count": 1}]}]
    v1beta2 = {**rc, "apiVersion": "resource.k8s.io/v1beta2",
               "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "k"}}]}}}
    assert convert.to_v1(v1beta2)["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "k", "allocationMode": "ExactCount", "count": 1}
