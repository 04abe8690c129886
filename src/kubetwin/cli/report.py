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
                                              "RUN/report.html; several: default report-compare.html)"),
           overwrite: bool = typer.Option(False, "--overwrite", help="replace the file --out if it exists")) -> None:
    """Write report.html from run folders: one run's page, or several runs side by side on one page."""
    from kubetwin.report.html import compare_page, write_report

    own_page = len(runs) == 1 and out is not None and out.resolve() == (runs[0] / "report.html").resolve()
    if out is not None and out.exists() and not overwrite and not own_page:
        # as `kubetwin run --out` refuses a folder that holds something: a page written before is not replaced
        # unless asked (a run's own report.html is its page, rebuilt in place)
        what = "a folder" if out.is_dir() else "a file"
        err.print(f"{out}: error: --out names {what} that exists\n    fix: pass --overwrite to replace it, or "
                  "another --out", markup=False, highlight=False)
        raise typer.Exit(1)
    try:
        if len(runs) == 1:
            path = write_report(runs[0], path=out)
        else:
            path = out or Path("report-compare.html")
            path.write_text(compare_page(runs), encoding="utf-8")
    except KubetwinError as exc:
        for d in exc.diagnostics:
            err.print(d.render(), markup=False, highlight=False)
        raise typer.Exit(1) from None
    console.print(f"report: {path.resolve()}", highlight=False)
