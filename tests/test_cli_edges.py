"""The command line's edges (issue 35 item 9): `report --out` refuses to replace a file as `run --out` refuses a
folder, unless --overwrite; a value given to a flag that takes none is named as such, not only as a missing file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kubetwin.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tpu-v5e-slice.yaml"


def test_report_out_refuses_an_existing_file_unless_overwrite(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert CliRunner().invoke(app, ["run", str(EXAMPLE), "--out", str(run)]).exit_code == 0
    page = tmp_path / "page.html"
    page.write_text("mine")
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(page)])
    assert res.exit_code == 1 and "--out names a file that exists" in res.output and "--overwrite" in res.output
    assert page.read_text() == "mine"  # nothing half-written
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(page), "--overwrite"])
    assert res.exit_code == 0 and page.read_text().startswith("<!DOCTYPE html>")
    # the run's own page is rebuilt in place, as `kubetwin report RUN` does without --out
    own = run / "report.html"
    assert CliRunner().invoke(app, ["report", str(run), "--out", str(own)]).exit_code == 0


def test_a_value_after_a_flag_is_named_as_one(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["run", str(EXAMPLE), "--out", str(tmp_path / "r"), "--overwrite", "true"])
    assert res.exit_code != 0
    assert "true: error: no such file or directory" in res.output
    assert "flags such as --overwrite take no value: drop 'true'" in res.output
    assert not (tmp_path / "r").exists()
