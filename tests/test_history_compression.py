"""history.jsonl.zst (issue 32, goal 4): a run's history and Events compressed in zstd's seekable format past a size
(Scenario.spec.historyCompression: Auto, Zstd, None). The lines are the same bytes whichever way they are stored,
any zstd reader reads the file whole, and every command that reads a run folder answers the same from either."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
import zstandard
from k8s_builders import make_pod, make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.main import app
from kubetwin.report import historyindex
from kubetwin.report.historylog import read_entries
from kubetwin.runner import run
from kubetwin.sim import historyfile, seekable
from kubetwin.sim.historyfile import history_path, open_history
from kubetwin.validation.validate import validate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _lines(n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [json.dumps({"i": i, "pad": "x" * rng.randint(0, 300)}).encode() + b"\n" for i in range(n)]


def _write(path: Path, lines: list[bytes], frame_bytes: int) -> None:
    w = seekable.FrameWriter(path, frame_bytes)
    for line in lines:
        w.write(line)
    w.close()


@pytest.mark.parametrize("frame_bytes", [1, 700, 4096, 1 << 20])
def test_seekable_file_reads_what_was_written_whole_and_at_any_offset(tmp_path: Path, frame_bytes: int) -> None:
    lines = _lines(400)
    plain = b"".join(lines)
    path = tmp_path / "h.jsonl.zst"
    _write(path, lines, frame_bytes)
    with seekable.SeekableFile(path) as f:
        assert f.size == len(plain)
        assert f.frames == (len(lines) if frame_bytes == 1 else 1 if frame_bytes > len(plain) else f.frames)
        assert list(f.lines()) == lines
        starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
        for i in (0, 1, 57, 399):
            assert list(f.lines(starts[i])) == lines[i:]
        rng = random.Random(2)
        for _ in range(200):  # reads across frame boundaries and past the end, as os.pread reads a plain file
            off, n = rng.randrange(len(plain) + 10), rng.randrange(1, 5000)
            assert f.pread(n, off) == plain[off:off + n]
    # any zstd decompressor reads the frames in order and passes over the seek table (a skippable frame)
    with path.open("rb") as fh:
        assert zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read() == plain


def test_frames_end_at_line_ends(tmp_path: Path) -> None:
    lines = _lines(300)
    path = tmp_path / "h.zst"
    _write(path, lines, 1000)
    with seekable.SeekableFile(path) as f:
        assert f.frames > 10
        frames = [f.frame(i) for i in range(f.frames)]
    assert all(fr.endswith(b"\n") and len(fr) >= 1000 for fr in frames[:-1])
    assert b"".join(frames) == b"".join(lines)


@pytest.mark.skipif(shutil.which("zstdcat") is None, reason="the zstd command-line tool is not installed")
def test_zstdcat_reads_the_history_as_plain_lines(tmp_path: Path) -> None:
    lines = _lines(200)
    path = tmp_path / "history.jsonl.zst"
    _write(path, lines, 2048)
    out = subprocess.run(["zstdcat", str(path)], check=True, capture_output=True).stdout
    assert out == b"".join(lines)
    assert subprocess.run(["zstd", "-t", str(path)], capture_output=True).returncode == 0


def test_a_zstd_file_without_seek_table_reads_whole_and_the_index_is_not_trusted(tmp_path: Path) -> None:
    """A history recompressed by hand (`zstd history.jsonl`) has no seek table: commands replay it whole."""
    out = tmp_path / "run"
    run(objects=[make_scenario("1h").obj(), make_pool("p", "n2-standard-8", 1).obj(),
                 make_pod("a").cpu("1").duration("10m").obj()], out=out)
    plain = (out / "history.jsonl").read_bytes()
    (out / "history.jsonl").unlink()
    (out / "history.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(plain))
    with seekable.SeekableFile(out / "history.jsonl.zst") as f:
        assert not f.seekable and f.size is None
        assert b"".join(f.lines()) == plain
        with pytest.raises(ValueError, match="no seek table"):
            f.pread(10, 0)
    assert historyindex.snapshot_before(out, 1e9) is None
    res = CliRunner().invoke(app, ["get", "pods", "--run", str(out)])
    assert res.exit_code == 0 and "a " in res.output and "Completed" in res.output


def _day(compression: str) -> list[dict]:
    return [make_scenario("2h").spec(historyCompression=compression, report=["summary", "html"]).obj(),
            make_pool("gpu", "g2-standard-8", 2).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            *(make_pod(f"p{i}").gpus(1).duration("15m").create_at(f"{i * 3}m").obj() for i in range(12))]


def _run_each(tmp_path: Path, compressions: list[str], auto_bytes: int | None = None) -> dict[str, Path]:
    outs = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(seekable, "FRAME_BYTES", 4096)
        if auto_bytes is not None:
            mp.setattr(historyfile, "AUTO_BYTES", auto_bytes)
        for c in compressions:
            outs[c] = tmp_path / c / "run"  # the same folder name: report.html's title
            run(objects=_day(c), out=outs[c])
    return outs


def _plain(path: Path) -> bytes:
    with open_history(path) as source:
        return b"".join(source.lines())


def test_auto_compresses_past_its_size_and_every_mode_holds_the_same_lines(tmp_path: Path) -> None:
    outs = _run_each(tmp_path, ["None", "Zstd", "Auto"], auto_bytes=20_000)
    names = {c: sorted(p.name for p in out.iterdir()) for c, out in outs.items()}
    assert "history.jsonl" in names["None"] and "history.jsonl.zst" not in names["None"]
    for c in ("Zstd", "Auto"):  # compressed, and no plain file left beside
        assert {"history.jsonl.zst", "events.jsonl.zst"} <= set(names[c])
        assert not {"history.jsonl", "events.jsonl"} & set(names[c])
    plain = (outs["None"] / "history.jsonl").read_bytes()
    assert len(plain) > 20_000 * 3  # Auto switched partway
    for c in ("Zstd", "Auto"):
        assert _plain(outs[c] / "history.jsonl.zst") == plain
        assert _plain(outs[c] / "events.jsonl.zst") == (outs["None"] / "events.jsonl").read_bytes()
    # frames are cut by content: compressing what was written plain gives the bytes compressing from the start gives
    for f in ("history.jsonl.zst", "events.jsonl.zst"):
        assert (outs["Auto"] / f).read_bytes() == (outs["Zstd"] / f).read_bytes()
    for f in ("summary.json", "timeseries.json", "history.index", "report.html", "run.json"):
        assert (outs["Zstd"] / f).read_bytes() == (outs["None"] / f).read_bytes(), f
    assert list(read_entries(outs["Zstd"] / "history.jsonl.zst")) == list(read_entries(outs["None"] / "history.jsonl"))


def test_auto_below_its_size_keeps_the_plain_files(tmp_path: Path) -> None:
    out = _run_each(tmp_path, ["Auto"])["Auto"]
    assert (out / "history.jsonl").is_file() and (out / "events.jsonl").is_file()
    assert history_path(out) == out / "history.jsonl"


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    return f"{res.exit_code}\n{res.output}"


@pytest.mark.parametrize("example", ["kueue-cohort-borrowing.yaml", "training-llama-8b-a3.yaml"])
def test_every_command_answers_the_same_from_a_compressed_history(tmp_path: Path, example: str) -> None:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / example).read_text()) if d]
    outs = {}
    for c in ("None", "Zstd"):
        objs = json.loads(json.dumps(docs))
        scen = next(o for o in objs if o["kind"] == "Scenario")
        scen["spec"].update(historyCompression=c, traceScheduling=True)
        outs[c] = tmp_path / c / "run"
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(seekable, "FRAME_BYTES", 8192)
            mp.setattr(historyindex, "EVERY_BYTES", 16384)
            run(objects=objs, out=outs[c])
    assert (outs["Zstd"] / "history.jsonl.zst").is_file()
    names = json.loads(_cli("get", "all", "-o", "json", "--run", str(outs["None"])).split("\n", 1)[1])["items"]
    commands = [("get", "all"), ("get", "events"), ("get", "pods", "-o", "wide", "--at", "30m"),
                ("get", "workloads", "-A", "-o", "yaml", "--at", "1h")]
    for item in names[:6]:
        kind, name = item["kind"].lower(), item["metadata"]["name"]
        ns = item["metadata"].get("namespace")
        commands.append(("describe", kind, name, *(("-n", ns) if ns else ())))
    if example.startswith("kueue"):
        wl = json.loads(_cli("get", "workloads", "-A", "-o", "json", "--run", str(outs["None"])).split("\n", 1)[1])
        first = wl["items"][0]["metadata"]
        commands.append(("explain", "workload", first["name"], "-n", first["namespace"]))
    else:
        job = next(o for o in docs if o["kind"] in ("Job", "JobSet"))["metadata"]
        commands.append(("explain", "job", job["name"], "-n", job.get("namespace", "default")))
        commands.append(("explain", "job", "no-such-job"))
    for cmd in commands:
        plain = _cli(*cmd, "--run", str(outs["None"]))
        assert plain.startswith("0\n") or cmd[-1] == "no-such-job", (cmd, plain)
        assert _cli(*cmd, "--run", str(outs["Zstd"])) == plain, cmd
    for c in ("None", "Zstd"):
        assert _cli("report", str(outs[c]), "--out", str(tmp_path / f"{c}.html")).startswith("0\n")
    assert (tmp_path / "Zstd.html").read_bytes() == (tmp_path / "None.html").read_bytes()


def test_a_compressed_run_folder_is_a_run_folder(tmp_path: Path) -> None:
    """--overwrite replaces it (its files are a run's), the CLI says where the history went, and a folder that lost
    its history is no run folder."""
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump_all(_day("Zstd")))
    out = tmp_path / "run"
    first = _cli("run", str(scen), "--out", str(out))
    assert first.startswith("0\n") and "history.jsonl.zst (zstd; read with `zstdcat FILE | jq`" in first
    assert _cli("run", str(scen), "--out", str(out), "--overwrite").startswith("0\n")
    (out / "history.jsonl.zst").unlink()
    res = _cli("get", "pods", "--run", str(out))
    assert res.startswith("1\n") and "not a kubetwin run folder (no history.jsonl)" in res


def test_validate_names_a_compression_it_does_not_know() -> None:
    from kubetwin.api.loader import Manifest

    objs = _day("Gzip")
    diags = [d for d in validate([Manifest(o, "s.yaml", i + 1) for i, o in enumerate(objs)])
             if d.severity == "error"]
    assert diags and "historyCompression" in diags[0].render()
    with pytest.raises(KubetwinError):
        run(objects=objs)


@pytest.mark.parametrize("frame_bytes", [1, 97, 1000, 1 << 16])
@pytest.mark.parametrize("chunk", [1, 250, 4096, 1 << 20])
def test_lines_written_in_chunks_make_the_frames_lines_written_one_by_one_make(tmp_path: Path, frame_bytes: int,
                                                                               chunk: int) -> None:
    """What Auto compresses at once (the plain file read back in chunks of whole lines) is stored as the same bytes
    as the same lines written one by one."""
    lines = _lines(500, seed=frame_bytes)
    _write(tmp_path / "one.zst", lines, frame_bytes)
    w = seekable.FrameWriter(tmp_path / "many.zst", frame_bytes)
    group: list[bytes] = []
    for line in lines:
        group.append(line)
        if sum(map(len, group)) >= chunk:
            w.write_lines(b"".join(group))
            group = []
    w.write_lines(b"".join(group))
    w.close()
    assert (tmp_path / "many.zst").read_bytes() == (tmp_path / "one.zst").read_bytes()


@pytest.mark.parametrize("frame_bytes", [1, 100, 5000])
def test_lines_at_offsets_are_the_lines_even_across_frames(tmp_path: Path, frame_bytes: int) -> None:
    """lines_at slices each line from the frame that holds its start, reading on into the next frames when a file
    was cut elsewhere than at line ends (written here in pieces of 37 bytes); offsets past the end give nothing."""
    lines = _lines(300, seed=3)
    plain = b"".join(lines)
    path = tmp_path / "cut.zst"
    w = seekable.FrameWriter(path, frame_bytes)
    for i in range(0, len(plain), 37):
        w.write(plain[i:i + 37])
    w.close()
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    asked = sorted(set(starts[::2] + starts[5:9]))
    with seekable.SeekableFile(path) as f:
        assert f.frames > 1
        got = list(f.lines_at(asked + [len(plain), len(plain) + 50]))
    by_start = dict(zip(starts, lines, strict=True))
    assert got == [(o, by_start[o]) for o in asked]
