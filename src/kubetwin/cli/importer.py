"""`kubetwin import SOURCE... --out DIR`: a real cluster's state (kubectl dumps, the kube-scheduler-simulator's
export, kwokctl snapshots) as the twin's manifests, DIR/cluster.yaml, with what was kept, dropped and defaulted.
docs/import.md."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.cli.output import console as make_console
from kubetwin.cli.output import fail

console = make_console()
err = make_console(stderr=True)
FILE = "cluster.yaml"


def parse_remaining(values: list[str]) -> dict[str, float]:
    """`--remaining-run-time OWNER=DURATION` values: OWNER is KIND/NAME or NAMESPACE/KIND/NAME (kind in lower case,
    as kubectl writes job/train), or `*` for every bound pod of a Job or of no owner that has no run time."""
    from kubetwin.k8s.units import UnitError, parse_duration

    out: dict[str, float] = {}
    bad: list[Diagnostic] = []
    for v in values:
        owner, sep, text = v.rpartition("=")
        parts = owner.split("/")
        if not sep or not (owner == "*" or len(parts) in (2, 3) and all(parts)):
            bad.append(Diagnostic("-", 0, "-", "--remaining-run-time", f"Invalid value: {v!r}: want OWNER=DURATION",
                                  "e.g. --remaining-run-time job/train-llama=45m, ml/deployment/web=2h or '*=1h'"))
            continue
        try:
            seconds = parse_duration(text)
        except (UnitError, ValueError) as exc:
            bad.append(Diagnostic("-", 0, "-", "--remaining-run-time", f"Invalid value: {v!r}: {exc}",
                                  "a duration such as 90s, 45m or 2h"))
            continue
        key = owner if owner == "*" else "/".join([*parts[:-2], parts[-2].lower(), parts[-1]])
        out[key] = seconds
    if bad:
        raise KubetwinError(bad)
    return out


def import_cmd(sources: list[str] = typer.Argument(..., help="kubectl -o yaml|json dumps, a kube-scheduler-"
                                                  "simulator export, kwokctl snapshots (files or folders)"),
               out: Path = typer.Option(..., "--out", "-o", help="folder to write cluster.yaml into"),
               remaining: list[str] = typer.Option([], "--remaining-run-time", help="OWNER=DURATION: how long the "
                                                   "bound pods of OWNER (job/NAME, ns/deployment/NAME...) still run; "
                                                   "'*=DURATION' for bound pods of Jobs or of no owner (default 1h)"),
               snapshot_time: Optional[str] = typer.Option(None, "--snapshot-time", help="the snapshot's time, "
                                                           "RFC 3339 (default: the latest time the dump records)"),
               overwrite: bool = typer.Option(False, "--overwrite", help=f"replace DIR/{FILE} if it exists"),
               runtime: list[str] = typer.Option([], "--runtime", help="OWNER=DIST: the run time of OWNER's pods "
                                                 "drawn from a distribution (docs/import.md; fixed:1h, exp:mean=30m, "
                                                 "lognormal:median=2h,sigma=0.5, uniform:min=10m,max=1h, "
                                                 "empirical:FILE); first match wins"),
               seed: int = typer.Option(0, "--seed", help="the seed --runtime's draws take")) -> None:
    """Turn a real cluster's state into manifests `kubetwin run` takes; print what was kept, dropped, defaulted."""
    import yaml

    from kubetwin.importer import convert
    from kubetwin.importer import sources as import_sources
    from kubetwin.importer.runtime import parse_rules

    target = out / FILE
    if target.exists() and not overwrite:
        fail(KubetwinError([Diagnostic(str(target), 0, "-", "--out", "Invalid value: the file exists",
                                       "pass --overwrite to replace it, or choose another --out")]))
    try:
        options = convert.Options(parse_remaining(remaining), snapshot_time, parse_rules(runtime), seed)
        if snapshot_time is not None and convert.parse_time(snapshot_time) is None:
            raise KubetwinError([Diagnostic("-", 0, "-", "--snapshot-time", f"Invalid value: {snapshot_time!r}: "
                                            "not an RFC 3339 time", "e.g. 2026-12-01T10:00:00Z")])
        manifests, report = import_sources.load(sources, options)
    except KubetwinError as exc:
        fail(exc)
    if report is None:
        fail(KubetwinError([Diagnostic(", ".join(sources), 0, "-", "", "no cluster dump among the sources: they "
                                       "are manifests already (no object has creationTimestamp, resourceVersion "
                                       "or managedFields)", "run them as they are: kubetwin run "
                                       + " ".join(sources))]))
    header = "".join(f"# {line}\n" for line in ["kubetwin import " + " ".join(sources), *report.lines()])
    body = "---\n".join(yaml.safe_dump(m.obj, sort_keys=False, width=120) for m in manifests)
    out.mkdir(parents=True, exist_ok=True)
    target.write_text(header + body, encoding="utf-8")
    for line in report.lines():
        console.print(line, markup=False, highlight=False)
    for d in report.warnings:
        err.print(d.render(), markup=False, highlight=False)
    console.print(f"wrote {target}: {len(manifests)} objects; run it: kubetwin run {target} --out RUN",
                  markup=False, highlight=False)
