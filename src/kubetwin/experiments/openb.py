"""Alibaba cluster-trace-gpu-v2023 ("openb") node and pod lists, as the FGD paper's simulator reads them.

Columns (alibaba/clusterdata cluster-trace-gpu-v2023/README): nodes `sn,cpu_milli,memory_mib,gpu,model`;
pods `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time` (the multigpu variants carry only the first five). `gpu_milli` is the share of each GPU a pod
uses (1000 = a whole GPU); `gpu_spec` lists the GPU models the pod accepts, separated by `|`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from kubetwin.api.errors import Diagnostic, KubetwinError

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; 1000 for whole GPUs
    gpu_spec: frozenset[str]  # accepted models; empty = any
    creation_time: float | None = None
    deletion_time: float | None = None
    scheduled_time: float | None = None

    @property
    def gpu_request_milli(self) -> int:
        """Total GPU demand in milli-GPUs (what "arrived workload" sums)."""
        return self.num_gpu * self.gpu_milli


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise KubetwinError([Diagnostic(str(path), 0, "trace", "", "no such file",
                                        "give the path of an openb CSV, e.g. ../shared/traces/openb/"
                                        "openb_pod_list_default.csv")])
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise KubetwinError([Diagnostic(str(path), 1, "trace", ",".join(missing), "missing column(s)",
                                            f"the header must name {', '.join(required)}")])
        return [(i + 2, row) for i, row in enumerate(reader)]


def _int(path: Path, line: int, name: str, row: dict[str, str], col: str, default: int | None = None) -> int:
    raw = (row.get(col) or "").strip()
    if not raw and default is not None:
        return default
    try:
        value = int(float(raw))
    except ValueError:
        raise KubetwinError([Diagnostic(str(path), line, name, col, f"not a number: {raw!r}",
                                        "write a non-negative integer")]) from None
    if value < 0:
        raise KubetwinError([Diagnostic(str(path), line, name, col, f"negative value {value}",
                                        "write a non-negative integer")])
    return value


def load_nodes(path: str | Path) -> list[TraceNode]:
    path = Path(path)
    out = []
    for line, row in _rows(path, NODE_COLUMNS):
        name = row["sn"]
        out.append(TraceNode(name, _int(path, line, name, row, "cpu_milli"), _int(path, line, name, row, "memory_mib"),
                             _int(path, line, name, row, "gpu"), (row.get("model") or "").strip()))
    return out


def load_pods(path: str | Path) -> list[TracePod]:
    path = Path(path)
    out = []
    for line, row in _rows(path, POD_COLUMNS):
        name = row["name"]
        num_gpu = _int(path, line, name, row, "num_gpu")
        gpu_milli = _int(path, line, name, row, "gpu_milli", 0)
        if num_gpu and not 0 < gpu_milli <= 1000:
            raise KubetwinError([Diagnostic(str(path), line, name, "gpu_milli",
                                            f"{gpu_milli} is not a share of one GPU",
                                            "gpu_milli is per GPU: 1..1000 when num_gpu > 0")])
        if num_gpu > 1 and gpu_milli != 1000:
            raise KubetwinError([Diagnostic(str(path), line, name, "gpu_milli",
                                            f"a {num_gpu}-GPU pod asks for {gpu_milli} milli of each",
                                            "only single-GPU pods share a GPU; set gpu_milli to 1000")])
        spec = frozenset(m for m in (row.get("gpu_spec") or "").split("|") if m)
        times = [float(_int(path, line, name, row, c)) if (row.get(c) or "").strip() else None
                 for c in ("creation_time", "deletion_time", "scheduled_time")]
        out.append(TracePod(name, _int(path, line, name, row, "cpu_milli"), _int(path, line, name, row, "memory_mib"),
                            num_gpu, gpu_milli if num_gpu else 0, spec, *times))
    return out
