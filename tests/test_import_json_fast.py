"""A JSON dump read by the C decoder (kubetwin.api.jsonfast; issue 36 item 3's "answers in seconds for a 1,000-node
snapshot"): the same objects as the YAML path, every field's line the same when a message asks for it (and only
then), what the YAML path refuses still refused in its words at its line, and validate's cache of valid subschema
instances never hides an error."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin.api import jsonfast, loader
from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import load_text
from kubetwin.cli.main import app
from kubetwin.validation.validate import validate

DATA = Path(__file__).parent / "data" / "import"
TEXT = (DATA / "gke-kubectl.json").read_text()


def yaml_path(text: str, file: str, monkeypatch: pytest.MonkeyPatch) -> list[loader.Manifest]:
    with monkeypatch.context() as m:
        m.setattr(jsonfast, "documents", lambda text, field_lines: None)
        return load_text(text, file)


def test_the_same_objects_and_lines_as_the_yaml_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = load_text(TEXT, "d.json")
    slow = yaml_path(TEXT, "d.json", monkeypatch)
    assert [m.obj for m in fast] == [m.obj for m in slow] and len(fast) == len(json.loads(TEXT)["items"]) == 17
    assert [m.line for m in fast] == [m.line for m in slow]
    assert all(isinstance(m.lines, jsonfast.LazyLines) for m in fast)
    for f, s in zip(fast, slow, strict=True):
        assert dict(f.lines.items()) == s.lines
        assert f.line_of("spec.containers[0].resources") == s.line_of("spec.containers[0].resources")


def test_lines_are_found_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading and validating a clean dump composes no YAML; one message's line composes its item only."""
    asked: list[str] = []
    real = loader.field_lines
    monkeypatch.setattr(loader, "field_lines", lambda text: asked.append(text) or real(text))
    manifests = load_text(TEXT, "d.json")
    assert not [d for d in validate(manifests) if d.severity == "error"] and asked == []
    pod = next(m for m in manifests if m.obj["metadata"]["name"] == "batch-prep")
    line = pod.line_of("spec.containers")
    assert len(asked) == 1 and '"containers": [' in TEXT.splitlines()[line - 1]


def test_values_are_the_yaml_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole floats are integers (YAMLToJSON); an unquoted NaN is not JSON: the YAML path reads it (a string)."""
    (m,) = load_text('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, '
                     '"data": {}, "x": [2.0, 2.5, 10]}', "c.json")
    assert m.obj["x"] == [2, 2.5, 10] and isinstance(m.obj["x"][0], int)
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": NaN}}'
    (fast,) = load_text(text, "c.json")
    (slow,) = yaml_path(text, "c.json", monkeypatch)
    assert fast.obj == slow.obj and fast.obj["data"]["x"] == "NaN"


@pytest.mark.parametrize(("text", "message"), [
    ('{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "kind": "Node"}]}',
     'key "kind" already set in map'),
    ('{"a": ' * 150 + "1" + "}" * 150, "exceeded max depth of 100"),
    ('{"apiVersion": "v1", "kind": "List", "items": [1]}', "list items must be objects")])
def test_what_the_yaml_path_refuses_is_refused_in_its_words(text: str, message: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubetwinError) as fast:
        load_text(text, "bad.json")
    with pytest.raises(KubetwinError) as slow:
        yaml_path(text, "bad.json", monkeypatch)
    assert [d.render() for d in fast.value.diagnostics] == [d.render() for d in slow.value.diagnostics]
    assert message in str(fast.value)


def test_an_invalid_object_in_a_json_dump_is_named_at_its_line(tmp_path: Path) -> None:
    d = json.loads(TEXT)
    pod = next(o for o in d["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "batch-prep")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "six"
    path = tmp_path / "d.json"
    path.write_text(json.dumps(d, indent=4))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"cpu": "six"' in text)
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 1 and f"{path}:{line}: error: Pod/ml/batch-prep:" in res.output


def test_the_validity_cache_never_hides_an_error() -> None:
    """A container found valid once is not walked again; the same container made invalid is, every time."""
    pod = yaml.safe_load(yaml.safe_dump(next(o for o in json.loads(TEXT)["items"] if o["kind"] == "Pod" and
                                             o["metadata"]["name"] == "batch-prep")))
    ns = loader.Manifest({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, "p.yaml", 1)
    good = loader.Manifest(pod, "p.yaml", 1)
    assert not [d for d in validate([ns, good]) if d.severity == "error"]
    bad_pod = copy.deepcopy(pod)
    bad_pod["spec"]["containers"][0]["imagePullPolicy"] = 7
    for _ in range(2):
        errors = [d for d in validate([ns, loader.Manifest(bad_pod, "p.yaml", 1)]) if d.severity == "error"]
        assert [d.field for d in errors] == ["spec.containers[0].imagePullPolicy"]
    assert not [d for d in validate([ns, good]) if d.severity == "error"]


@pytest.mark.parametrize("text", ['{"apiVersion":"v1","kind":"List"}', '{"apiVersion":"v1","kind":"List","items":null}',
                                  '{"apiVersion":"v1","kind":"PodList","items":null}'])
def test_a_list_without_items_holds_no_objects_on_the_fast_path_too(text: str) -> None:
    """kubectl reads `kind: List` with no items as no objects ("no objects passed to apply"): the JSON fast path
    answers as the general one (it used to return the List itself as one object)."""
    assert load_text(text) == []
    assert load_text(" " + text.replace(",", ",\n")) == []  # the general path, for comparison
