"""validate's jsonschema-rs pre-check (validation/validate.py `schema_precheck`) against the Python validator it
lets objects skip: over the examples, the import fixtures (as dumped and as converted) and objects made invalid
on purpose, the two agree on valid/invalid for every built-in object. The pre-check may refuse what Python would
accept (that object only takes the slower path); it must never accept what Python refuses, and with it the
diagnostics are the ones the Python path alone gives."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from kubetwin.api.loader import Manifest, load_paths
from kubetwin.importer import sources
from kubetwin.validation import validate as validation

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "import"

pytestmark = pytest.mark.skipif(validation.jsonschema_rs is None, reason="jsonschema-rs is not installed")


def _python_valid(obj: dict[str, Any]) -> bool | None:
    """The Python validator's answer; None for an object no built-in strict schema covers."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    validator = validation._validator(api_version, kind)
    if validator is None:
        return None
    return next(iter(validator.iter_errors(obj)), None) is None


def _agree(objs: list[dict[str, Any]]) -> tuple[int, int]:
    """Asserts agreement on each object; (valid, invalid) counts of those with a built-in schema."""
    valid = invalid = 0
    for obj in objs:
        expected = _python_valid(obj)
        if expected is None:
            continue
        got = validation.schema_precheck(obj["apiVersion"], obj["kind"], obj)
        # the one way they may differ: a value no JSON document holds (a tuple where the schema says nothing, which
        # jsonschema takes) is left to the Python path, never accepted by the pre-check
        assert got == expected or (not got and not validation._plain_json(obj)), (
            obj.get("kind"), (obj.get("metadata") or {}).get("name"), json.dumps(obj)[:300])
        valid += expected
        invalid += not expected
    return valid, invalid


def _examples() -> list[dict[str, Any]]:
    out = []
    for f in sorted(ROOT.glob("examples/**/*.yaml")) + sorted(ROOT.glob("examples/**/*.json")):
        try:
            out += [m.obj for m in load_paths([f])]
        except Exception:  # noqa: BLE001 - a file that is not manifests (a trace's metadata): not this test's
            continue
    return out


def test_examples_and_import_fixtures_agree() -> None:
    objs = _examples()
    for f in sorted(FIXTURES.iterdir()):
        if f.suffix in (".json", ".yaml"):
            objs += [m.obj for m in load_paths([f])]  # as dumped: status, managedFields and all
            objs += [m.obj for m in sources.load([f])[0]]  # as the import converts them
    valid, invalid = _agree(objs)
    assert valid > 100  # nodes, pods, Jobs, Deployments... of the examples and the three dump formats
    assert invalid > 0  # dumps carry what a user may not write (status fields a strict schema lacks)


# values that break a field's type, range or shape; a tuple is an array to jsonschema-rs but not to jsonschema
_HOSTILE: list[Any] = [2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**80,
                       float(2**63), 1.5, 2.0, True, None, "", "80", "x" * 300, [], {}, {"unknown": 1},
                       ("a", "b"), [None], [1], ["x"], {"name": "x"}, {"key": 1}]


def _paths(obj: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if path else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*path, i))
    return out


def _set(obj: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(obj)
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return out


def test_mutated_objects_agree() -> None:
    """Every field of a pod, a node, a Job and a Deployment (as kubectl dumps or a user writes them) set to
    values that break its type, its int32/int64 range or its shape, and unknown fields added at every level."""
    items = json.loads((FIXTURES / "gke-kubectl.json").read_text())["items"]
    seeds = [next(o for o in items if o["kind"] == k) for k in ("Pod", "Node", "Job")]
    seeds += [m.obj for m in load_paths([ROOT / "examples" / "serving-llama3-epp.yaml"])
              if m.kind in ("Deployment", "Service")][:2]
    rng = random.Random(36)
    objs = []
    for seed in seeds:
        paths = [p for p in _paths(seed) if p[0] not in ("apiVersion", "kind")]
        for path in rng.sample(paths, min(len(paths), 60)):
            objs += [_set(seed, path, v) for v in rng.sample(_HOSTILE, 8)]
            parent = path[:-1]
            if parent and isinstance(_get(seed, parent), dict):
                objs.append(_set(seed, (*parent, "notAField"), 1))
    valid, invalid = _agree(objs)
    assert valid > 50 and invalid > 500


def _get(obj: Any, path: tuple) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def test_int_formats_are_ranges_in_the_fast_schemas() -> None:
    """int32/int64 limits are enforced on integers (jsonschema's format checker sees any type; a JSON Schema
    format in jsonschema-rs, strings only): each bound and one past it, as integers and whole floats."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]}}
    objs = []
    for value in (2**31 - 1, 2**31, -(2**31), -(2**31) - 1, float(2**31), float(2**31 - 1)):
        objs.append(_set(pod, ("spec", "containers", 0, "ports", 0, "containerPort"), value))
    for value in (2**63 - 1, 2**63, -(2**63), -(2**63) - 1, float(2**63), float(-(2**63)), 2**64 - 1):
        objs.append(_set(pod, ("spec", "activeDeadlineSeconds"), value))
    valid, invalid = _agree(objs)
    assert (valid, invalid) == (6, 7)


def test_diagnostics_are_the_python_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """validate with the pre-check and without it (jsonschema-rs as if not installed) gives the same diagnostics,
    file:line and field paths included, on the dumps and on refused objects."""
    manifests = [m for f in sorted(FIXTURES.iterdir()) if f.suffix in (".json", ".yaml") for m in load_paths([f])]
    pod = next(m for m in manifests if m.kind == "Pod")
    broken = [Manifest(_set(pod.obj, ("spec", "containers", 0, "ports"), [{"containerPort": 2**31}]), pod.file,
                       pod.line, pod.lines),
              Manifest(_set(pod.obj, ("spec", "priority"), ("a",)), pod.file, pod.line, pod.lines)]
    with_rs = validation.validate(manifests + broken)
    assert any("containerPort" in d.field for d in with_rs)
    monkeypatch.setattr(validation, "jsonschema_rs", None)
    validation._rs_registry.cache_clear()
    validation._rs_validator.cache_clear()
    try:
        assert not validation.schema_precheck("v1", "Pod", pod.obj)
        assert validation.validate(manifests + broken) == with_rs
    finally:
        validation._rs_registry.cache_clear()
        validation._rs_validator.cache_clear()


def test_an_int_format_left_unconverted_keeps_the_schema_on_the_python_path() -> None:
    """A property named `format` is a field, not the keyword; an int32/int64 format under a keyword the conversion
    does not walk (`additionalItems`) is found, and such a schema is not given to jsonschema-rs."""
    schema = {"type": "object", "properties": {"format": {"type": "integer", "format": "int32"}},
              "items": {"format": "int64"}}
    converted = validation._ranges_for_formats(schema)
    assert converted["properties"]["format"] == {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
    assert converted["items"] == {"minimum": -(2**63), "maximum": 2**63 - 1}
    assert not validation._int_formats_left(converted)
    older = {**schema, "additionalItems": {"format": "int64"}}
    assert validation._int_formats_left(validation._ranges_for_formats(older))
    assert schema["properties"]["format"]["format"] == "int32"  # a copy: the Python validator's schema unchanged


def test_without_jsonschema_rs_installed_the_answers_are_the_same(tmp_path: Path) -> None:
    """`import jsonschema_rs` failing (an install without the wheel): validate still runs, on the Python path
    alone, and says the same of every fixture and of refused objects, in a fresh interpreter."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n"
                   "    image: x\n    ports: [{containerPort: 3000000000}]\n    imagePullPolicy: Sometimes\n"
                   "  priority: high\n  notAField: 1\n---\napiVersion: apps/v1\nkind: Deployment\n"
                   "metadata: {name: d}\nspec: {replicas: -1, selector: {}, template: {spec: {containers: []}}}\n")
    import subprocess
    import sys

    script = ("import sys, json; sys.modules['jsonschema_rs'] = None\n"
              "from kubetwin.api.loader import load_paths\n"
              "from kubetwin.validation import validate as v\n"
              "assert v.jsonschema_rs is None and not v.schema_precheck('v1', 'Pod', {})\n"
              "print(json.dumps([d.render() for f in sys.argv[1:] for d in v.validate(load_paths([f]))]))\n")
    files = [str(f) for f in sorted(FIXTURES.iterdir()) if f.suffix in (".json", ".yaml")] + [str(bad)]
    done = subprocess.run([sys.executable, "-c", script, *files], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    here = [d.render() for f in files for d in validation.validate(load_paths([f]))]
    assert json.loads(done.stdout) == here
    assert sum(str(bad) in d for d in here) >= 4  # the refused objects' errors, each at its line


def test_a_tuple_is_refused_whatever_was_validated_before() -> None:
    """The $ref cache keys instances by their JSON: a tuple dumps as an array but is not one to jsonschema, so a
    tuple's answer must not come from a list validated earlier (it did: the order of objects changed the answer)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"priority": "high",  # invalid: both pods take the Python validator, whose $ref cache this is
                    "containers": [{"name": "c", "image": "i", "args": ["a", "b"]}]}}
    as_tuple = copy.deepcopy(pod)
    as_tuple["spec"]["containers"][0]["args"] = ("a", "b")
    alone = [d.message for d in validation.validate([Manifest(as_tuple, "t.yaml", 1)]) if d.severity == "error"]
    assert any("is not of type 'array'" in m for m in alone), alone
    validation.validate([Manifest(pod, "l.yaml", 1)])
    after = [d.message for d in validation.validate([Manifest(as_tuple, "t.yaml", 1)]) if d.severity == "error"]
    assert after == alone
