"""The run folder: a second run into a folder that holds a run refuses unless --overwrite; --overwrite replaces
everything (no file of the first run survives beside the second's); a run that fails leaves no folder that looks
complete; `kubetwin run` without --out says that nothing was written."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_yaml
from k8s_builders import make_pod, make_pool, make_scenario
from typer.testing import CliRunner

import kubetwin.runner as twin_run
from kubetwin.api.errors import KubetwinError
from kubetwin.cli.main import app
from kubetwin.report import historylog


def _scenario(tmp: Path, name: str = "s.yaml", pods: int = 1) -> Path:
    objs = [make_scenario("1h").obj(), make_pool("cpu", "e2-standard-8", 1).obj()]
    objs += [make_pod(f"p{i}").cpu("1").duration("10m").obj() for i in range(pods)]
    return write_yaml(tmp / name, objs)


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_second_run_into_the_same_folder_refuses_and_names_the_flag(tmp_path: Path) -> None:
    path, out = _scenario(tmp_path), tmp_path / "out"
    first = _invoke("run", str(path), "--out", str(out))
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = _invoke("run", str(path), "--out", str(out))
    assert again.exit_code == 1
    assert "is not empty" in again.output and "--overwrite" in again.output
    assert "Traceback" not in again.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched


def test_overwrite_replaces_every_file_of_the_previous_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out).mkdir()
    (out / "metrics.prom").write_text("# from an earlier serving run\n")
    (out / "requests.csv").write_text("id\n1\n")
    (out / "report.html").write_text("<html>old</html>")
    (out / "summary.json").write_text("{}")
    res = _invoke("run", str(_scenario(tmp_path)), "--out", str(out), "--overwrite")
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert "metrics.prom" not in names and "requests.csv" not in names and "report.html" not in names
    assert {"summary.json", "history.jsonl", "events.jsonl", "timeseries.json", "run.json"} <= names
    assert (out / "summary.json").read_text() != "{}"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp sibling left


def test_overwrite_keeps_a_folder_holding_files_kubetwin_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "my-notes.txt").write_text("keep me")
    res = _invoke("run", str(_scenario(tmp_path)), "--out", str(out), "--overwrite")
    assert res.exit_code == 1
    assert "my-notes.txt" in res.output and "not a run folder" in res.output
    assert (out / "my-notes.txt").read_text() == "keep me"


def test_python_api_refuses_and_overwrites_the_same_way(tmp_path: Path) -> None:
    path, out = _scenario(tmp_path), tmp_path / "out"
    twin_run.run([path], out=out)
    with pytest.raises(KubetwinError, match="overwrite=True"):
        twin_run.run([path], out=out)
    twin_run.run([_scenario(tmp_path, "t.yaml", pods=2)], out=out, overwrite=True)
    assert '"p1"' in (out / "history.jsonl").read_text()


def test_an_empty_existing_folder_is_fine(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    res = _invoke("run", str(_scenario(tmp_path)), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert (out / "summary.json").is_file()


def test_a_run_that_raises_while_writing_leaves_no_complete_looking_folder(tmp_path: Path, monkeypatch) -> None:
    """A crash after some files were written (here: while writing report.html's step, the last one) leaves no
    folder at --out, and no summary.json anywhere under the parent."""
    def boom(*_a, **_k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(twin_run, "dump_text", boom)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        twin_run.run([_scenario(tmp_path)], out=out)
    assert not out.exists()
    assert not list(tmp_path.rglob("summary.json"))


def test_a_failed_overwrite_leaves_no_stale_run_looking_complete(tmp_path: Path, monkeypatch) -> None:
    """--overwrite that crashes must not leave the previous run's files looking like this run's results."""
    out = tmp_path / "out"
    twin_run.run([_scenario(tmp_path)], out=out)
    monkeypatch.setattr(twin_run.Environment, "run", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("bug")))
    with pytest.raises(RuntimeError):
        twin_run.run([_scenario(tmp_path)], out=out, overwrite=True)
    assert not (out / "summary.json").exists()


def test_run_without_out_says_nothing_was_written(tmp_path: Path) -> None:
    res = _invoke("run", str(_scenario(tmp_path)))
    assert res.exit_code == 0, res.output
    assert "no run folder written" in res.output and "--out" in res.output


def test_demo_runs_twice_into_its_folder(tmp_path: Path) -> None:
    """`make demo` runs `kubetwin demo --out runs/demo` again and again: the demo replaces its own run folder."""
    out = tmp_path / "demo"
    for _ in range(2):
        res = _invoke("demo", "dra", "--out", str(out))
        assert res.exit_code == 0, res.output
    assert (out / "summary.json").is_file()


def test_history_lines_are_compact_sorted_json_whatever_the_values() -> None:
    """history.jsonl's encoder (orjson, issue 32): sorted keys, compact separators, UTF-8 text; what orjson refuses
    (an integer beyond 64 bits, a non-string key) is written by the standard library's encoder instead of failing."""
    import json

    line = historylog.encode_line({"t": 1.5, "object": {"b": "Nút GPU", "a": [1, 2]}, "rv": 3})
    assert line == '{"object":{"a":[1,2],"b":"Nút GPU"},"rv":3,"t":1.5}\n'.encode()
    big = {"t": 0.0, "object": {"n": 2**70}}
    assert historylog.encode_line(big) == b'{"object":{"n":1180591620717411303424},"t":0.0}\n'
    assert json.loads(historylog.encode_line({"k": {1: "x"}})) == {"k": {"1": "x"}}


def test_a_non_ascii_annotation_round_trips_through_history(tmp_path: Path) -> None:
    import json

    pod = make_pod("p").cpu("1").duration("10m").obj()
    pod["metadata"]["annotations"] = {**pod["metadata"].get("annotations", {}), "note": "Nút GPU — nhóm A"}
    scen = write_yaml(tmp_path / "s.yaml", [make_scenario("1h").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
                                            pod])
    assert _invoke("run", str(scen), "--out", str(tmp_path / "r")).exit_code == 0
    seen = [json.loads(line)["object"] for line in (tmp_path / "r" / "history.jsonl").read_bytes().splitlines()]
    notes = {o["metadata"].get("annotations", {}).get("note") for o in seen if o["kind"] == "Pod"}
    assert notes == {"Nút GPU — nhóm A"}
