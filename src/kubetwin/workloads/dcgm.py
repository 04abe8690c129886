"""DCGM exporter series for training pods (GKE's TPU metrics for TPU pods): what Grafana would show for a job the
step-time model describes.

Why: a user diagnoses a slow job from dcgm-exporter dashboards, not from a step breakdown. The twin derives each GPU's
steady-state gauges from the job's StepTime (workloads/training.py) so a data-starved job shows low
DCGM_FI_DEV_GPU_UTIL, and a network-bound one a GPU_UTIL that stays high (NCCL kernels spin while they wait) over a
low DCGM_FI_PROF_SM_ACTIVE / PIPE_TENSOR_ACTIVE: the signature operators look for.

Names, types and help text: NVIDIA/dcgm-exporter etc/dcp-metrics-included.csv@084a245 (DCGM_FI_DEV_GPU_UTIL,
DCGM_FI_DEV_FB_USED, DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, DCGM_FI_PROF_PCIE_RX_BYTES;
DCGM_FI_PROF_NVLINK_TX_BYTES is the DCGM profiling field of the same family, off in that csv). Labels, in the
exporter's order: gpu, UUID, device, modelName, Hostname (internal/pkg/rendermetrics/render_metrics.go@1f7abdb),
then the pod mapper's container, namespace, pod (its Kubernetes attributes "pod", "namespace", "container").

Per GPU, over one step cycle of `total` seconds (compute + bubble + exposed comm + data stall + amortized checkpoint):
- GPU_UTIL (%) = 100 x (compute + exposed comm) / total: NVML's "a kernel was running" share; the pipeline bubble,
  data stall and a synchronous checkpoint write run no kernel.
- SM_ACTIVE = (compute x SM_ACTIVE_COMPUTE + exposed comm x NCCL_CTAS / SMs) / total: NCCL runs one CTA per channel,
  on a few SMs only.
- PIPE_TENSOR_ACTIVE = MFU x compute / total = model FLOPs / (peak x total): the tensor pipe is busy in proportion to
  the FLOP rate it sustains (twin assumption).
- FB_USED (MiB) = one rank's model states, activations and context as workloads/memory.py counts them, capped at
  the GPU's NVML memory (a rank that does not fit fails at start with CUDA out of memory instead).
- NVLINK_TX_BYTES (B/s): the intra-node share of the step's collectives (ring factors as in collectives.py).
- PCIE_RX_BYTES (B/s): the rank's input batch plus what it receives from other nodes (NIC -> GPU crosses PCIe with
  or without GPUDirect).
Values are steady-state averages over a step cycle, as a 15-60 s scrape of a job stepping every second sees them;
while a pod copies its dataset or reads its checkpoint back (Work.setup / restart), waits for its gang's other ranks
at the rendezvous, or stalls in a collective after a peer was lost (workloads/gang.py), the GPU runs no kernel: the
idle gauges (GPU_UTIL 0) while the pod still holds, and bills, its GPUs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from kubetwin import catalog
from kubetwin.api.podresources import container_limits
from kubetwin.devices.container import DeviceView, for_container
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.k8s.names import GKE_ACCELERATOR, GKE_TPU_ACCELERATOR, GKE_TPU_TOPOLOGY, GPU, TPU
from kubetwin.prometheus import exposition
from kubetwin.store.store import Obj, Store
from kubetwin.workloads.memory import CONTEXT_MIB, capacity_mib, device_oom, gpu_memory_mib, used_mib
from kubetwin.workloads.training import BF16, Placement, StepTime
from kubetwin.workloads.training_spec import TrainingSpec

GPU_UTIL, SM_ACTIVE, TENSOR_ACTIVE = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
FB_USED, NVLINK_TX, PCIE_RX = "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"
FIELDS = (GPU_UTIL, SM_ACTIVE, TENSOR_ACTIVE, FB_USED, NVLINK_TX, PCIE_RX)
SERVER_FIELDS = (GPU_UTIL, FB_USED)  # what the twin derives for a model server's GPUs (see _sample_server)
HELP = {GPU_UTIL: "GPU utilization (in %).", SM_ACTIVE: "The ratio of cycles an SM has at least 1 warp assigned.",
        TENSOR_ACTIVE: "Ratio of cycles the tensor (HMMA) pipe is active.",
        FB_USED: "Framebuffer memory used (in MiB).",
        NVLINK_TX: "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
        PCIE_RX: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - "
                 "in bytes per second."}
SM_ACTIVE_COMPUTE = 0.9  # large GEMM grids cover every SM; launch gaps and small kernels the rest: twin assumption
NCCL_CTAS = 16  # NCCL channels (one CTA each) a collective occupies; varies by version and topology: twin assumption
DEFAULT_SMS = 132  # SMs of a GPU the catalog does not know (an H100's; twin assumption). Known GPUs: catalog `sms`
ACCEL = GKE_ACCELERATOR


def sms_of(gpu: str) -> int:
    """The GPU's streaming multiprocessors, from the catalog (DEFAULT_SMS for one it does not know)."""
    try:
        return catalog.gpu_type(gpu).sms or DEFAULT_SMS
    except catalog.CatalogError:
        return DEFAULT_SMS


@dataclass(frozen=True)
class GpuMetrics:
    """One GPU's steady-state DCGM gauges while its pod trains (see the module docstring)."""

    gpu_util: float
    sm_active: float
    tensor_active: float
    fb_used_mib: float
    nvlink_tx: float
    pcie_rx: float
    fits: bool = True  # model states + activations fit in the GPU's memory (FB_USED is capped at it)

    def values(self) -> dict[str, float]:
        return {GPU_UTIL: self.gpu_util, SM_ACTIVE: self.sm_active, TENSOR_ACTIVE: self.tensor_active,
                FB_USED: self.fb_used_mib, NVLINK_TX: self.nvlink_tx, PCIE_RX: self.pcie_rx}


def fb_used(spec: TrainingSpec, st: StepTime, gpu: str, device: DeviceView | None = None) -> tuple[float, bool]:
    """(MiB used, fits): model states + activations + context (workloads/memory.py) on the rank's device as its
    container sees it (a MIG instance's memory, an MPS client's share), capped at that device's memory; `fits` is
    the run's own check (memory.device_oom), so explain and the run agree."""
    cap = capacity_mib(device, gpu)
    mib = used_mib(spec, st.dp)
    return round(min(mib, cap), 1), device_oom(spec, st.dp, device, gpu) is None


def steady_state(spec: TrainingSpec, placement: Placement, st: StepTime) -> GpuMetrics:
    """The gauges of any GPU of the job (every rank does the same work per step in this model)."""
    node = placement.nodes()[0] if placement.pods else {}
    gpu = str(((node.get("metadata") or {}).get("labels") or {}).get(ACCEL, ""))
    total = st.total
    if total <= 0:
        return GpuMetrics(0.0, 0.0, 0.0, CONTEXT_MIB, 0.0, 0.0)
    comm = st.exposed_comm
    mfu = spec.mfu or placement.default_mfu
    sms = sms_of(gpu)
    per_node = max(1, min(placement.ranks_on(placement.nodes()))) if placement.pods else 1
    n_nodes = max(1, len(placement.nodes()))
    tp, m = spec.tp, st.microbatches
    shard = BF16 * spec.params / (tp * spec.pp)
    act = spec.micro_batch * spec.seq_len * spec.hidden_size * BF16
    dp_local = max(1, per_node // tp) if tp <= per_node else 1  # DP ranks of one node (TP fastest)
    dp_nodes = max(1, st.dp // dp_local)
    dp_bytes = (m * 3 * shard) if spec.fsdp else 2 * shard  # 2 all-gathers + reduce-scatter per mb, or 1 all-reduce
    nvlink = 0.0
    if tp > 1 and tp <= per_node:
        nvlink += 4 * math.ceil(spec.layers / spec.pp) * m * 2 * (tp - 1) / tp * act
    if st.dp > 1 and dp_local > 1:
        nvlink += dp_bytes * (dp_local - 1) / dp_local
    rx = spec.global_batch * spec.sample_bytes / max(1, st.dp)
    if dp_nodes > 1:
        rx += dp_bytes * (dp_nodes - 1) / dp_nodes / dp_local
    if spec.pp > 1 and n_nodes > 1:
        rx += 2 * m * act
    fb, fits = fb_used(spec, st, gpu, placement.device)
    return GpuMetrics(round(100 * (st.compute + comm) / total, 2),
                      round((st.compute * SM_ACTIVE_COMPUTE + comm * min(1.0, NCCL_CTAS / sms)) / total, 4),
                      round(mfu * st.compute / total, 4), fb, round(nvlink / total), round(rx / total), fits)


def idle(gpu: str) -> GpuMetrics:
    """A GPU whose pod runs but has not started stepping (dataset copy, checkpoint read back)."""
    return GpuMetrics(0.0, 0.0, 0.0, float(min(CONTEXT_MIB, gpu_memory_mib(gpu))), 0.0, 0.0)


class DcgmExporter:
    """Samples every Running GPU pod of a training job, and of a model server when `servers` (serving's data plane)
    is set, each `interval` (the run's sampleInterval), as Prometheus would scrape a dcgm-exporter DaemonSet;
    `finish` gives the per-pod time series and the exposition. `model` is None in a run without training."""

    def __init__(self, store: Store, env: Any, model: Any, kubelet: Any, interval: float, start_time: str) -> None:
        self.store, self.env, self.model, self.kubelet, self.interval = store, env, model, kubelet, interval
        self.epoch_ms = datetime.fromisoformat(start_time.replace("Z", "+00:00")).timestamp() * 1000
        self.running: dict[str, Obj] = {}  # uid -> the Running pod
        self.slots: dict[str, dict[str, int]] = {}  # node -> uid -> first GPU index
        self.series: dict[str, dict[str, Any]] = {}  # ns/pod -> {"t", "job", "node", FIELD: [...]}
        self.last: dict[str, tuple[float, dict[str, str], range, GpuMetrics]] = {}  # ns/pod -> last scrape
        self.fields: dict[str, tuple[str, ...]] = {}  # ns/pod -> the fields written for it (default FIELDS)
        self.servers: Any = None  # serving's data plane when the run serves models: their GPUs too
        self._busy: dict[str, tuple[float, float]] = {}  # server uid -> (last scrape, its engine's busy seconds)
        self._claimed: dict[str, int] = {}  # pod uid -> the devices its DRA claims gave it
        self._device: dict[str, DeviceView | None] = {}  # server uid -> its device (fixed while it runs)
        # TPU pods: GKE's TPU metrics instead (TPU_FIELDS), in the same shapes
        self.tpu_series: dict[str, dict[str, Any]] = {}
        self.tpu_last: dict[str, tuple[float, dict[str, str], range, dict[str, float]]] = {}
        store.watch("Pod", self._on_pod)
        env.at(0, self._sample)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName") or ""
        running = etype != "DELETED" and (pod.get("status") or {}).get("phase") == "Running" and node
        gpus = self._devices(pod) if running and uid not in self.running else 0  # DRA: read its claims once
        if running and (gpus or uid in self.running):
            if uid not in self.running:
                used = {i for u, first in self.slots.get(node, {}).items()
                        for i in range(first, first + self._devices(self.running[u]))}
                first = next(i for i in range(64) if all(j not in used for j in range(i, i + gpus)))
                self.slots.setdefault(node, {})[uid] = first
            self.running[uid] = pod
        elif uid in self.running:
            del self.running[uid]
            self.slots.get(node, {}).pop(uid, None)
            self._claimed.pop(uid, None)
            self._device.pop(uid, None)

    def _sample(self) -> None:
        now = self.env.now
        for uid, pod in sorted(self.running.items(), key=lambda kv: _ref(kv[1])):
            key = self.model.job_key(pod) if self.model is not None else ("", "")
            if self.model is None or key not in self.model.inputs:
                if self.servers is not None:
                    self._sample_server(now, uid, pod)
                continue
            spec, placement = self.model.inputs[key]
            st = self.model.breakdowns[key]
            node = pod["spec"]["nodeName"]
            nobj = self.store.get("Node", "", node) or {}
            if is_tpu(placement):
                self._sample_tpu(now, uid, pod, key, node, nobj, spec, placement, st)
                continue
            gpu = str(((nobj.get("metadata") or {}).get("labels") or {}).get(ACCEL, ""))
            # idle before its work starts (setup, checkpoint restore, rendezvous) and while it stalls
            g = steady_state(spec, placement, st) if self.kubelet.stepping(uid) else idle(gpu)
            ref = _ref(pod)
            s = self.series.setdefault(ref, {"t": [], "job": f"{key[0]}/{key[1]}", "node": node,
                                             **{f: [] for f in FIELDS}})
            s["t"].append(now)
            for f, v in g.values().items():
                s[f].append(v)
            container = ((pod["spec"].get("containers") or [{}])[0]).get("name", "")
            labels = {"Hostname": node, "modelName": str((nvidia_dra.catalog()["gpus"].get(gpu) or {}).get(
                "productName", gpu)), "container": container, "namespace": key[0], "pod": pod["metadata"]["name"],
                **_sharing(placement.device)}
            first = self.slots.get(node, {}).get(uid, 0)
            self.last[ref] = (now, labels, range(first, first + self._devices(pod)), g)
        self.env.after(self.interval, self._sample)

    def _devices(self, pod: Obj) -> int:
        """The pod's GPUs or TPU chips: its containers' limits, else what its DRA ResourceClaims' allocation gives
        it on the NVIDIA DRA driver's devices (one DCGM series per device, a MIG device included)."""
        n = _devices(pod)
        if n or not pod["spec"].get("resourceClaims"):
            return n
        uid = pod["metadata"]["uid"]
        if uid not in self._claimed:  # a running pod's allocation does not change: read its claims once
            self._claimed[uid] = len(nvidia_dra.claimed_devices(self.store, pod))
        return self._claimed[uid]

    def _sample_server(self, now: float, uid: str, pod: Obj) -> None:
        """One scrape of a model server's GPUs (serving/dataplane/plane.py's engine of a Ready pod): GPU_UTIL is the
        share of the last interval the engine ran an iteration (a kernel was running), FB_USED what vLLM / TGI
        reserved at start, --gpu-memory-utilization (TGI: --cuda-memory-fraction) of the device's memory as its
        container sees it (devices/container.py), weights and KV cache preallocated. The profiling gauges need a
        per-kernel model the twin has not got: they are not written for servers."""
        ep = self.servers.endpoints.get(uid)
        if ep is None:
            return  # not Ready yet (loading) or not a simulated server
        ep.engine.advance(now)
        busy = float(ep.engine.busy_time)
        t0, b0 = self._busy.get(uid, (now, busy))
        self._busy[uid] = (now, busy)
        util = min(100.0, 100 * (busy - b0) / (now - t0)) if now > t0 else 0.0
        node = pod["spec"]["nodeName"]
        if uid not in self._device:  # a running pod's device does not change: resolve it once (DRA: a slice scan)
            self._device[uid] = for_container(pod, self.store.get("Node", "", node) or {}, store=self.store).device
        device = self._device[uid]
        frac = float(getattr(ep.args, "gpu_memory_utilization", 0.0) or 0.0)
        g = GpuMetrics(round(util, 2), 0.0, 0.0, round(frac * device.reported_mib, 1) if device else 0.0, 0.0, 0.0)
        ref = _ref(pod)
        meta = pod["metadata"]
        s = self.series.setdefault(ref, {"t": [], "job": "", "node": node, GPU_UTIL: [], FB_USED: []})
        s["t"].append(now)
        s[GPU_UTIL].append(g.gpu_util)
        s[FB_USED].append(g.fb_used_mib)
        gpu = device.accelerator if device else ""
        labels = {"Hostname": node, "modelName": str((nvidia_dra.catalog()["gpus"].get(gpu) or {}).get(
            "productName", gpu)), "container": ((pod["spec"].get("containers") or [{}])[0]).get("name", ""),
            "namespace": meta.get("namespace") or "", "pod": meta["name"], **_sharing(device)}
        first = self.slots.get(node, {}).get(uid, 0)
        self.last[ref] = (now, labels, range(first, first + self._devices(pod)), g)
        self.fields[ref] = SERVER_FIELDS

    def _sample_tpu(self, now: float, uid: str, pod: Obj, key: tuple[str, str], node: str, nobj: Obj,
                    spec: TrainingSpec, placement: Placement, st: StepTime) -> None:
        """One scrape of a TPU pod's chips: GKE's TPU gauges, idle (0 % duty cycle) while it does not step."""
        g = {k: float(v) for k, v in tpu_record(spec, placement, st).items() if k != "fits"}
        if not self.kubelet.stepping(uid):
            g = {**g, TPU_DUTY_CYCLE: 0.0, TPU_TENSORCORE: 0.0, TPU_MEMORY_USED: 0.0}
        ref = _ref(pod)
        s = self.tpu_series.setdefault(ref, {"t": [], "job": f"{key[0]}/{key[1]}", "node": node,
                                             **{f: [] for f in TPU_FIELDS}})
        s["t"].append(now)
        for f in TPU_FIELDS:
            s[f].append(g[f])
        labels = (nobj.get("metadata") or {}).get("labels") or {}
        container = ((pod["spec"].get("containers") or [{}])[0]).get("name", "")
        meta = {"Hostname": node, "container": container, "namespace": key[0], "pod": pod["metadata"]["name"],
                "model": str(labels.get(GKE_TPU_ACCELERATOR, "")),
                "tpu_topology": str(labels.get(GKE_TPU_TOPOLOGY, ""))}
        first = self.slots.get(node, {}).get(uid, 0)
        self.tpu_last[ref] = (now, meta, range(first, first + self._devices(pod)), g)

    def _tpu_lines(self) -> list[str]:
        lines: list[str] = []
        for f in TPU_FIELDS:
            lines += exposition.header(f, "gauge", TPU_HELP[f])
            for ref in sorted(self.tpu_last):
                t, meta, chips, g = self.tpu_last[ref]
                for i in chips:
                    # accelerator_id: the chip on its VM ("<node>-<index>": twin assumption for GKE's instance id)
                    lab = [("accelerator_id", f"{meta['Hostname']}-{i}"), ("container", meta["container"]),
                           ("make", "cloud-tpu"), ("model", meta["model"]), ("namespace", meta["namespace"]),
                           ("pod", meta["pod"]), ("tpu_topology", meta["tpu_topology"])]
                    lines.append(exposition.sample(f, lab, g[f], round(self.epoch_ms + t * 1000)))
        return lines

    def finish(self) -> tuple[dict[str, Any], str]:
        """({"pods": {ns/pod: series}}, exposition): each pod's GPUs at the last scrape that saw it Running, with
        that scrape's timestamp (a finished pod is gone from a live scrape; the timestamp says when it was seen)."""
        lines: list[str] = []
        for f in FIELDS:
            lines += exposition.header(f, "gauge", HELP[f])
            for ref in sorted(self.last):
                t = self.last[ref][0]
                for lab, value in self._gpu_series(f, ref):
                    lines.append(exposition.sample(f, lab, value, round(self.epoch_ms + t * 1000)))
        if not self.last:
            lines = []
        if self.tpu_last:
            lines += self._tpu_lines()
        series: dict[str, Any] = {"pods": dict(sorted(self.series.items()))}
        if self.tpu_series:
            series["tpu_pods"] = dict(sorted(self.tpu_series.items()))
        return series, exposition.text(lines)


    def _gpu_series(self, f: str, ref: str) -> list[tuple[list[tuple[str, Any]], float]]:
        """(labels in dcgm-exporter's order, value) of field `f` for each device of pod `ref` at its last scrape."""
        t, labels, gpus, g = self.last[ref]
        if f not in self.fields.get(ref, FIELDS):
            return []
        out = []
        per_gpu = int(labels.get("per_gpu") or 1)
        for slot in gpus:
            i = slot // per_gpu  # the physical GPU the device (a share, a MIG instance) is on
            uuid = nvidia_dra.device_uuid("GPU", f"{labels['Hostname']}/{i}")
            mig_labels = [("GPU_I_PROFILE", labels["profile"]), ("GPU_I_ID", str(slot % per_gpu))] \
                if labels.get("profile") else []
            lab = [("gpu", i), ("UUID", uuid), ("device", f"nvidia{i}"), ("modelName", labels["modelName"]),
                   *mig_labels, ("Hostname", labels["Hostname"]), ("container", labels["container"]),
                   ("namespace", labels["namespace"]), ("pod", labels["pod"])]  # dcgm-exporter's order
            out.append((lab, g.values()[f]))
        return out

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        """What a scrape of the dcgm-exporter DaemonSet reads now: every Running GPU pod's devices at their last
        collection (dcgm-exporter serves the values it last collected; the twin collects every sampleInterval).
        For the twin's Prometheus (serving.observe.promsource), so a KEDA or HPA query can read DCGM_FI_*."""
        running = {_ref(p) for p in self.running.values()}
        return [(f, {k: str(v) for k, v in lab}, value) for f in FIELDS for ref in sorted(self.last)
                if ref in running for lab, value in self._gpu_series(f, ref)]


def _sharing(device: DeviceView | None) -> dict[str, str]:
    """How a pod's device maps onto the node's physical GPUs, for dcgm-exporter's labels: a time-slicing or MPS
    share is one of `clients` on its GPU, a GKE MIG partition one of the profile's instances per GPU (GKE creates as
    many as fit), which dcgm-exporter labels GPU_I_PROFILE and GPU_I_ID (the instance's index on its GPU here: a
    twin assumption for the driver's GPU instance id). The device plugin's slots of one GPU are consecutive."""
    if device is None:
        return {}
    if device.mode == "mig":
        from kubetwin.devices import mig

        try:
            per_gpu = mig.profiles(mig.model_of(device.accelerator) or "")[device.partition].max_count
        except (mig.MigError, KeyError):
            per_gpu = 1
        return {"per_gpu": str(per_gpu), "profile": device.partition}
    return {"per_gpu": str(device.clients)} if device.shared else {}


def _ref(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace') or ''}/{pod['metadata']['name']}"


def _devices(pod: Obj) -> int:
    """The pod's GPUs or TPU chips (container limits): one DCGM or TPU series each (DcgmExporter._devices adds
    the devices of its DRA ResourceClaims)."""
    return sum(container_limits(c).get(r, 0) for c in pod["spec"].get("containers") or [] for r in (GPU, TPU))


def is_tpu(placement: Placement) -> bool:
    """Whether the job's ranks run on TPU chips (devices/container.py): described by TPU metrics, not DCGM's."""
    return placement.device is not None and placement.device.mode == "tpu"


def record(spec: TrainingSpec, placement: Placement, st: StepTime) -> dict[str, Any]:
    """The steady-state gauges for training.json (one GPU of the job)."""
    return {**asdict(steady_state(spec, placement, st))}


# GKE's TPU metrics (the TPU device plugin's /metrics, exported to Cloud Monitoring as
# kubernetes.io/container/accelerator/{duty_cycle, memory_used, memory_total} and the TPU runtime's
# tensorcore_utilization: https://cloud.google.com/monitoring/api/metrics_kubernetes ; GKE "Monitor TPU
# performance"): percent, bytes, bytes, percent, labelled make="cloud-tpu", model, accelerator_id, tpu_topology.
TPU_DUTY_CYCLE, TPU_MEMORY_USED, TPU_MEMORY_TOTAL = "duty_cycle", "memory_used", "memory_total"
TPU_TENSORCORE = "tensorcore_utilization"
TPU_FIELDS = (TPU_DUTY_CYCLE, TPU_TENSORCORE, TPU_MEMORY_USED, TPU_MEMORY_TOTAL)
TPU_HELP = {TPU_DUTY_CYCLE: "Percent of time over the sample period during which the accelerator was actively "
                            "processing.",
            TPU_TENSORCORE: "Percent of the TensorCore that is utilized.",
            TPU_MEMORY_USED: "Memory allocated in bytes.", TPU_MEMORY_TOTAL: "Total memory in bytes."}


def tpu_record(spec: TrainingSpec, placement: Placement, st: StepTime) -> dict[str, Any]:
    """One TPU chip's steady-state gauges while its job steps, under GKE's names, and whether a rank fits (the run's
    own check). duty_cycle follows DCGM_FI_DEV_GPU_UTIL's rule (compute and exposed collectives keep the chip busy),
    tensorcore_utilization its PIPE_TENSOR_ACTIVE rule (MFU x compute share), both as percents."""
    device = placement.device
    total_bytes = float(device.gpu_mib if device is not None else 0) * 2**20
    used = min(used_mib(spec, st.dp, tpu=True) * 2**20, total_bytes)
    busy = (st.compute + st.exposed_comm) / st.total if st.total > 0 else 0.0
    mfu = spec.mfu or placement.default_mfu
    return {TPU_DUTY_CYCLE: round(100 * busy, 2),
            TPU_TENSORCORE: round(100 * mfu * st.compute / st.total, 2) if st.total > 0 else 0.0,
            TPU_MEMORY_USED: round(used), TPU_MEMORY_TOTAL: round(total_bytes),
            "fits": device_oom(spec, st.dp, device) is None}


def figures(timeseries: dict) -> list:
    """report.html: GPU_UTIL and SM_ACTIVE per training pod over simulated hours (none without DCGM series)."""
    pods = {ref: s for ref, s in ((timeseries.get("dcgm") or {}).get("pods") or {}).items() if s.get("job")}
    if not pods:
        return []
    import html

    import plotly.graph_objects as go

    out = []
    for field, title, unit in ((GPU_UTIL, "DCGM_FI_DEV_GPU_UTIL per training pod (kernel running)", "%"),
                               (SM_ACTIVE, "DCGM_FI_PROF_SM_ACTIVE per training pod", "ratio")):
        fig = go.Figure([go.Scatter(x=[t / 3600 for t in s["t"]], y=s[field], name=html.escape(ref), mode="lines",
                                    line_shape="hv") for ref, s in pods.items()])
        fig.update_layout(title=title, xaxis_title="simulated hours", yaxis_title=unit)
        out.append(fig)
    return out
