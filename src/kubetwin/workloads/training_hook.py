"""The kubelet's duration hook for training pods: find the job's placement, run the step-time model, and return
the pod's work (steps x step time + checkpoint writes), checkpoint interval, prestage and restart times.

Annotations merge outermost first: a Kubeflow TrainJob's metadata (for the JobSet it owns), the JobSet's metadata,
the Job's metadata, then the pod's own (from its template); the pod's win. The placement is the nodes the job's
accelerator pods are bound to when this pod starts, in rank order (JobSet job-global-index, then completion index,
then name). Pods of the job not bound yet are counted on nodes of their own shaped like this pod's (twin assumption:
the gang lands in the same pool, on distinct VMs); the job's size comes from its spec (Job parallelism; a JobSet's
replicas x parallelism of each replicated Job whose pods request accelerators; a Kueue pod group's
kueue.x-k8s.io/pod-group-total-count). A job of more than one pod is a gang by workloads/gang.py's rule (a
training spec, a multi-host TPU slice, a multi-node launcher): its pods' work is held until every rank runs, then
computed again on the placement they all have. A rank whose model states do not fit its GPU fails at start with
PyTorch's CUDA out-of-memory error (workloads/memory.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kubetwin.api.podresources import pod_requests
from kubetwin.controllers.kubelet import Work
from kubetwin.devices import container
from kubetwin.devices.dra import dranet
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.k8s.names import GPU, TPU
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.k8s.units import UnitError, parse_duration
from kubetwin.store.store import Obj, Store
from kubetwin.workloads import gang, gpudirect, memory, storage
from kubetwin.workloads.training import (
    DEFAULT_TPU_MFU,
    Network,
    Placement,
    StepTime,
    gpu_default_mfu,
    step_breakdown,
)
from kubetwin.workloads.training_spec import (
    DURATION,
    SpecError,
    TrainingSpec,
    has_gang_keys,
    has_training,
    job_pods,
    parse,
)

JOB_NAME, JOBSET_NAME = "batch.kubernetes.io/job-name", "jobset.sigs.k8s.io/jobset-name"
# Kueue's plain-pod groups (kueue pkg/controller/jobs/pod: GroupNameLabel, GroupTotalCountAnnotation)
POD_GROUP, POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count"
# the Kubeflow training operator's pods (kubeflow.org/v1 common_types.go JobNameLabel; controllers/pytorchjob.py)
KUBEFLOW_JOB = "training.kubeflow.org/job-name"
GLOBAL_INDEX, COMPLETION_INDEX = "jobset.sigs.k8s.io/job-global-index", "batch.kubernetes.io/job-completion-index"
ACCELERATORS = (GPU, TPU)


def wanted(objects: list[Obj]) -> bool:
    """Whether any manifest carries training annotations, or is a Job or JobSet that may be a multi-host gang
    without them (workloads/gang.py `might_be_gang`): run.py registers the hook then."""
    def walk(o: Any) -> bool:
        if isinstance(o, dict):
            ann = o.get("annotations") if isinstance(o.get("annotations"), dict) else None
            return has_training(ann) or has_gang_keys(ann) or any(walk(v) for v in o.values())
        return isinstance(o, list) and any(walk(v) for v in o)
    return any(walk(o) or gang.might_be_gang(str(o.get("kind", "")), o) for o in objects if isinstance(o, dict))


def _accelerators(pod: Obj) -> int:
    req = pod_requests(pod)
    return sum(int(req.get(r) or 0) for r in ACCELERATORS)


def _template_accelerators(job_spec: dict) -> int:
    spec = ((job_spec.get("template") or {}).get("spec")) or {}
    return _accelerators({"spec": spec})


def start_error(spec: TrainingSpec, dp: int, got: container.ContainerDevices) -> str:
    """What a rank's process dies of at start on the devices its container got, or "": a process per device
    (torchrun's nproc_per_node) where a CUDA process enumerates one MIG instance -- the second local rank's
    torch.cuda.set_device(1) fails with CUDA's cudaErrorInvalidDevice, "invalid device ordinal" --, else a rank
    whose model states do not fit its device (workloads/memory.py)."""
    if got.invisible_error(got.allocated):
        return ("RuntimeError: CUDA error: invalid device ordinal (local rank 1 of "
                f"{got.allocated}: {got.invisible_error(got.allocated)})")
    oom = memory.device_oom(spec, dp, got.device)
    return oom.message() if oom is not None else ""


class TrainingModel:
    """Callable as a kubelet duration hook; keeps each job's latest breakdown for `explain`."""

    def __init__(self, store: Store, net: Network | None = None) -> None:
        self.store, self.net = store, net
        self.breakdowns: dict[tuple[str, str], StepTime] = {}  # (namespace, JobSet or Job) -> last breakdown
        # what that breakdown was computed from, for the run folder's training.json and the DCGM series
        self.inputs: dict[tuple[str, str], tuple[TrainingSpec, Placement]] = {}
        self.gang: Any = None  # workloads.gang.GangCoordinator, when installed into a run
        # (namespace, job) -> what its ranks die of at start on their latest placement (start_error), so explain
        # and the headline say it never trained instead of printing a step time no step ran
        self.failures: dict[tuple[str, str], str] = {}

    def annotations(self, pod: Obj) -> dict:
        """The pod's annotations over its Job's and JobSet's metadata annotations."""
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "", meta.get("labels") or {}
        merged: dict = {}
        if labels.get(JOBSET_NAME):
            js = self.store.get("JobSet", ns, labels[JOBSET_NAME])
            owner = controller_of(js) if js is not None else None
            if owner and owner[0] == "TrainJob":  # Kubeflow Trainer's JobSet: the TrainJob's spec, outermost
                tj = self.store.get("TrainJob", ns, owner[1])
                merged.update(((tj or {}).get("metadata") or {}).get("annotations") or {})
            merged.update(((js or {}).get("metadata") or {}).get("annotations") or {})
        owner = controller_of(pod)
        if owner and owner[0] in ("Job", "PyTorchJob"):
            job = self.store.get(owner[0], ns, owner[1])
            merged.update(((job or {}).get("metadata") or {}).get("annotations") or {})
        return {**merged, **(meta.get("annotations") or {})}

    def __call__(self, pod: Obj, node: Obj | None) -> Work | None:
        if node is None:
            return None
        ann = self.annotations(pod)
        training = has_training(ann)
        found = gang.multi_host_rank(pod, node)  # a TPU slice's worker or a multi-node launcher (gang.py's rule)
        if not (training or has_gang_keys(ann) or found is not None):
            return None
        try:
            gspec = gang.gang_spec(ann, found)
        except SpecError:
            return None  # validation reports it for manifests; a pod created otherwise runs without a duration
        world = self._expected_pods(pod)
        if found is not None and found.nodes:  # torchrun --nnodes: its rendezvous waits for that many nodes
            world = max(world, found.nodes)
        is_gang = self.gang is not None and world > 1 and (
            gspec.declared or (gspec.declared is None and (training or found is not None)))
        work = self.work(pod, node)  # None for a training spec that does not parse, as above
        if work is None and is_gang and not training:
            work = Work(math.inf)  # no kubetwin.io/duration: the rank runs until stopped, once its peers are there
        if work is None:
            return None
        if is_gang:
            self.gang.join(pod, node, gspec, world, self.rank(pod), self.work)
            return replace(work, hold=True)
        return work

    def work(self, pod: Obj, node: Obj | None) -> Work | None:
        """The pod's work on the job's placement as of now: the step-time model's, or kubetwin.io/duration for a
        gang declared on pods without a training spec; failing at start when a rank cannot fit its GPU."""
        ann = self.annotations(pod)
        if node is None:
            return None
        if not has_training(ann):
            try:
                return Work(parse_duration(ann[DURATION])) if DURATION in ann else None
            except UnitError:
                return None
        try:
            spec = parse(ann)
        except SpecError:
            return None
        got = container.for_container(pod, node, store=self.store)
        placement = self.placement(pod, node, spec, got)
        if placement is None:
            return None
        st = step_breakdown(spec, placement, self.net)
        self.breakdowns[self.job_key(pod)] = st
        self.inputs[self.job_key(pod)] = (spec, placement)
        reason = (f"training: {st.steps} steps x {st.step:.3f}s (compute {st.compute + st.bubble:.3f}s, comm "
                  f"{st.exposed_comm:.3f}s, data {st.data_stall:.3f}s) + {st.checkpoints} checkpoints x "
                  f"{st.checkpoint_write:.1f}s")
        fail = start_error(spec, st.dp, got)
        if fail:
            self.failures[self.job_key(pod)] = fail
        else:
            self.failures.pop(self.job_key(pod), None)
        return Work(st.work, st.checkpoint_interval, st.prestage, st.restart, reason, fail=fail, on_device=True)

    def job_key(self, pod: Obj) -> tuple[str, str]:
        """(namespace, JobSet, Job or Kueue pod group name, else the pod's) that keys the job's breakdown."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        return meta.get("namespace") or "", (labels.get(JOBSET_NAME) or labels.get(JOB_NAME)
                                             or labels.get(POD_GROUP) or labels.get(KUBEFLOW_JOB) or meta["name"])

    def gang_pods(self, key: tuple[str, str]) -> list[Obj]:
        """Every pod of the job `key` in the store, finished ones included."""
        return [p for p in self.store.list("Pod", key[0]) if self.job_key(p) == key]

    def rank(self, pod: Obj) -> int:
        """The pod's node rank: its completion index (a JobSet's Jobs in job-global-index order before it), or its
        place by name among the pod group's unfinished pods."""
        meta = pod["metadata"]
        labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
        idx = str(labels.get(COMPLETION_INDEX) or ann.get(COMPLETION_INDEX) or "")
        if labels.get(KUBEFLOW_JOB):  # the operator's RANK: the master 0, worker i at i + 1 (pytorch/envvar.go)
            rank = next((str(e.get("value")) for c in pod["spec"].get("containers") or []
                         for e in c.get("env") or [] if e.get("name") == "RANK"), "")
            if rank.isdigit():
                return int(rank)
        if idx.isdigit():
            base = 0
            if labels.get(JOBSET_NAME) and str(labels.get(GLOBAL_INDEX) or "").isdigit():
                owner = controller_of(pod)
                job = self.store.get("Job", meta.get("namespace") or "", owner[1]) if owner else None
                base = int(labels[GLOBAL_INDEX]) * int(((job or {}).get("spec") or {}).get("parallelism", 1))
            return base + int(idx)
        names = sorted(p["metadata"]["name"] for p in self.gang_pods(self.job_key(pod))
                       if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
        return names.index(meta["name"]) if meta["name"] in names else len(names)

    def _expected_pods(self, pod: Obj) -> int:
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "", meta.get("labels") or {}
        if labels.get(JOBSET_NAME):
            js = self.store.get("JobSet", ns, labels[JOBSET_NAME]) or {}
            rjs = [(int(rj.get("replicas", 1)), (rj.get("template") or {}).get("spec") or {})
                   for rj in (js.get("spec") or {}).get("replicatedJobs") or []]
            accel = [(n, s) for n, s in rjs if _template_accelerators(s)] or rjs  # CPU gangs count every Job
            return sum(n * job_pods(s) for n, s in accel)
        owner = controller_of(pod)
        if owner and owner[0] == "PyTorchJob":  # every replica of the job (each master and worker pod)
            specs = ((self.store.get("PyTorchJob", ns, owner[1]) or {}).get("spec") or {}).get(
                "pytorchReplicaSpecs") or {}
            reps = [(int(rs.get("replicas", 1)), (rs.get("template") or {}).get("spec") or {})
                    for rs in specs.values() if isinstance(rs, dict)]
            accel = [n for n, s in reps if _accelerators({"spec": s})] or [n for n, _ in reps]
            return max(1, sum(accel))
        job = self.store.get("Job", ns, owner[1]) if owner and owner[0] == "Job" else None
        if job is None:
            count = str((meta.get("annotations") or {}).get(POD_GROUP_COUNT, ""))
            return int(count) if labels.get(POD_GROUP) and count.isdigit() else 1
        return job_pods(job.get("spec") or {})

    def accelerators(self, pod: Obj) -> int:
        """The pod's GPUs or TPU chips: its containers' requests, else the devices its DRA ResourceClaims'
        allocation gives it (devices/container.py reads the same allocation)."""
        n = _accelerators(pod)
        if n or not pod["spec"].get("resourceClaims"):
            return n
        return len(nvidia_dra.claimed_devices(self.store, pod))

    def siblings(self, pod: Obj) -> list[Obj]:
        """The job's accelerator pods bound to a node and not finished, this pod included, in rank order."""
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "", meta.get("labels") or {}
        key = next(((k, labels[k]) for k in (JOBSET_NAME, JOB_NAME, POD_GROUP, KUBEFLOW_JOB) if labels.get(k)), None)
        if key is None:
            return [pod]
        out = [p for p in self.store.list("Pod", ns) if (p["metadata"].get("labels") or {}).get(key[0]) == key[1]
               and p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") in ("Pending", "Running")
               and not p["metadata"].get("deletionTimestamp") and self.accelerators(p)]
        if all(p["metadata"]["uid"] != meta["uid"] for p in out):
            out.append(pod)

        def order(p: Obj) -> tuple[int, int, str]:
            lab = p["metadata"].get("labels") or {}
            ann = p["metadata"].get("annotations") or {}
            idx = lab.get(COMPLETION_INDEX) or ann.get(COMPLETION_INDEX) or "0"
            return int(lab.get(GLOBAL_INDEX) or 0), int(idx) if str(idx).isdigit() else 0, p["metadata"]["name"]
        return sorted(out, key=order)

    def placement(self, pod: Obj, node: Obj, spec: TrainingSpec, got: container.ContainerDevices) -> Placement | None:
        """The job's placement as of now, the accelerator's peak and MFU, and the storage paths; `got`: what the
        pod's container gets on `node` (devices/container.py)."""
        device = got.device
        if device is None:
            return None
        peak = device.peak_tflops  # the chip's peak x the device's share (a MIG instance: compute slices / 7)
        mfu = DEFAULT_TPU_MFU if device.mode == "tpu" else gpu_default_mfu(device.accelerator)
        if not peak:
            return None
        bound = [(self.store.get("Node", "", p["spec"]["nodeName"]) or node, p, self.accelerators(p))
                 for p in self.siblings(pod)]
        # each pod's node as its NCCL sees it: without its GPUDirect set-up, a pool without GPUDirect (the cluster's
        # networks and installers are read only when a node is a GPUDirect node)
        direct = any(gpudirect.node_plugin(n) for n, _, _ in bound) or gpudirect.node_plugin(node)
        cluster = gpudirect.Cluster.of([*self.store.list("Network"), *self.store.list("GKENetworkParamSet"),
                                        *self.store.list("DaemonSet")] if direct else [])
        used = [(gpudirect.as_used(n, p, cluster, len(dranet.claimed_nics(self.store, p)) if direct else 0,
                                   int(k)), k) for n, p, k in bound]
        pods = [(n, k) for (n, _), k in used]
        set_up = [(n, k) for n, _, k in bound]
        setups = [s for (_, s), _ in used if s is not None and not s.ok]
        own_node, own = gpudirect.as_used(node, pod, cluster, len(dranet.claimed_nics(self.store, pod)) if direct
                                          else 0, int(self.accelerators(pod)))
        own_count = self.accelerators(pod)  # each rank not bound yet counts as this pod (DRA: a claim read each)
        for i in range(self._expected_pods(pod) - len(pods)):
            ghost = {**own_node, "metadata": {**own_node["metadata"],
                                              "name": f"{node['metadata']['name']}~unbound-{i}"}}
            pods.append((ghost, own_count))
            set_up.append(({**node, "metadata": {**node["metadata"], "name": ghost["metadata"]["name"]}},
                           own_count))
            if own is not None and not own.ok:
                setups.append(own)
        multi_node = len({(n.get("metadata") or {}).get("name") for n, _ in pods}) > 1
        notes = tuple(dict.fromkeys(s.describe() for s in setups)) if multi_node else ()
        ctr = (pod["spec"].get("containers") or [{}])[0]
        read = storage.resolve(self.store, pod, ctr, spec.data_path, False) if spec.data_path else None
        ck = spec.checkpoint_path
        return Placement(tuple(pods), float(peak), mfu, read,
                         storage.resolve(self.store, pod, ctr, ck, True) if ck else None,
                         storage.resolve(self.store, pod, ctr, ck, False) if ck else None, notes,
                         tuple(set_up) if notes else (), device)
