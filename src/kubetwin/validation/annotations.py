"""The one registry of the twin's annotations: key, the kinds it is read from, its parser, what it means.

`kubetwin validate` iterates it (every annotation set of an object: its metadata, a pod template's, a JobSet's
Job and pod templates), so a bad value is a validate error with its field path instead of a crash mid-run, an
annotation put where the twin does not read it is a notice, and a misspelt `kubetwin.io/` key gets the closest
real one. docs/scenarios.md's annotation table is generated from it:

    python -m kubetwin.validation.annotations --markdown

To add an annotation: one `register(Annotation(...))` next to the code that reads it (or a row in `_ROWS`), with a
parser that raises ValueError (UnitError is one) saying what is accepted, or `checked_by` naming the module that
validates it when its rule spans several keys.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.limits import shown
from kubetwin.api.loader import Manifest
from kubetwin.k8s.units import UnitError, parse_duration, parse_positive_duration, parse_quantity

# read from the pod (a template's annotations reach it)
POD = ("Pod", "Job", "JobSet", "Deployment", "ReplicaSet", "LeaderWorkerSet", "PyTorchJob", "TrainingRuntime",
       "ClusterTrainingRuntime")
ANY = ("*",)
POOLS = ("InferencePool", "Service")


@dataclass(frozen=True)
class Annotation:
    """One annotation the twin reads (or writes: `written` ones are outputs and must not be set by hand)."""

    key: str
    kinds: tuple[str, ...]  # kinds it is read from; ("*",): any object
    meaning: str
    example: str
    parse: Callable[[str], object] | None = None  # raises ValueError saying what is accepted
    pod: bool = False  # read from the pod: on a Job/JobSet/Deployment it belongs on the pod template
    checked_by: str = ""  # the module that validates it when `parse` is None
    written: bool = False  # written by the twin (output)


def _nonnegative_quantity(raw: str) -> object:
    q = parse_quantity(raw)
    if q < 0:
        raise UnitError("must be greater than or equal to 0")
    return q


def _fraction(raw: str) -> float:
    from kubetwin.devices.gpuruntime import GPU_UTIL, demand_of

    return demand_of({GPU_UTIL: raw}).util


def _bool(raw: str) -> bool:
    if raw not in ("true", "false"):
        raise ValueError('must be "true" or "false"')
    return raw == "true"


def _rfc3339(raw: str) -> object:
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("must be an RFC 3339 time, e.g. 2026-12-01T09:30:00Z") from None


def _exit_code(raw: str) -> int:
    value = int(raw)
    if not 1 <= value <= 255:
        raise ValueError("must be an exit code from 1 to 255 (a failing container's; 0 is success)")
    return value


def _finite(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _positive_price(raw: str) -> float:
    value = _finite(raw)
    if value <= 0:
        raise ValueError("must be a price in USD per node-hour, greater than 0")
    return value


_ROWS: list[Annotation] = [
    Annotation("kubetwin.io/create-at", ANY, "when the twin creates the object (simulated time from the start)",
               "30m", parse_duration),
    Annotation("kubetwin.io/delete-at", ANY, "when the twin deletes the object", "6h", parse_duration),
    Annotation("kubetwin.io/duration", POD, "how long the pod's containers run before they exit 0 "
               "(controllers/kubelet.py); without it (and without training annotations) a pod runs until the end",
               "2h", parse_duration, pod=True),
    Annotation("kubetwin.io/fail-after", POD, "the containers exit (code 1, or kubetwin.io/exit-code) this long "
               "after they start (the restart policy and the Job's backoffLimit/podFailurePolicy decide what "
               "follows)", "20m", parse_duration, pod=True),
    Annotation("kubetwin.io/exit-code", POD, "the exit code of a kubetwin.io/fail-after failure (default 1), as "
               "podFailurePolicy onExitCodes rules read it from the terminated container", "42", _exit_code,
               pod=True),
    Annotation("kubetwin.io/checkpoint-interval", POD, "the pod saves its progress this often; a restarted pod "
               "resumes from its last checkpoint (without it a stopped pod's work is lost)", "30m",
               parse_positive_duration, pod=True),
    Annotation("kubetwin.io/elapsed", ("Pod",), "how long the pod's containers had already run when the run "
               "starts (a running pod of an imported cluster, kubetwin import): its kubetwin.io/duration counts "
               "from its real start, and its checkpoints fall where they would have", "1h55m", parse_duration),
    Annotation("kubetwin.io/cluster-creation-timestamp", ("Workload",), "when the Workload was created in the "
               "cluster a dump came from (kubetwin import writes it: everything the import creates is created at "
               "t=0); Kueue queues pending Workloads by it, so they keep the FIFO order they had",
               "2026-12-01T09:30:00Z", _rfc3339),
    Annotation("kubetwin.io/gpu-util", POD, "the fraction of a whole GPU the pod keeps busy alone; sharing a GPU "
               "(time-slicing, MPS, MIG) slows it down by the sum over the GPU (devices/gpuruntime.py)", "0.3",
               _fraction, pod=True),
    Annotation("kubetwin.io/gpu-memory", POD, "the GPU memory the pod uses; over a shared GPU's memory the pod "
               "fails with a GPU OOM", "12Gi", _nonnegative_quantity, pod=True),
    Annotation("kubetwin.io/ready-after", POD, "a model server's startup time (image pull, weight load and engine "
               "init) instead of the cold-start model (serving/modelserver/coldstart.py)", "90s", parse_duration,
               pod=True),
    Annotation("alibabacloud.com/gpu-milli", POD, "open-gpu-share: thousandths of one GPU the pod takes "
               "(1-1000), with a Scenario gpuPlacementPolicy", "300", pod=True, checked_by="validation/validate.py"),
    Annotation("alibabacloud.com/gpu-count", POD, "open-gpu-share: GPUs the pod takes (1-8; 1 when it shares one)",
               "1", pod=True, checked_by="validation/validate.py"),
    Annotation("kubetwin.io/router", POOLS, "the pool's routing policy (a preset of serving/router/presets.py); "
               "default epp for an InferencePool, round-robin for a Service", "round-robin",
               checked_by="validation/serving.py"),
    Annotation("kubetwin.io/request-ttl", POOLS, "how long the gateway holds a request no endpoint can take before "
               "it answers 503 (default 10m, a twin assumption)", "10m", parse_duration),
    Annotation("kubetwin.io/slo-ttft", POOLS, "the pool's time-to-first-token objective for SLO attainment in "
               "summary.json (default 2s)", "2s", parse_duration),
    Annotation("kubetwin.io/slo-tpot", POOLS, "the pool's time-per-output-token objective (default 200ms)", "200ms",
               parse_duration),
    Annotation("kubetwin.io/data-size", ("GCPDataSource",), "the bytes the GKE Volume Populator copies (the twin "
               "cannot list the bucket)", "2Ti", checked_by="validation/volume.py"),
    Annotation("kubetwin.io/gpu-index", ("Pod",), "which GPUs of its node a pod got under a gpuPlacementPolicy",
               "0,3", written=True),
    Annotation("kubetwin.io/hourly-price-usd", ("Node", "NodePool"), "on a NodePool: what one of its nodes costs "
               "per hour (USD), over the catalog's price (a negotiated one), required where the catalog has none "
               "(Ironwood); on a Node: the price the twin bills it at (written from the catalog or its pool)",
               "3.672", _positive_price),
    Annotation("kubetwin.io/adopt-nodes", ("NodePool",), "the pool's first nodes are the scenario's Nodes labelled "
               "cloud.google.com/gke-nodepool with its name in its zones (an imported cluster's, kubetwin import): "
               "they are its VMs from t=0, as they are, and only the rest of nodeCount boots", "\"true\"", _bool),
    Annotation("kubetwin.io/autoprovisioned", ("NodePool",), "written by the cluster autoscaler on a pool node "
               "auto-provisioning created (GKE's NodePool autoscaling.autoprovisioned): it deletes the pool once it "
               "has been empty for 10 minutes (a twin assumption)", "\"true\"", _bool),
]
REGISTRY: dict[str, Annotation] = {}
# Labels (not annotations) in the twin's prefix: the node labels NodePool sets from its spec
# (workloads/network.py), the NodePool label that turns on the NVIDIA DRA driver's DynamicMIG
# (devices/dra/nvidia.py), and the node label naming the Reservation a node's VM consumes (autoscaler/reservations.py).
LABELS = ("kubetwin.io/gvnic", "kubetwin.io/gpudirect", "kubetwin.io/nvidia-dra-dynamic-mig", "kubetwin.io/reservation")


def register(row: Annotation) -> None:
    """Add an annotation (one key, one row); a second row for a key is a programming error."""
    if row.key in REGISTRY:
        raise ValueError(f"annotation {row.key} is registered twice")
    REGISTRY[row.key] = row


for _row in _ROWS:
    register(_row)


def _training_rows() -> list[Annotation]:
    """training.kubetwin.io/* (workloads/training_spec.py validates them together: required keys, parallelism)."""
    from kubetwin.workloads import training_spec

    # a Kubeflow TrainJob's too: its JobSet's pods read them (workloads/training_hook.py)
    return [Annotation(training_spec.PREFIX + key, (*POD, "TrainJob"), training_spec.DOCS[key][1],
                       training_spec.DOCS[key][0],
                       checked_by="workloads/training_spec.py")
            for key in (*training_spec.KEYS, *training_spec.GANG_KEYS)]


def rows() -> list[Annotation]:
    """Every registered annotation, sorted by key."""
    return list(_by_key(len(REGISTRY)).values())


@functools.lru_cache(maxsize=1)
def _by_key(registered: int) -> dict[str, Annotation]:
    """key -> row, sorted by key; built once per registry size (validate asks for every manifest)."""
    out = {r.key: r for r in _training_rows()}
    out.update(REGISTRY)
    return {k: out[k] for k in sorted(out)}


def annotation_sets(obj: dict) -> list[tuple[str, dict, bool]]:
    """(field prefix, annotations, is it a pod's or pod template's) for each metadata of the object the twin reads:
    its own, its pod templates' and the templates between (a JobSet's Job templates)."""
    def anns(holder: object) -> object:
        meta = holder.get("metadata") if isinstance(holder, dict) else None
        return meta.get("annotations") if isinstance(meta, dict) else None

    kind = obj.get("kind")
    sets: list[tuple[str, object, bool]] = [("metadata", anns(obj), kind == "Pod")]
    for t in kinds.pod_templates(obj):
        if t.path:  # a Pod's template is the Pod itself
            sets += [(f"{path}.metadata", anns(parent), False) for path, parent in t.parents]
            sets.append((t.at("metadata"), anns(t.template), kind in POD))
    return [(p, a, pod) for p, a, pod in sets if isinstance(a, dict) and a]


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """Each registered annotation's value must parse; pod annotations belong where pods get them; a misspelt
    kubetwin.io/ key gets the closest real one."""
    out: list[Diagnostic] = []
    known = _by_key(len(REGISTRY))
    line = m.line_of  # looked up only for a finding (a JSON dump's lines are found when asked: api/jsonfast.py)
    for prefix, anns, on_pod in annotation_sets(m.obj):
        for key in sorted(anns):
            field = f'{prefix}.annotations["{key}"]'
            where = f"{prefix}.annotations.{key}"
            row = known.get(key)
            if row is None:
                if key.startswith("kubetwin.io/"):
                    close = difflib.get_close_matches(key, [k for k in known if k.startswith("kubetwin.io/")], n=1)
                    out.append(Diagnostic(m.file, line(where), m.ref, field, f"unknown twin annotation {key}: the twin "
                                          "does not read it", f"did you mean {close[0]}?" if close else
                                          "see `python -m kubetwin.validation.annotations --markdown`", "notice"))
                continue
            if row.written:
                out.append(Diagnostic(m.file, line(where), m.ref, field, f"{key} is written by the twin; the value set "
                                      "here is replaced", "remove it", "notice"))
                continue
            if row.parse is not None:
                raw = anns[key]
                try:
                    row.parse(str(raw))
                except (ValueError, OverflowError) as exc:
                    out.append(Diagnostic(m.file, line(where), m.ref, field, f'Invalid value: "{shown(raw)}": {exc}',
                                          f"e.g. {key}: \"{row.example}\" ({row.meaning})"))
                    continue
            if row.pod and not on_pod and m.kind in POD and not key.startswith("training.kubetwin.io/"):
                out.append(Diagnostic(m.file, line(where), m.ref, field, f"{key} is read from the pod: on the "
                                      f"{m.kind}'s own metadata it has no effect",
                                      "move it to the pod template's metadata.annotations", "notice"))
            elif "*" not in row.kinds and m.kind not in row.kinds:
                out.append(Diagnostic(m.file, line(where), m.ref, field, f"{key} is read from "
                                      f"{', '.join(row.kinds)} objects: on a {m.kind} it has no effect",
                                      "remove it, or put it on the object that reads it", "notice"))
    return out


def markdown() -> str:
    """docs/scenarios.md's annotation table."""
    lines = ["| annotation | on | value (example) | meaning |", "|---|---|---|---|"]
    for r in rows():
        on = "any object" if r.kinds == ANY else ", ".join(r.kinds) + (" (pod template)" if r.pod else "")
        meaning = r.meaning + (" — written by the twin" if r.written else "")
        example = f"`{r.example}`" if r.example else ""
        lines.append(f"| `{r.key}` | {on} | {example} | {meaning} |")
    return "\n".join(lines) + "\n"


def table_main(table: Callable[[], str], description: str, page: str, argv: list[str] | None = None) -> None:
    """`python -m MODULE --markdown`: print a generated docs table (`page` names where it lives)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--markdown", action="store_true", help=f"print {page}'s table (the default)")
    parser.parse_args(argv)
    print(table(), end="")


def main(argv: list[str] | None = None) -> None:
    table_main(markdown, "The twin's annotations.", "docs/scenarios.md", argv)


if __name__ == "__main__":
    main()
