"""The RequestTrace kind (kubetwin.io/v1alpha1) turned into the requests it sends: the manifest validated, its
file found relative to the manifest, read by its format's loader (serving/traces/arrays.py) or generated
(serving/traces/generator.py), then replayed with timeScale / startOffset / limit / loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubetwin.serving.traces.arrays import TraceArrays, TraceError, load_trace, name_salt, replay


def load_request_trace(obj: dict | Any, manifest_file: str | Path, *, seed: int = 0, horizon: float | None = None,
                       line_of: Any = None) -> TraceArrays:
    """The requests of a RequestTrace manifest (a dict as loaded, or the validated model) as arrays.

    `manifest_file` anchors a relative spec.path; `seed` is the Scenario's seed (spec.seed overrides it);
    `horizon` (seconds, the Scenario's duration) bounds loops and is the generator's default duration.
    Problems raise KubetwinError with the field path; `line_of(field)` (Manifest.line_of) adds line numbers."""
    from pydantic import ValidationError

    from kubetwin.api.errors import Diagnostic, KubetwinError
    from kubetwin.api.twin import RequestTrace
    from kubetwin.k8s.units import parse_duration

    try:
        rt = obj if isinstance(obj, RequestTrace) else RequestTrace.model_validate(obj)
    except ValidationError as exc:
        e = exc.errors()[0]
        field = ".".join(str(p) for p in e["loc"])
        raise KubetwinError([Diagnostic(str(manifest_file), line_of(field) if line_of else 0,
                                        f"RequestTrace/{_name(obj)}", field, e["msg"], "")]) from None
    spec = rt.spec
    ref = f"RequestTrace/{rt.metadata.namespace + '/' if rt.metadata.namespace else ''}{rt.metadata.name}"
    base = Path(manifest_file).resolve().parent
    salt = name_salt(rt.metadata.namespace or "default", rt.metadata.name)
    try:
        if spec.format == "generator":
            from kubetwin.serving.traces.generator import generate

            assert spec.generator is not None
            dur = parse_duration(spec.generator.duration) if spec.generator.duration else horizon
            if dur is None:
                raise TraceError("the generator needs a duration", "set spec.generator.duration, or run it in a "
                                 "Scenario (its duration is the default)", "spec.generator.duration")
            arrays = generate(spec.generator, dur, spec.seed if spec.seed is not None else seed, salt, base)
            arrays.arrival = arrays.arrival * spec.timeScale
            return replay(arrays, 1.0, parse_duration(spec.startOffset), spec.limit, False, horizon)
        assert spec.path is not None
        arrays = load_trace(spec.format, (base / spec.path).resolve(), salt)
        return replay(arrays, spec.timeScale, parse_duration(spec.startOffset), spec.limit, spec.loop, horizon)
    except TraceError as exc:
        raise KubetwinError([Diagnostic(str(manifest_file), line_of(exc.field) if line_of else 0, ref, exc.field,
                                        exc.message, exc.hint)]) from None


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("name", "?")) if isinstance(meta, dict) else "?"
