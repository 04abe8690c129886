"""`kubetwin report RUN [RUN ...] [--out FILE]`: rebuild a run's report.html, or one page comparing runs."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.output import console as make_console

console = make_console()
err = make_console(stderr=True)


def report(runs: list[Path] = typer.Argument(..., help="run folders (the --out of `kubetwin run`)"),
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="page to write (one run: default "
                                              "RUN/report.html; several: default report-compare.html)")) -> None:
    """Write report.html from run folders: one run's page, or several runs side by side on one page."""
    from kubetwin.report.html import compare_page, report_page
    from kubetwin.report.rundata import load_run

    try:
        if len(runs) == 1:
            page = report_page(load_run(runs[0]))
            path = out or runs[0] / "report.html"
        else:
            page = compare_page(runs)
            path = out or Path("report-compare.html")
    except KubetwinError as exc:
        for d in exc.diagnostics:
            err.print(d.render(), markup=False, highlight=False)
        raise typer.Exit(1) from None
    path.write_text(page, encoding="utf-8")
    console.print(f"report: {path.resolve()}", highlight=False)
