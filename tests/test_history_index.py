"""history.index: `get/describe --at` read the state from the last snapshot before the moment, then replay; the
state (order included) is the one a replay of the whole history gives, at every moment; an index that does not
match the history beside it is ignored. Each holds for history.jsonl and for history.jsonl.zst (several frames)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario

from kubetwin.report import historyindex
from kubetwin.report.rundir import history_file, state_at
from kubetwin.runner import run
from kubetwin.sim import historyfile, seekable
from kubetwin.sim.historyfile import open_history


@pytest.fixture(scope="module", params=["None", "Zstd"])
def indexed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A run with creations, updates and deletions (preemption, a delete-at), a snapshot every 4 KiB; its history
    plain, or compressed in frames of 2 KiB (so snapshots and lines lie in many frames)."""
    out = tmp_path_factory.mktemp("idx") / "run"
    pcs = [make_priority_class(n).value(v).obj() for n, v in (("low", 10), ("high", 1000))]
    objs = [make_scenario("3h").obj(), *pcs,
            make_pool("gpu", "g2-standard-8", 2).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            *(make_pod(f"low{i}").gpus(1).priority_class("low").duration("40m").create_at(f"{i * 5}m").obj()
              for i in range(6)),
            make_pod("vip").gpus(1).priority_class("high").duration("20m").create_at("12m").obj(),
            make_pod("gone").cpu("1").duration("1h").annotation("kubetwin.io/delete-at", "15m").obj()]
    objs[0]["spec"]["historyCompression"] = request.param
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(historyindex, "EVERY_BYTES", 4096)
        mp.setattr(seekable, "FRAME_BYTES", 2048)
        run(objects=objs, out=out)
    assert history_file(out).name == ("history.jsonl.zst" if request.param == "Zstd" else "history.jsonl")
    if request.param == "Zstd":
        with seekable.SeekableFile(history_file(out)) as f:
            assert f.frames > 10
    return out


def _history(run_dir: Path) -> bytes:
    """The history's lines as written (decompressed)."""
    with open_history(history_file(run_dir)) as source:
        return b"".join(source.lines())


def _replayed(run_dir: Path, at: float, only: set[str] | None = None) -> dict[str, list[tuple[tuple[str, str, str],
                                                                                              dict]]]:
    """The state per kind, each kind's objects in the order the reader gives them."""
    objs, _, _ = state_at(run_dir, at, only)
    per_kind: dict[str, list[tuple[tuple[str, str, str], dict]]] = {}
    for key, obj in objs.items():
        per_kind.setdefault(key[0], []).append((key, obj))
    return per_kind


def test_the_index_has_snapshots_and_names_its_history(indexed: Path) -> None:
    table = json.loads((indexed / historyindex.INDEX_FILE).read_bytes().splitlines()[-1])
    assert table["format"] == historyindex.FORMAT
    assert table["historyBytes"] == len(_history(indexed))
    assert len(table["snapshots"]) >= 5  # the history is several times 4 KiB
    assert {"Node", "Pod", "Event"} <= set(table["snapshots"][-1]["kinds"])


def test_every_moment_reads_the_same_state_with_and_without_the_index(indexed: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(indexed, bare)
    (bare / historyindex.INDEX_FILE).unlink()
    times = sorted({json.loads(line)["t"] for line in _history(indexed).splitlines()})
    used = 0
    for t in times + [t + 0.5 for t in times]:
        used += historyindex.snapshot_before(indexed, t) is not None
        whole = _replayed(bare, t)
        assert _replayed(indexed, t) == whole, t
        for only in ({"Pod"}, {"Event"}, {"Node", "PriorityClass"}, {"Deployment"}):
            assert _replayed(indexed, t, only) == {k: v for k, v in whole.items() if k in only}, (t, only)
    assert used > len(times)  # most moments start from a snapshot


def test_an_index_for_another_history_is_ignored(indexed: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut"
    shutil.copytree(indexed, cut)
    lines = _history(cut).splitlines(keepends=True)
    history_file(cut).unlink()
    (cut / "history.jsonl").write_bytes(b"".join(lines[: len(lines) // 2]))
    assert historyindex.snapshot_before(cut, 1e9) is None
    (cut / historyindex.INDEX_FILE).write_text("not an index\n")
    assert historyindex.snapshot_before(cut, 1e9) is None
    objs, _, _ = state_at(cut, 3 * 3600.0)  # the history alone still answers
    assert objs


def _cli(*args: str) -> str:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    res = CliRunner().invoke(app, list(args))
    return f"{res.exit_code}\n{res.output}"


def test_get_and_describe_print_what_a_whole_reading_prints(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kinds and needles get/describe narrow the reading to (and the snapshots) change nothing they print."""
    from kubetwin.report import rundir

    node = json.loads(_cli("get", "nodes", "-o", "json", "--run", str(indexed)).split("\n", 1)[1])["items"][0]
    commands = [("get", "pods"), ("get", "pod", "vip", "-o", "yaml"), ("get", "nodes,pods", "-o", "wide"),
                ("get", "events"), ("describe", "node", node["metadata"]["name"]), ("describe", "pod", "low"),
                ("describe", "pods"), ("get", "pod", "gone"), ("describe", "priorityclass", "high")]
    moments = ["5m", "13m", "30m", "2h"]
    narrowed = {(c, at): _cli(*c, "--run", str(indexed), "--at", at) for c in commands for at in moments}
    whole = rundir.state_at
    monkeypatch.setattr(rundir, "state_at", lambda run_dir, at, *_: whole(run_dir, at))
    monkeypatch.setattr(historyindex, "snapshot_before", lambda *_: None)
    for (c, at), text in narrowed.items():
        assert _cli(*c, "--run", str(indexed), "--at", at) == text, (c, at)
    assert "vip" in narrowed[(("get", "pod", "vip", "-o", "yaml"), "30m")]
    assert "low0" in narrowed[(("describe", "pod", "low"), "5m")]


@pytest.mark.parametrize(("block", "gap", "tail"), [(1 << 20, 1 << 16, 1 << 16), (300, 100, 16), (1, 0, 1)])
def test_lines_at_offsets_read_in_blocks_are_the_lines(indexed: Path, monkeypatch: pytest.MonkeyPatch,
                                                       block: int, gap: int, tail: int) -> None:
    """read_versions reads lines close together in one block and a line longer than the block's tail on until it
    ends: whatever the sizes, each offset gives its own line, parsed, in the order asked."""
    monkeypatch.setattr(historyfile, "_BLOCK", block)
    monkeypatch.setattr(historyfile, "_GAP", gap)
    monkeypatch.setattr(historyfile, "_TAIL", tail)
    lines = _history(indexed).splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    asked = starts[::3][::-1] + starts[1:7]
    with open_history(history_file(indexed)) as source:
        got = historyindex.read_versions(source, asked)
        kept = historyindex.read_versions(source, asked, lambda line: b'"kind":"Pod"' in line)
    by_start = dict(zip(starts, lines, strict=True))
    assert got == [json.loads(by_start[o]) for o in asked]
    assert kept == [json.loads(by_start[o]) for o in asked if b'"kind":"Pod"' in by_start[o]]


def test_an_index_of_the_previous_format_is_still_read(indexed: Path, tmp_path: Path) -> None:
    """Run folders written before the arrays were compressed (FORMAT_V2: plain JSON arrays of offsets) still start
    from their snapshots, with the same answers."""
    old = tmp_path / "old"
    shutil.copytree(indexed, old)
    table = json.loads((indexed / historyindex.INDEX_FILE).read_bytes().splitlines()[-1])
    out, pos = bytearray(), 0
    for snap in table["snapshots"]:
        at = historyindex.snapshot_before(indexed, snap["t"])
        assert at is not None
        for kind in snap["kinds"]:
            line = json.dumps(historyindex.Snapshot(snap["t"], snap["offset"], indexed / historyindex.INDEX_FILE,
                                                    snap["kinds"]).offsets(kind)).encode() + b"\n"
            snap["kinds"][kind] = [pos, len(line)]
            out += line
            pos += len(line)
    table["format"] = historyindex.FORMAT_V2
    (old / historyindex.INDEX_FILE).write_bytes(bytes(out) + json.dumps(table).encode() + b"\n")
    last = table["snapshots"][-1]["t"]
    snap = historyindex.snapshot_before(old, last)
    assert snap is not None and snap.format == historyindex.FORMAT_V2 and snap.offsets("Pod")
    for t in (last, last + 60, 3 * 3600.0):
        assert _replayed(old, t) == _replayed(indexed, t)
