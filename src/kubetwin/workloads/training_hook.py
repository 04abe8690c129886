"""The kubelet's duration hook for training pods: find the job's placement, run the step-time model, and return
the pod's work (steps x step time + checkpoint writes), checkpoint interval, prestage and restart times.

Annotations merge outermost first: the JobSet's metadata, the Job's metadata, then the pod's own (from its
template); the pod's win. The placement is the nodes the job's accelerator pods are bound to when this pod starts,
in rank order (JobSet job-global-index, then completion index, then name). Pods of the job not bound yet are
counted on nodes of their own shaped like this pod's (twin assumption: the gang lands in the same pool, on distinct
VMs); the job's size comes from its spec (Job parallelism; a JobSet's replicas x parallelism of each replicated
Job whose pods request accelerators). Every pod of the job computes the same placement once all are bound.
"""

from __future__ import annotations

from typing import Any

from kubetwin import catalog
from kubetwin.api.podresources import pod_requests
from kubetwin.controllers.common import controller_of
from kubetwin.controllers.kubelet import Work
from kubetwin.store.store import Obj, Store
from kubetwin.workloads import storage
from kubetwin.workloads.training import (
    DEFAULT_MFU,
    DEFAULT_TPU_MFU,
    FALLBACK_MFU,
    Network,
    Placement,
    StepTime,
    step_breakdown,
)
from kubetwin.workloads.training_spec import SpecError, TrainingSpec, has_training, parse

JOB_NAME, JOBSET_NAME = "batch.kubernetes.io/job-name", "jobset.sigs.k8s.io/jobset-name"
GLOBAL_INDEX, COMPLETION_INDEX = "jobset.sigs.k8s.io/job-global-index", "batch.kubernetes.io/job-completion-index"
ACCELERATORS = ("nvidia.com/gpu", "google.com/tpu")


def wanted(objects: list[Obj]) -> bool:
    """Whether any manifest carries training annotations (run.py registers the hook then)."""
    def walk(o: Any) -> bool:
        if isinstance(o, dict):
            return has_training(o.get("annotations") if isinstance(o.get("annotations"), dict) else None) or any(
                walk(v) for v in o.values())
        return isinstance(o, list) and any(walk(v) for v in o)
    return any(walk(o) for o in objects)


def _accelerators(pod: Obj) -> int:
    req = pod_requests(pod)
    return sum(int(req.get(r) or 0) for r in ACCELERATORS)


def _template_accelerators(job_spec: dict) -> int:
    spec = ((job_spec.get("template") or {}).get("spec")) or {}
    return _accelerators({"spec": spec})


class TrainingModel:
    """Callable as a kubelet duration hook; keeps each job's latest breakdown for `explain`."""

    def __init__(self, store: Store, net: Network | None = None) -> None:
        self.store, self.net = store, net
        self.breakdowns: dict[tuple[str, str], StepTime] = {}  # (namespace, JobSet or Job) -> last breakdown
        # what that breakdown was computed from, for the run folder's training.json and the DCGM series
        self.inputs: dict[tuple[str, str], tuple[TrainingSpec, Placement]] = {}

    def annotations(self, pod: Obj) -> dict:
        """The pod's annotations over its Job's and JobSet's metadata annotations."""
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "", meta.get("labels") or {}
        merged: dict = {}
        if labels.get(JOBSET_NAME):
            js = self.store.get("JobSet", ns, labels[JOBSET_NAME])
            merged.update(((js or {}).get("metadata") or {}).get("annotations") or {})
        owner = controller_of(pod)
        if owner and owner[0] == "Job":
            job = self.store.get("Job", ns, owner[1])
            merged.update(((job or {}).get("metadata") or {}).get("annotations") or {})
        return {**merged, **(meta.get("annotations") or {})}

    def __call__(self, pod: Obj, node: Obj | None) -> Work | None:
        ann = self.annotations(pod)
        if not has_training(ann) or node is None:
            return None
        try:
            spec = parse(ann)
        except SpecError:
            return None  # validation reports it for manifests; a pod created otherwise runs without a duration
        placement = self.placement(pod, node, spec)
        if placement is None:
            return None
        st = step_breakdown(spec, placement, self.net)
        self.breakdowns[self.job_key(pod)] = st
        self.inputs[self.job_key(pod)] = (spec, placement)
        reason = (f"training: {st.steps} steps x {st.step:.3f}s (compute {st.compute + st.bubble:.3f}s, comm "
                  f"{st.exposed_comm:.3f}s, data {st.data_stall:.3f}s) + {st.checkpoints} checkpoints x "
                  f"{st.checkpoint_write:.1f}s")
        return Work(st.work, st.checkpoint_interval, st.prestage, st.restart, reason)

    def job_key(self, pod: Obj) -> tuple[str, str]:
        """(namespace, JobSet or Job name, else the pod's) that keys the job's breakdown."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        return meta.get("namespace") or "", labels.get(JOBSET_NAME) or labels.get(JOB_NAME) or meta["name"]

    def _expected_pods(self, pod: Obj) -> int:
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "", meta.get("labels") or {}
        if labels.get(JOBSET_NAME):
            js = self.store.get("JobSet", ns, labels[JOBSET_NAME]) or {}
            return sum(int(rj.get("replicas", 1)) * int(((rj.get("template") or {}).get("spec") or {}).get(
                "parallelism", 1)) for rj in (js.get("spec") or {}).get("replicatedJobs") or []
                if _template_accelerators((rj.get("template") or {}).get("spec") or {}))
        owner = controller_of(pod)
        job = self.store.get("Job", ns, owner[1]) if owner and owner[0] == "Job" else None
        if job is None:
            return 1
        spec = job.get("spec") or {}
        return min(int(spec.get("parallelism", 1)), int(spec.get("completions") or spec.get("parallelism", 1)))

    def siblings(self, pod: Obj) -> list[Obj]:
        """The job's accelerator pods bound to a node and not finished, this pod included, in rank order."""
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "", meta.get("labels") or {}
        key = (JOBSET_NAME, labels[JOBSET_NAME]) if labels.get(JOBSET_NAME) else (
            (JOB_NAME, labels[JOB_NAME]) if labels.get(JOB_NAME) else None)
        if key is None:
            return [pod]
        out = [p for p in self.store.list("Pod", ns) if (p["metadata"].get("labels") or {}).get(key[0]) == key[1]
               and p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") in ("Pending", "Running")
               and not p["metadata"].get("deletionTimestamp") and _accelerators(p)]
        if all(p["metadata"]["uid"] != meta["uid"] for p in out):
            out.append(pod)

        def order(p: Obj) -> tuple[int, int, str]:
            lab = p["metadata"].get("labels") or {}
            ann = p["metadata"].get("annotations") or {}
            idx = lab.get(COMPLETION_INDEX) or ann.get(COMPLETION_INDEX) or "0"
            return int(lab.get(GLOBAL_INDEX) or 0), int(idx) if str(idx).isdigit() else 0, p["metadata"]["name"]
        return sorted(out, key=order)

    def placement(self, pod: Obj, node: Obj, spec: TrainingSpec) -> Placement | None:
        """The job's placement as of now, the accelerator's peak and MFU, and the storage paths."""
        labels = (node.get("metadata") or {}).get("labels") or {}
        req = pod_requests(pod)
        if req.get("google.com/tpu"):
            try:
                peak = catalog.tpu_type(labels.get("cloud.google.com/gke-tpu-accelerator", "")).bf16_tflops
            except catalog.CatalogError:
                return None
            mfu = DEFAULT_TPU_MFU
        elif req.get("nvidia.com/gpu"):
            gpu = labels.get("cloud.google.com/gke-accelerator", "")
            try:
                peak = catalog.gpu_type(gpu).bf16_tflops
            except catalog.CatalogError:
                return None
            mfu = DEFAULT_MFU.get(gpu, FALLBACK_MFU)
        else:
            return None
        if not peak:
            return None
        nodes = {n["metadata"]["name"]: n for n in self.store.list("Node")}
        pods = [(nodes.get(p["spec"]["nodeName"], node), _accelerators(p)) for p in self.siblings(pod)]
        for i in range(self._expected_pods(pod) - len(pods)):
            ghost = {**node, "metadata": {**node["metadata"], "name": f"{node['metadata']['name']}~unbound-{i}"}}
            pods.append((ghost, _accelerators(pod)))
        container = (pod["spec"].get("containers") or [{}])[0]
        read = storage.resolve(self.store, pod, container, spec.data_path, False) if spec.data_path else None
        ck = spec.checkpoint_path
        return Placement(tuple(pods), float(peak), mfu, read,
                         storage.resolve(self.store, pod, container, ck, True) if ck else None,
                         storage.resolve(self.store, pod, container, ck, False) if ck else None)
