"""The training workload spec: `training.kubetwin.io/*` annotations on a Pod, a Job or JobSet pod template, or the
Job / JobSet itself, from which the twin computes how long a training pod runs (workloads/training.py).

Why annotations: the user keeps the YAML they would `kubectl apply`; the real container ignores them, the twin reads
them instead of a hand-written `kubetwin.io/duration`. A pod carries either `kubetwin.io/duration` or training
annotations, never both (validation says pick one).

Annotations (prefix `training.kubetwin.io/`; required: params, steps, global-batch-size, sequence-length):
- `params`: model parameters, "70e9", "70B", "7.5M", "1.2T".
- `flops-per-token`: training FLOPs per token; default 6 x params (2N forward + 4N backward for a dense
  transformer: Kaplan et al. 2020 "Scaling Laws for Neural Language Models" §2.1; Hoffmann et al. 2022
  (Chinchilla) use C = 6ND).
- `sequence-length` (tokens per sequence), `global-batch-size` (sequences per optimizer step), `steps`.
- `micro-batch-size`: sequences per forward/backward on one data-parallel rank; default 1. Micro-batches per step
  = global-batch-size / (data-parallel x micro-batch-size) (gradient accumulation, pipeline micro-batches).
- `tensor-parallel`, `pipeline-parallel` (default 1), `data-parallel` (default world GPUs / (tp x pp)),
  `fsdp` true/false (ZeRO-3 style sharding of weights, gradients and optimizer state over the data-parallel group).
- `layers` (default 32, twin assumption: Llama-2-7B / Llama-3-8B depth) and `hidden-size` (default
  sqrt(params / (12 x layers)): non-embedding N = 12 x layers x d_model^2, Kaplan et al. 2020 §2.1): they size the
  per-layer tensor-parallel all-reduces and pipeline activations.
- `mfu`: fraction of the accelerator's dense bf16 peak the model's math reaches; default per generation
  (the catalog's training_mfu per GPU, with sources; training.gpu_default_mfu).
- `checkpoint-size`: a quantity ("980Gi"); default params x 14 bytes (bf16 weights 2 + fp32 master weights, Adam
  momentum and variance 4+4+4; ZeRO, Rajbhandari et al. 2020 §3.1 "mixed-precision Adam": 2 + 12 bytes per
  parameter beyond gradients).
- `checkpoint-every`: steps between checkpoints. `kubetwin.io/checkpoint-interval` (seconds of run time) keeps
  working: it is turned into the nearest whole number of steps.
- `checkpoint-path`: a mount path the checkpoints are written to; default `data-path`.
- `dataset-bytes-per-sample` or `dataset-bytes-per-token` (default 4 bytes per token: int32 token ids, twin
  assumption; Megatron's indexed datasets use int32 once the vocabulary passes 65,500 tokens).
- `dataset-files-per-step`: how many files a step opens (default 0: the data sits in a few large shards and only
  bytes count). Small files cost the store a metadata/read operation each (workloads/storage.py: Parallelstore read
  IOPS per TiB, Filestore read IOPS per instance, Cloud Storage FUSE files per second per VM), so a step's read time
  is max(bytes / rate, files / file rate).
- `dataset-size`: a quantity; what a prestage copies. Default: the bytes the job reads (steps x batch x sample).
- `data-path`: a mount path in the pod; the storage behind it is resolved by workloads/storage.py. Without it the
  data is assumed local (no stall).
- `data-loading`: `pipelined` (default: a PyTorch DataLoader with workers prefetches the next batches while the
  GPUs compute), `streaming` (each step waits for its read), `prestaged` (the dataset is copied to local SSD when the
  pod starts; no stall afterwards).

Gang annotations (workloads/gang.py; they may also stand alone on pods that run for `kubetwin.io/duration`):
- `gang`: "true" declares the job's pods a gang (every rank must run before any trains); "false" opts a multi-pod
  job out (independent pods, e.g. a sweep). Default: a gang when the job has more than one pod and carries a
  training spec, runs on a multi-host TPU slice, or starts a multi-node launcher (workloads/gang.py's rule).
- `launcher`: `torchrun` (torch.distributed.elastic, also what DeepSpeed and Megatron jobs run under) or
  `jax` (jax.distributed.initialize): it picks the default timeouts and the error text a failing rank prints.
  Default: the launcher the container's command names, else jax on a TPU slice and torchrun elsewhere
  (workloads/gang.py `launcher_of`).
- `rendezvous-timeout`: how long a started rank waits for the others before it fails (a duration); default 600 s
  for torchrun (c10d rendezvous join_timeout), 300 s for JAX (initialization_timeout).
- `collective-timeout`: how long ranks stall in a collective after a peer is lost before they fail; default 600 s
  for torchrun (init_process_group's NCCL timeout), 100 s for JAX (coordination-service heartbeats).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.k8s.units import UnitError, parse_duration, parse_quantity

PREFIX = "training.kubetwin.io/"
DURATION, CHECKPOINT_INTERVAL = "kubetwin.io/duration", "kubetwin.io/checkpoint-interval"
REQUIRED = ("params", "steps", "global-batch-size", "sequence-length")
INTS = ("steps", "global-batch-size", "sequence-length", "micro-batch-size", "tensor-parallel", "pipeline-parallel",
        "data-parallel", "layers", "hidden-size", "checkpoint-every", "dataset-files-per-step")
COUNTS = ("params", "flops-per-token")  # 70B, 70e9
BYTES = ("checkpoint-size", "dataset-size", "dataset-bytes-per-sample", "dataset-bytes-per-token")
LOADING = ("pipelined", "streaming", "prestaged")
KEYS = (*INTS, *COUNTS, *BYTES, "mfu", "fsdp", "data-path", "checkpoint-path", "data-loading")
GANG_KEYS = ("gang", "launcher", "rendezvous-timeout", "collective-timeout")
# key -> (example, meaning): docs/scenarios.md's annotation table (validation/annotations.py); the module docstring
# has the details
DOCS: dict[str, tuple[str, str]] = {
    "params": ("8B", "model parameters (required)"),
    "steps": ("10000", "optimizer steps the job runs (required)"),
    "global-batch-size": ("512", "sequences per step over all ranks (required)"),
    "sequence-length": ("4096", "tokens per sequence (required)"),
    "micro-batch-size": ("1", "sequences per rank per forward pass (pipeline micro-batches)"),
    "tensor-parallel": ("8", "tensor-parallel degree (default 1)"),
    "pipeline-parallel": ("2", "pipeline stages (default 1)"),
    "data-parallel": ("16", "data-parallel degree (default: the GPUs / (tp x pp))"),
    "fsdp": ("true", "shard weights, gradients and optimizer states (FSDP / ZeRO-3) over the data-parallel ranks"),
    "layers": ("32", "transformer layers (default 32, a twin assumption)"),
    "hidden-size": ("4096", "hidden size, for tensor-parallel and pipeline traffic"),
    "flops-per-token": ("48e9", "training FLOPs per token (default 6 x params)"),
    "mfu": ("0.4", "fraction of the accelerator's bf16 peak the math reaches (default per GPU generation)"),
    "checkpoint-every": ("500", "steps between synchronous checkpoints"),
    "checkpoint-size": ("980Gi", "bytes per checkpoint (default 14 bytes per parameter)"),
    "checkpoint-path": ("/ckpt", "mount path checkpoints are written to (default data-path)"),
    "data-path": ("/data", "mount path of the dataset; its volume decides the read rate"),
    "data-loading": ("pipelined", "pipelined (default), streaming or prestaged"),
    "dataset-size": ("2Ti", "bytes a prestage copies (default: what the job reads)"),
    "dataset-bytes-per-sample": ("4Mi", "bytes read per sample"),
    "dataset-bytes-per-token": ("4", "bytes read per token (default 4: int32 token ids)"),
    "dataset-files-per-step": ("64", "files a step opens (each costs a metadata operation)"),
    "gang": ("true", "every rank must run before any trains (default for multi-pod training jobs, multi-host TPU "
             "slices and multi-node launchers); false opts out"),
    "launcher": ("torchrun", "torchrun or jax (default: the command's launcher, jax on TPU slices, else torchrun): "
                 "the rendezvous' timeouts and error words"),
    "rendezvous-timeout": ("10m", "how long a running rank waits for the others (torchrun 600 s, JAX 300 s)"),
    "collective-timeout": ("10m", "how long ranks stall after a peer is lost (NCCL 600 s, JAX 100 s)"),
}
DEFAULT_LAYERS = 32  # twin assumption: Llama-2-7B / Llama-3-8B depth
DEFAULT_BYTES_PER_TOKEN = 4  # twin assumption: int32 token ids
CHECKPOINT_BYTES_PER_PARAM = 14  # ZeRO (Rajbhandari et al. 2020) §3.1: bf16 weights 2 + fp32 Adam states 12
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGT]?)\s*$")


class SpecError(ValueError):
    """A training annotation with a bad value: `key` (without the prefix), what is wrong, and how to fix it."""

    def __init__(self, key: str, message: str, fix: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key, self.message, self.fix = key, message, fix


@dataclass(frozen=True)
class TrainingSpec:
    """A training job as its annotations describe it; None = derive from the placement or a default."""

    params: float
    steps: int
    global_batch: int
    seq_len: int
    flops_per_token: float
    micro_batch: int = 1
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    fsdp: bool = False
    layers: int = DEFAULT_LAYERS
    hidden: int | None = None
    mfu: float | None = None
    checkpoint_bytes: float | None = None
    checkpoint_every: int | None = None
    checkpoint_interval_s: float | None = None  # kubetwin.io/checkpoint-interval, when checkpoint-every is unset
    bytes_per_sample: float | None = None
    files_per_step: int = 0  # dataset-files-per-step: small files cost a metadata operation each
    dataset_bytes: float | None = None
    data_path: str | None = None
    checkpoint_path: str | None = None
    loading: str = "pipelined"

    @property
    def hidden_size(self) -> int:
        """d_model: given, or from N = 12 x layers x d^2 (Kaplan et al. 2020)."""
        return self.hidden or max(1, round(math.sqrt(self.params / (12 * self.layers))))

    @property
    def checkpoint_size(self) -> float:
        return self.checkpoint_bytes if self.checkpoint_bytes is not None else self.params * CHECKPOINT_BYTES_PER_PARAM

    @property
    def sample_bytes(self) -> float:
        return self.bytes_per_sample if self.bytes_per_sample is not None else self.seq_len * DEFAULT_BYTES_PER_TOKEN


def has_training(annotations: dict | None) -> bool:
    """Whether any `training.kubetwin.io/` annotation of the training spec (not only gang keys) is present."""
    return any(str(k).startswith(PREFIX) and str(k)[len(PREFIX):] not in GANG_KEYS for k in annotations or {})


def has_gang_keys(annotations: dict | None) -> bool:
    """Whether any of the gang annotations is present."""
    return any(str(k)[len(PREFIX):] in GANG_KEYS for k in annotations or {} if str(k).startswith(PREFIX))


def job_pods(job_spec: dict) -> int:
    """The pods a Job runs at once: min(parallelism, completions), parallelism defaulting to 1 and completions to
    parallelism (batch/v1 defaulting) — a training job's ranks."""
    par = int(job_spec.get("parallelism", 1))
    return min(par, int(job_spec.get("completions") or par))


def object_pods(kind: str, spec: dict) -> list[tuple[dict, int]]:
    """(pod spec, how many run at once) per pod template of a Pod, Job or JobSet (each replicated Job x replicas)."""
    if kind == "Pod":
        return [(spec, 1)]
    jobs = [((rj or {}).get("template") or {}).get("spec") or {} for rj in spec.get("replicatedJobs") or []] \
        if kind == "JobSet" else [spec] if kind == "Job" else []
    reps = [int((rj or {}).get("replicas", 1)) for rj in spec.get("replicatedJobs") or []] if kind == "JobSet" \
        else [1] * len(jobs)
    return [(((js.get("template") or {}).get("spec") or {}), r * job_pods(js))
            for js, r in zip(jobs, reps, strict=True)]


@dataclass(frozen=True)
class GangSpec:
    """How a job's ranks meet: declared (None: decide from the job's size), launcher, and its two timeouts (s)."""

    declared: bool | None
    launcher: str
    rendezvous_timeout: float
    collective_timeout: float


# Launcher defaults (seconds):
# torchrun: RendezvousTimeout(join=timedelta(seconds=600)) in torch/distributed/elastic/rendezvous/
#   dynamic_rendezvous.py (the c10d backend's join_timeout); collectives: default_pg_nccl_timeout = 10 min
#   (torch/distributed/constants.py), the timeout init_process_group gives the NCCL watchdog.
# jax: jax.distributed.initialize(initialization_timeout=300) (jax/_src/distributed.py); a lost task is noticed
#   by the coordination service after 10 missed heartbeats 10 s apart (service_heartbeat_interval_seconds=10,
#   service_max_missing_heartbeats=10, same file).
LAUNCHERS = {"torchrun": (600.0, 600.0), "jax": (300.0, 100.0)}


def parse_gang(annotations: dict, launcher: str = "torchrun", rendezvous_timeout: float | None = None) -> GangSpec:
    """The gang keys of merged annotations over the launcher the pod's command names (workloads/gang.py:
    `launcher`, and torchrun's --rdzv-conf join_timeout when it came with that launcher); raises SpecError for a
    bad value."""
    ann = {k[len(PREFIX):]: str(v) for k, v in annotations.items() if str(k).startswith(PREFIX)}
    declared = ann.get("gang")
    if declared is not None and declared.lower() not in ("true", "false"):
        raise SpecError("gang", f'Invalid value: "{declared}": must be "true" or "false"',
                        'write "true" to make every rank wait for the others, "false" for independent pods')
    found = launcher
    launcher = ann.get("launcher", launcher)
    if launcher not in LAUNCHERS:
        raise SpecError("launcher", f'Unsupported value: "{launcher}": supported values: '
                        + ", ".join(f'"{x}"' for x in LAUNCHERS),
                        'use "torchrun" for PyTorch (DeepSpeed, Megatron, FSDP jobs), "jax" for JAX')
    timeouts = list(LAUNCHERS[launcher])
    if rendezvous_timeout is not None and launcher == found and rendezvous_timeout > 0:
        timeouts[0] = rendezvous_timeout
    for i, key in enumerate(("rendezvous-timeout", "collective-timeout")):
        if key in ann:
            try:
                timeouts[i] = parse_duration(ann[key])
            except UnitError:
                timeouts[i] = -1.0
            if timeouts[i] <= 0:
                raise SpecError(key, f'Invalid value: "{ann[key]}": must be a positive duration',
                                'write e.g. "10m" or "1800s"')
    return GangSpec(None if declared is None else declared.lower() == "true", launcher, timeouts[0], timeouts[1])


def _count(key: str, raw: str) -> float:
    m = _COUNT.match(str(raw))
    if not m or not 0 < float(m.group(1)) < 1e30:
        raise SpecError(key, f'Invalid value: "{raw}": must be a positive number, optionally with K, M, B or T',
                        'write e.g. "70B", "70e9" or "7.5M"')
    return float(m.group(1)) * _SCALE[m.group(2)]


def _int(key: str, raw: str) -> int:
    s = str(raw).strip()
    if not s.isdigit() or not 1 <= int(s) <= 2**31 - 1:  # int32, as the API's counts are
        raise SpecError(key, f'Invalid value: "{raw[:40]}": must be a whole number from 1 to 2147483647',
                        f'write e.g. "{key}": "8"')
    return int(s)


def _bytes(key: str, raw: str) -> float:
    try:
        v = float(parse_quantity(str(raw)))
    except UnitError:
        v = -1.0
    if not 0 < v < 1e30:
        raise SpecError(key, f'Invalid value: "{raw}": must be a positive quantity of bytes', 'write e.g. "980Gi"')
    return v


def parse(annotations: dict) -> TrainingSpec:
    """The spec from merged annotations; raises SpecError for the first bad or missing value."""
    ann = {k[len(PREFIX):]: str(v) for k, v in annotations.items() if str(k).startswith(PREFIX)}
    for key in ann:
        if key not in KEYS and key not in GANG_KEYS:
            raise SpecError(key, "unknown training annotation",
                            f"use one of: {', '.join(sorted(KEYS + GANG_KEYS))}")
    for key in REQUIRED:
        if key not in ann:
            raise SpecError(key, "Required value: a training spec needs " + ", ".join(REQUIRED),
                            f'add {PREFIX}{key}')
    if DURATION in annotations:
        raise SpecError("params", f"both {DURATION} and training annotations are set: the twin computes the run "
                        "time from the training spec", f"pick one: remove {DURATION} or the {PREFIX}* annotations")
    ints = {k: _int(k, ann[k]) for k in INTS if k in ann}
    params = _count("params", ann["params"])
    mfu = None
    if "mfu" in ann:
        try:
            mfu = float(ann["mfu"].rstrip("%")) / (100 if ann["mfu"].endswith("%") else 1)
        except ValueError:
            mfu = -1.0
        if not 0 < mfu <= 1:
            raise SpecError("mfu", f'Invalid value: "{ann["mfu"]}": must be a fraction above 0 and at most 1',
                            'write e.g. "0.4" or "40%"')
    fsdp = ann.get("fsdp", "false").lower()
    if fsdp not in ("true", "false"):
        raise SpecError("fsdp", f'Invalid value: "{ann["fsdp"]}": must be "true" or "false"', 'write "true"')
    loading = ann.get("data-loading", "pipelined")
    if loading not in LOADING:
        raise SpecError("data-loading", f'Unsupported value: "{loading}": supported values: '
                        + ", ".join(f'"{x}"' for x in LOADING), 'use "pipelined" unless you measure otherwise')
    for key in ("data-path", "checkpoint-path"):
        if key in ann and not ann[key].startswith("/"):
            raise SpecError(key, f'Invalid value: "{ann[key]}": must be an absolute mount path in the container',
                            "write the volumeMount's mountPath, e.g. /data")
    if "dataset-bytes-per-sample" in ann and "dataset-bytes-per-token" in ann:
        raise SpecError("dataset-bytes-per-token", "both dataset-bytes-per-sample and dataset-bytes-per-token set",
                        "keep one")
    sizes = {k: _bytes(k, ann[k]) for k in BYTES if k in ann}
    per_sample = sizes.get("dataset-bytes-per-sample")
    if "dataset-bytes-per-token" in sizes:
        per_sample = sizes["dataset-bytes-per-token"] * ints["sequence-length"]
    interval = None
    if CHECKPOINT_INTERVAL in annotations and "checkpoint-every" not in ints:
        try:
            interval = parse_duration(annotations[CHECKPOINT_INTERVAL])
        except UnitError:
            interval = None  # validate's duration check reports it
    tp, pp, mb = ints.get("tensor-parallel", 1), ints.get("pipeline-parallel", 1), ints.get("micro-batch-size", 1)
    dp = ints.get("data-parallel")
    if dp is not None and ints["global-batch-size"] % (dp * mb):
        raise SpecError("global-batch-size", f'Invalid value: "{ints["global-batch-size"]}": not a multiple of '
                        f"data-parallel x micro-batch-size = {dp * mb}", "make the global batch divisible")
    return TrainingSpec(
        params=params, steps=ints["steps"], global_batch=ints["global-batch-size"], seq_len=ints["sequence-length"],
        flops_per_token=_count("flops-per-token", ann["flops-per-token"]) if "flops-per-token" in ann else 6 * params,
        micro_batch=mb, tp=tp, pp=pp, dp=dp, fsdp=fsdp == "true", layers=ints.get("layers", DEFAULT_LAYERS),
        hidden=ints.get("hidden-size"), mfu=mfu, checkpoint_bytes=sizes.get("checkpoint-size"),
        checkpoint_every=ints.get("checkpoint-every"), checkpoint_interval_s=interval, bytes_per_sample=per_sample,
        files_per_step=ints.get("dataset-files-per-step", 0), dataset_bytes=sizes.get("dataset-size"),
        data_path=ann.get("data-path"),
        checkpoint_path=ann.get("checkpoint-path") or ann.get("data-path"), loading=loading)


def _chains(obj: dict) -> list[list[tuple[str, dict]]]:
    """The annotation sets a pod of this object inherits, outermost first (the twin merges them at run time:
    training_hook.py): a Pod's own; a Job's metadata then pod template; a JobSet's metadata, then each replicated
    Job template's, then its pod template's (one list per pod template, api.kinds.pod_templates)."""
    def anns(m: object) -> dict:
        a = ((m if isinstance(m, dict) else {}).get("metadata") or {}).get("annotations") or {}
        return a if isinstance(a, dict) else {}

    top = ("metadata", anns(obj))
    chains = [[top, *((f"{p}.metadata", anns(h)) for p, h in t.parents), (t.at("metadata"), anns(t.template))]
              for t in kinds.pod_templates(obj) if t.path]
    return chains or [[top]]


def diagnostics(m: Manifest, pools: list[dict[str, str]] | tuple = ()) -> list[Diagnostic]:
    """Validation hook (validation/validate.py): the annotations each pod of the object ends up with must parse as a
    training spec when any of them is a training annotation; the error points at the set holding the bad key.
    `pools`: the scenario's NodePools' node labels, for the memory check on the device the pods get."""
    out: list[Diagnostic] = []
    chains = _chains(m.obj)
    from kubetwin.workloads import gang  # imports this module

    out += gang.diagnostics(m, chains)  # the gang rule reads annotations, TPU slices and launchers itself
    for chain in chains:
        merged = {k: v for _, a in chain for k, v in a.items()}
        if not has_training(merged) and not has_gang_keys(merged):
            continue
        try:
            parse_gang(merged)
            spec = parse(merged) if has_training(merged) else None
        except SpecError as exc:
            key = DURATION if exc.fix.startswith("pick one") else PREFIX + exc.key
            holder = next((p for p, a in reversed(chain) if key in a), None)
            field = f'{holder}.annotations["{key}"]' if holder else f"{chain[-1][0]}.annotations"
            line = m.line_of(f"{holder or chain[-1][0]}.annotations")
            d = Diagnostic(m.file, line, m.ref, field, exc.message, exc.fix)
            if d not in out:
                out.append(d)
            continue
        if spec is not None:
            from kubetwin.workloads import memory  # imports this module

            holder = next(p for p, a in reversed(chain) if PREFIX + "params" in a)
            for d in memory.diagnostics(m, spec, f'{holder}.annotations["{PREFIX}params"]',
                                        m.line_of(f"{holder}.annotations"), pools):
                if d not in out:
                    out.append(d)
    return out
