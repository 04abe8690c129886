"""NodePool zones: `kubetwin validate` rejects a zone that does not exist, or that does not offer the pool's
machine type (GPU families: Compute Engine's per-zone machine types; TPUs: the TPU regions and zones page), with
file:line, the field path and the valid zones as the fix; every example and built-in scenario still validates."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubetwin.api.loader import load_paths, load_text
from kubetwin.cli.main import app
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]


def _pool(machine: str, zones: str, extra: str = "") -> str:
    return f"""apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata:
  name: p
spec:
  machineType: {machine}
  nodeCount: 1
  zones: {zones}
{extra}"""


def _errors(text: str):
    return [d for d in validate(load_text(text, "pools.yaml")) if d.severity == "error"]


def test_zone_that_does_not_exist_is_rejected_with_the_valid_zones() -> None:
    errs = _errors(_pool("g2-standard-8", "[us-central1-a, us-central1-z]"))
    assert len(errs) == 1
    e = errs[0]
    assert (e.file, e.line, e.field) == ("pools.yaml", 8, "spec.zones[1]")
    assert 'Invalid value: "us-central1-z": zone does not exist' in e.message
    assert "us-central1-a, us-central1-b, us-central1-c" in e.hint and "us-central1-f" not in e.hint


def test_zone_of_a_region_without_the_machine_hints_the_zones_that_offer_it() -> None:
    """No zone of the region offers the GPU machine: the fix lists the zones that do, not every zone offered."""
    [e] = _errors(_pool("g2-standard-8", "[mars-north1-a]"))
    assert 'Invalid value: "mars-north1-a": zone does not exist' in e.message
    assert e.hint.startswith("use a zone that offers g2-standard-8: ") and "mars-north1" not in e.hint


def test_zone_that_does_not_offer_the_gpu_machine_type() -> None:
    errs = _errors(_pool("a3-ultragpu-8g", "[us-central1-a]", "  accelerators: [{type: nvidia-h200-141gb, count: 8}]"))
    assert len(errs) == 1
    e = errs[0]
    assert e.field == "spec.zones[0]"
    assert 'zone us-central1-a does not offer machine type a3-ultragpu-8g' in e.message
    assert e.hint.startswith("use a zone that offers a3-ultragpu-8g: ") and "us-central1-b" in e.hint


def test_tpu_zone_from_the_tpu_regions_page() -> None:
    ok = _pool("ct5lp-hightpu-4t", "[us-west4-a]")
    assert not _errors(ok)
    errs = _errors(_pool("ct6e-standard-4t", "[us-central1-a]"))
    assert len(errs) == 1 and "does not offer machine type ct6e-standard-4t" in errs[0].message
    assert "us-central1-b" in errs[0].hint


def test_default_zone_is_named_when_zones_is_omitted() -> None:
    """A pool without zones lands in the twin's default us-central1-a; a machine type that zone lacks is an error
    on spec.zones that says so."""
    text = _pool("a4-highgpu-8g", "[]").replace("  zones: []\n", "")
    errs = _errors(text)
    assert len(errs) == 1 and errs[0].field == "spec.zones"
    assert "defaults to [us-central1-a]" in errs[0].message and "us-central1-b" in errs[0].hint


def test_cpu_machine_in_an_existing_zone_is_fine() -> None:
    assert not _errors(_pool("e2-standard-8", "[europe-west1-b]"))
    assert _errors(_pool("e2-standard-8", "[europe-west1-a]"))  # europe-west1 has b, c, d


def test_cli_validate_prints_file_line_field_and_fix(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(_pool("a2-ultragpu-1g", "[us-west1-b]", "  accelerators: [{type: nvidia-a100-80gb, count: 1}]"))
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 1
    assert f"{f}:8: error: NodePool/p: spec.zones[0]:" in res.output and "fix: use a zone that offers" in res.output


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_pool_is_in_a_zone_that_offers_it(path: Path) -> None:
    """(seed-as-written.yaml is wrong on purpose elsewhere; the mooncake example needs ../shared's trace.)"""
    errs = [d.render() for d in validate(load_paths([str(path)]))
            if d.severity == "error" and d.field.startswith("spec.zones")]
    assert not errs, errs


@pytest.mark.parametrize("name", ["demo", "gpu-sharing", "dra"])
def test_builtin_scenarios_still_validate(name: str) -> None:
    with resources.as_file(resources.files("kubetwin").joinpath("scenarios", name)) as path:
        errs = [d.render() for d in validate(load_paths([str(path)])) if d.severity == "error"]
    assert not errs, errs


def test_zone_table_is_consistent_with_the_catalog() -> None:
    """Every accelerator machine type has a zone list with a source, and every listed zone exists."""
    from kubetwin import catalog

    accelerated = [m for m in catalog.machine_types() if m.gpu] + catalog.tpu_machine_types()
    for mt in accelerated:
        found = catalog.zones_offering(mt.name)
        assert found is not None, mt.name
        zones, source = found
        assert source and zones and all(catalog.zone_exists(z) for z in zones), (mt.name, zones)
    assert catalog.zones_offering("e2-standard-8") is None  # CPU series: existence only
