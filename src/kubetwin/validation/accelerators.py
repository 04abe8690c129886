"""Which workload runs on which accelerator device kind, and what the twin does with each pair: the support matrix.

Every pair of a workload (vLLM, TGI, Triton, SGLang, training DDP / FSDP / JAX) and a device kind a container can
get (devices/container.py: a whole GPU, a MIG instance, a time-slicing or MPS share, TPU chips of a single- or
multi-host slice) is one `Cell`: modelled (and by what, with its source), refused at validate (an error: the run
refuses it too), or run with a notice that says what the twin does instead (validate's notice, repeated in the run
summary's notices). `check` classifies each pod template of the scenario and gives that cell's diagnostic;
docs/devices.md's table is generated from MATRIX (`python -m kubetwin.validation.accelerators --markdown`), and a test
fails when the page is not the generated one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation.annotations import table_main

WORKLOADS = ("vLLM", "TGI", "Triton", "SGLang", "training DDP", "training FSDP", "training JAX")
DEVICES = ("whole GPU", "MIG", "time-slicing", "MPS", "TPU single-host", "TPU multi-host")
MODELLED, REFUSED, NOTICE = "modelled", "refused", "notice"


@dataclass(frozen=True)
class Cell:
    status: str  # modelled | refused | notice
    text: str  # what the twin does (modelled: with its source; refused / notice: the diagnostic's message)


_SERVER_GPU = {
    "whole GPU": Cell(MODELLED, "engine sized on the GPU's memory, start-up checks in the server's order and words "
                      "(serving/modelserver/sizing.py; vLLM V1 engine core, TGI's launcher defaults)"),
    "MIG": Cell(MODELLED, "the instance's memory and compute slices / 7; one MIG instance per CUDA process, so "
                "tensor parallelism over two instances exits at start (NVIDIA MIG user guide, CUDA device "
                "enumeration; vLLM gpu_worker.py / TGI dist.py assertions)"),
    "time-slicing": Cell(MODELLED, "the whole GPU's memory less what other tenants hold (vLLM's free-memory check), "
                         "the tenants' summed load slows the engine (GKE time-sharing, devices/gpuruntime.py)"),
    "MPS": Cell(MODELLED, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = the GPU's memory / clients (GKE MPS), time shared "
                "with the other clients (devices/gpuruntime.py)"),
}
_SERVER_TPU = Cell(REFUSED, "{server} on TPU: the twin has no serving performance model for TPUs (vLLM's TPU "
                   "backend, TGI on optimum-tpu); serve it on GPUs to simulate it")
_TRITON = ("its vLLM or TensorRT-LLM backend's engine from the model repository's config.pbtxt / model.json "
           "mounted from ConfigMaps (serving/modelserver/triton_args.py; TensorRT-LLM timed as vLLM), as vLLM's: ")
_TRITON_TPU = ("Triton on TPU: the twin has no serving performance model for TPUs (Triton's TPU support is not "
               "modelled); serve it on GPUs to simulate it")
_UNSIMULATED = Cell(NOTICE, "{server} is not a model server the twin simulates: its pods run and hold their "
                    "{device}, but serve no requests (requests a pool sends them are answered 503)")
_TRAIN_GPU = {
    "whole GPU": Cell(MODELLED, "step time from the GPU's bf16 peak x MFU, NCCL collectives, CUDA out of memory in "
                      "PyTorch's words (workloads/training.py, memory.py: ZeRO's 16 bytes/param)"),
    "MIG": Cell(MODELLED, "the instance's memory and compute slices / 7 of the GPU's peak; a process given two "
                "instances sees one, so its second local rank fails (invalid device ordinal; NVIDIA MIG user guide)"),
    "time-slicing": Cell(NOTICE, "training on a time-sliced GPU: each rank gets the whole GPU's memory (other "
                         "tenants' memory is not counted against it) and its speed is shared by kubetwin.io/gpu-util; "
                         "the twin does not model the tenants' memory contention"),
    "MPS": Cell(MODELLED, "the rank's memory is MPS's pinned per-client limit (GKE MPS), its time shared with the "
                "other clients (devices/gpuruntime.py)"),
}
_TRAIN_TPU = {
    "TPU single-host": Cell(MODELLED, "each chip's HBM less the runtime's reservation, XLA's RESOURCE_EXHAUSTED out "
                            "of memory, GKE's TPU metrics (duty_cycle, memory_used, memory_total)"),
    "TPU multi-host": Cell(MODELLED, "as single-host, every host of the slice one worker (its completion index) of "
                           "one gang (workloads/gang.py: jax.distributed.initialize's timeout)"),
}
_JAX_ON_GPU = Cell(NOTICE, "JAX on a GPU ({device}): the twin models the rank as PyTorch's (the same step model; "
                   "its out of memory in PyTorch's words, not XLA's)")

MATRIX: dict[tuple[str, str], Cell] = {}
for _w in WORKLOADS:
    for _d in DEVICES:
        if _w in ("vLLM", "TGI"):
            cell = _SERVER_GPU.get(_d) or Cell(REFUSED, _SERVER_TPU.text.replace("{server}", _w))
        elif _w == "Triton":
            cell = (Cell(MODELLED, _TRITON + _SERVER_GPU[_d].text) if _d in _SERVER_GPU
                    else Cell(REFUSED, _TRITON_TPU))
        elif _w == "SGLang":
            cell = Cell(NOTICE, _UNSIMULATED.text.replace("{server}", _w).replace(
                "{device}", "TPU chips" if _d.startswith("TPU") else _d if _d != "whole GPU" else "GPUs"))
        elif _d.startswith("TPU"):
            cell = _TRAIN_TPU[_d]
        elif _w == "training JAX":
            cell = Cell(NOTICE, _JAX_ON_GPU.text.replace("{device}", _d))
        else:
            cell = _TRAIN_GPU[_d]
        MATRIX[(_w, _d)] = cell


def markdown() -> str:
    """docs/devices.md's table: one row per workload, one column per device kind, no empty cell."""
    lines = ["| workload | " + " | ".join(DEVICES) + " |", "|---" * (len(DEVICES) + 1) + "|"]
    for w in WORKLOADS:
        cells = []
        for d in DEVICES:
            c = MATRIX[(w, d)]
            label = {MODELLED: "**modelled**", REFUSED: "**refused at validate**", NOTICE: "**runs with a notice**"}
            cells.append(f"{label[c.status]}: {c.text}")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---- classifying a pod template ---------------------------------------------------------------------------------

def _strings(container: dict) -> str:
    parts = [container.get("image")] + list(container.get("command") or []) + list(container.get("args") or [])
    return " ".join(str(p) for p in parts if p is not None).lower()


def workload(spec: dict, annotations: dict) -> str | None:
    """The workload a pod template runs, as the table names it; None for anything else."""
    from kubetwin.serving.modelserver.recognize import ModelServerError, inspect_model_server, server_kind
    from kubetwin.workloads.training_spec import has_training

    if server_kind(spec) == "triton":
        return "Triton"
    try:
        found = inspect_model_server(spec, "spec")
    except ModelServerError:
        found = None
    if found is not None:
        args = found[1]
        return "TGI" if args is not None and args.engine == "tgi" else "vLLM" if args is not None else None
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    text = " ".join(_strings(c) for c in containers)
    if "tritonserver" in text:
        return "Triton"
    if "sglang" in text:
        return "SGLang"
    if not has_training(annotations):
        return None
    if str(annotations.get("training.kubetwin.io/launcher", "")) == "jax" or "jax" in text:
        return "training JAX"
    return "training FSDP" if str(annotations.get("training.kubetwin.io/fsdp", "")).lower() == "true" \
        else "training DDP"


def _requests(spec: dict, resource: str) -> int:
    from kubetwin.api.podresources import pod_requests

    try:
        return int(pod_requests({"spec": spec}).get(resource) or 0)
    except (TypeError, ValueError):
        return 0


def pool_node_labels(manifests: list[Manifest]) -> list[dict[str, str]]:
    """The labels GKE gives the nodes of each NodePool of the scenario (autoscaler/nodepool.py's, as the run's
    nodes get them): what validate matches a pod template's nodeSelector against to know the devices its container
    gets (devices/container.on_pools). A pool that does not validate is left out (nodepool validation reports it)."""
    from kubetwin import catalog
    from kubetwin.autoscaler.nodepool import node_labels_and_taints

    out = []
    for m in manifests:
        if m.kind != "NodePool" or not isinstance(m.obj.get("spec"), dict):
            continue
        spec = m.obj["spec"]
        try:
            mt = catalog.machine_type(str(spec.get("machineType")))
            zones = spec.get("zones") or [""]
            pool = {"metadata": {"name": (m.obj.get("metadata") or {}).get("name", "")}, "spec": spec}
            labels, _ = node_labels_and_taints(pool, mt, str(zones[0]), "validate")
        except (catalog.CatalogError, KeyError, TypeError, AttributeError, ValueError, IndexError):
            continue
        out.append({str(k): str(v) for k, v in labels.items()})
    return out


@dataclass(frozen=True)
class Pools:
    """The scenario's NodePools as validate reads them for every pod template: their nodes' labels, and the TPU
    topologies they make (read once per scenario, not once per template)."""

    labels: list[dict[str, str]]
    topologies: frozenset[str]

    @classmethod
    def of(cls, manifests: list[Manifest]) -> Pools:
        return cls(pool_node_labels(manifests), frozenset(
            t for m in manifests if m.kind == "NodePool" and (t := _pool_topology(m))))


def device_kind(pools: Pools, spec: dict) -> str | None:
    """The device kind a pod template's containers get, from its nodeSelector and the scenario's NodePools (the
    kind every pool it can land on gives; a whole GPU when they differ); None without accelerators."""
    from kubetwin.devices import container, sharing, tpu

    raw = spec.get("nodeSelector")
    selector: dict = raw if isinstance(raw, dict) else {}
    gpus, chips = _requests(spec, container.GPU_RESOURCE), _requests(spec, container.TPU_RESOURCE)
    if chips:
        topology = str(selector.get(tpu.TOPOLOGY_LABEL) or "")
        if not topology:
            topology = next(iter(pools.topologies)) if len(pools.topologies) == 1 else ""
        try:
            multi = bool(topology) and tpu.chips(topology) > chips
        except tpu.TopologyError:
            multi = False
        return "TPU multi-host" if multi else "TPU single-host"
    if not gpus:
        return None
    found = {got.kind for got in container.on_pools(pools.labels, selector, gpus, 0)}
    if not found:
        strategy = str(selector.get(sharing.STRATEGY_LABEL) or "")
        found = {"time-slicing" if strategy == "time-sharing" else strategy or "gpu"}
    kind = next(iter(found)) if len(found) == 1 else "gpu"
    return {"mig": "MIG", "mps": "MPS", "time-slicing": "time-slicing"}.get(kind, "whole GPU")


def _pool_topology(m: Manifest) -> str:
    from kubetwin import catalog
    from kubetwin.devices import tpu

    raw = m.obj.get("spec")
    spec: dict = raw if isinstance(raw, dict) else {}
    try:
        return tpu.pool_topology(spec) or ""
    except (catalog.CatalogError, KeyError, TypeError, AttributeError):  # nodepool validation reports a bad pool
        return ""


def check(manifests: list[Manifest]) -> list[Diagnostic]:
    """The refusal or notice of each pod template's (workload, device kind) cell; nothing for a modelled one."""
    out: list[Diagnostic] = []
    pools = Pools.of(manifests)
    for m in manifests:
        if not isinstance(m.obj, dict) or m.kind == "PodTemplate":
            continue
        for ref in kinds.pod_templates(m.obj):
            annotations: dict = dict((m.obj.get("metadata") or {}).get("annotations") or {})
            for _, parent in ref.parents:  # outermost first, as the training hook merges them
                annotations.update(((parent.get("metadata") or {}).get("annotations")) or {})
            annotations.update(ref.metadata.get("annotations") or {})
            w = workload(ref.spec, annotations)
            d = device_kind(pools, ref.spec) if w is not None else None
            if w is None or d is None:
                continue
            cell = MATRIX[(w, d)]
            if cell.status == MODELLED:
                continue
            field = ref.at("spec.containers[0]")
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, cell.text,
                                  "see docs/devices.md for what the twin models on each device kind",
                                  "error" if cell.status == REFUSED else "notice"))
    return out


def shared_gpu_requests(manifests: list[Manifest]) -> list[Diagnostic]:
    """A warning for a container asking for more than one nvidia.com/gpu in a pod template that can only land on
    time-sharing or MPS nodes (the NodePools its nodeSelector selects): GKE's device plugin refuses the
    allocation, the kubelet fails the pod with UnexpectedAdmissionError, and a Deployment's ReplicaSet replaces it
    at once, again and again (GKE "About GPU sharing strategies": a container can request only one shared GPU)."""
    from kubetwin.devices import container

    out: list[Diagnostic] = []
    pools: Pools | None = None  # read once, at the first container asking for several GPUs
    for m in manifests:
        if not isinstance(m.obj, dict) or m.kind == "PodTemplate":
            continue
        for ref in kinds.pod_templates(m.obj):
            kind = None
            for i, c in enumerate(ref.spec.get("containers") or []):
                res = c.get("resources") if isinstance(c, dict) else None
                want = _requests({"containers": [c]}, container.GPU_RESOURCE) if isinstance(res, dict) else 0
                if want <= 1:
                    continue
                pools = pools or Pools.of(manifests)
                kind = kind or device_kind(pools, ref.spec)
                if kind not in ("time-slicing", "MPS"):
                    break
                strategy = "time-sharing" if kind == "time-slicing" else "mps"
                field = ref.at(f"spec.containers[{i}].resources")
                out.append(Diagnostic(
                    m.file, m.line_of(field), m.ref, field,
                    f"the container asks for {want} nvidia.com/gpu but its pods can only land on {kind} nodes, where "
                    "a container gets at most one shared GPU: the kubelet fails each pod with UnexpectedAdmissionError "
                    "(Pod Allocate failed due to rpc error: code = Unknown desc = [invalid request for sharing GPU "
                    f"({strategy}), at most 1 nvidia.com/gpu can be requested on GPU nodes])"
                    + (" and its controller replaces it again and again" if m.kind in (
                        "Deployment", "ReplicaSet", "StatefulSet") else ""),
                    "ask for nvidia.com/gpu: 1 per container, or select a node pool without GPU sharing", "warning"))
    return out


def mig_resource_requests(manifests: list[Manifest]) -> list[Diagnostic]:
    """A warning for a container asking for `nvidia.com/mig-<profile>` (the NVIDIA device plugin's mixed strategy,
    as NVIDIA's MIG user guide and GPU Operator write it) when no Node of the scenario advertises that resource:
    GKE's device plugin exposes each MIG partition as one `nvidia.com/gpu` (the single strategy) and labels the
    node with its partition size (GKE "Running multi-instance GPUs"), so no GKE node pool has it and the pods stay
    Pending (the scheduler's untolerated nvidia.com/gpu taint or Insufficient nvidia.com/mig-<profile>)."""
    advertised = set()
    for m in manifests:
        if m.kind == "Node" and isinstance(m.obj.get("status"), dict):
            for part in ("capacity", "allocatable"):
                advertised |= set((m.obj["status"].get(part) or {}) if isinstance(m.obj["status"].get(part),
                                                                                  dict) else ())
    out: list[Diagnostic] = []
    for m in manifests:
        if not isinstance(m.obj, dict) or m.kind == "PodTemplate":
            continue
        for ref in kinds.pod_templates(m.obj):
            for i, c in enumerate(ref.spec.get("containers") or []):
                res = c.get("resources") if isinstance(c, dict) else None
                names = set()
                for part in ("limits", "requests"):
                    got = (res or {}).get(part) if isinstance(res, dict) else None
                    names |= {str(k) for k in (got if isinstance(got, dict) else {})}
                for name in sorted(n for n in names if n.startswith("nvidia.com/mig-") and n not in advertised):
                    profile = name.removeprefix("nvidia.com/mig-")
                    field = ref.at(f"spec.containers[{i}].resources")
                    out.append(Diagnostic(
                        m.file, m.line_of(field), m.ref, field,
                        f"no node of the scenario advertises {name}: GKE exposes each MIG partition as one "
                        "nvidia.com/gpu (the device plugin's single strategy) on nodes labelled "
                        "cloud.google.com/gke-gpu-partition-size, so these pods stay Pending",
                        f"ask for nvidia.com/gpu: 1 with nodeSelector cloud.google.com/gke-gpu-partition-size: "
                        f"{profile} (a NodePool with gpuPartitionSize: {profile})", "warning"))
    return out


def main(argv: list[str] | None = None) -> None:
    table_main(markdown, "The twin's workload x device-kind support matrix.", "docs/devices.md", argv)


if __name__ == "__main__":
    main()
