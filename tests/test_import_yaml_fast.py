"""A YAML dump (`kubectl get -o yaml`) read by loader's fast path (issue 36: a 1,000-node dump as YAML): values
built straight from libyaml's composed nodes, field lines found only when a message asks for one. The same
objects (types included), lines and literal blocks as the general path; what the fast path does not take (anchors,
merge keys, tags, keys not strings, duplicates, NaN, deep nesting, errors) goes the general path, with its
messages at its lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubetwin.api import loader
from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import Manifest, load_text
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "import"


def _general(text: str, file: str, monkeypatch: pytest.MonkeyPatch) -> list[Manifest]:
    with monkeypatch.context() as m:
        m.setattr(loader, "_fast_yaml", lambda text, file: None)
        return load_text(text, file)


def _shape(manifests: list[Manifest]) -> list[tuple[str, str, int, dict[str, int], dict[str, int]]]:
    """Everything a Manifest carries; repr keeps types apart (1, 1.0 and True are == in Python)."""
    return [(repr(m.obj), m.file, m.line, dict(m.lines.items()), dict(m.blocks.items())) for m in manifests]


def _same(text: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both paths give the same manifests, or the same errors; whether the fast path took the text."""
    took = loader._fast_yaml(text, "t.yaml") is not None
    try:
        fast = _shape(load_text(text, "t.yaml"))
    except KubetwinError as exc:
        with pytest.raises(KubetwinError) as slow:
            _general(text, "t.yaml", monkeypatch)
        assert [d.render() for d in exc.diagnostics] == [d.render() for d in slow.value.diagnostics]
        return took
    assert fast == _shape(_general(text, "t.yaml", monkeypatch))
    return took


def _dump_yaml() -> str:
    """tests/data/import/gke-kubectl.json as kubectl -o yaml would print it (block style, a List)."""
    return yaml.safe_dump(json.loads((DATA / "gke-kubectl.json").read_text()), sort_keys=False)


def test_dumps_and_examples_are_the_general_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [_dump_yaml()] + [f.read_text() for f in sorted(DATA.glob("*.yaml"))]
    texts += [f.read_text() for f in sorted(ROOT.glob("examples/**/*.yaml"))]
    took = [_same(t, monkeypatch) for t in texts]
    assert took[0] and sum(took) > len(texts) // 2  # the dumps and most examples take the fast path
    blocks = [m for t in texts for m in load_text(t, "t.yaml") if m.blocks]
    assert blocks  # literal blocks (a Kueue Configuration in a ConfigMap) keep their lines too


@pytest.mark.parametrize("text", [
    "a: 1\na: 2\n",  # a key written twice: the general path's error at its line
    "base: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n",  # a merge key
    "a: &x [1, 2]\nb: *x\n",  # an alias
    "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(  # aliases past go-yaml's ratio (limits.document_problem)
        f"{n}: &{n} [{','.join(['*' + p] * 10)}]\n" for p, n in zip("abcd", "bcde", strict=True)),
    "a: 'x & y'\nb: 2\n",  # an & that is no anchor
    "1: a\n",  # a key not a string
    "yes: a\nno: b\n",
    "? [a]\n: b\n",
    "a: !!binary aGVsbG8=\n",
    "a: !!set {x, y}\n",
    "a: .nan\n",
    "a: -.inf\n",
    "a: 1:30\nb: 0o17\nc: 017\nd: 0x1F\ne: 1_000\n",  # YAML 1.1 integers
    "a: 2.0\nb: 1e3\nc: 1.5e3\nd: .5\ne: 3.0e+30\n",
    "a: !!int '12'\nb: !!str 12\nc: !!float 1\nd: !!bool yes\n",
    "a: !!int abc\n",
    "a: ~\nb: null\nc:\nd: ''\n",
    "a: 2026-12-01T10:00:00Z\nb: 2026-12-01\n",
    "a: !custom x\n",
    "a: |\n  line1\n  line2\nb: >\n  folded\n",
    "---\n---\na: 1\n---\n",
    "- a\n- b\n",
    "just a string\n",
    "apiVersion: v1\nkind: List\nitems: null\n",
    "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
    "apiVersion: v1\nkind: List\nitems:\n- 1\n- {kind: Pod}\n",
    "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: a}\n- kind: Node\n  x: |\n    text\n",
    "apiVersion: v1\nkind: PodList\nitems: []\n",
    "kind: Pod\n---\napiVersion: v1\nkind: List\nitems:\n- {kind: Node}\n",
    "a: [1, [2, [3]]]\nb: {c: {d: {}}}\n",
    "a: " + "[" * 120 + "]" * 120 + "\n",
    "a: " + "[" * 98 + "1" + "]" * 98 + "\n",
    "a: " + "[" * 99 + "1" + "]" * 99 + "\n",
    "a: [\n",  # a syntax error
    "a: 'unterminated\n",
    "a:\tb\n",
    "pods:\n- metadata: {name: p}\nnodes: []\n",  # a kube-scheduler-simulator export
    # objects over etcd's 1.5 MiB as stored (JSON): a long string, non-ASCII text (6 JSON characters each), a
    # snapshot-like document whose small items add up (measured whole: its `nodes: ''` is no list)
    "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  data: {a: '" + "x" * 1_600_000 + "'}\n",
    "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  data: {a: '" + "\u00e9" * 300_000 + "'}\n",
    "kind: ConfigMap\ndata: {a: '" + "\u00e9" * 300_000 + "'}\n",
    "pods:\n" + "- {a: '" + "x" * 1000 + "'}\n" * 1600 + "nodes: ''\n",
])
def test_what_the_fast_path_leaves_is_the_general_paths(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _same(text, monkeypatch)


def test_the_fast_path_takes_plain_documents_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _same("apiVersion: v1\nkind: List\nitems:\n- {kind: Pod, n: 1, f: 2.5, b: true, z: null}\n", monkeypatch)
    assert _same("a: 'x & y'\n", monkeypatch)  # an & in a string: aliases are looked for, none found
    for text in ("a: 1\na: 2\n", "a: &x [1]\nb: *x\n", "1: a\n", "a: .nan\n", "a: !!binary aGVsbG8=\n",
                 "a: " + "[" * 99 + "1" + "]" * 99 + "\n"):
        assert not _same(text, monkeypatch), text


def test_lines_are_found_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading and validating a clean YAML dump composes it once (for the values); a message's line composes it
    again, once for all its objects."""
    composed: list[int] = []
    real = loader._FileLines.document
    monkeypatch.setattr(loader._FileLines, "document", lambda self, k: composed.append(k) or real(self, k))
    text = _dump_yaml()
    manifests = load_text(text, "d.yaml")
    assert not [d for d in validate(manifests) if d.severity == "error"] and composed == []
    pod = next(m for m in manifests if m.obj["metadata"]["name"] == "batch-prep")
    line = pod.line_of("spec.containers")
    assert composed and text.splitlines()[line - 1].strip() == "containers:"
    other = next(m for m in manifests if m.kind == "Node")
    assert other.line_of("metadata.labels") > 0 and composed == [0]  # the file's lines, kept from the first ask
