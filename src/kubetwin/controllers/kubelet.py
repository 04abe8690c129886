"""Pod lifecycle on a node: start, run for kubetwin.io/duration, finish; node loss fails its pods.

`kubetwin.io/fail-after` makes the containers exit 1 that long after they start: the pod fails with
restartPolicy Never; with OnFailure or Always the kubelet restarts them in place after CrashLoopBackOff
(10s doubling to 5m) and counts restartCount, as the real kubelet does.

Checkpoints (`kubetwin.io/checkpoint-interval` on a pod or pod template): a pod that ran r seconds saved
floor(r / interval) x interval of its work; the next pod doing the same piece of work (the same Job and completion
index: the Job's replacement pod, or a restarted JobSet's re-created child Job, which keeps its name) runs only what
is left of `kubetwin.io/duration`. Without the annotation a stopped pod's work is all lost. Work lost (run time since
the last checkpoint x accelerators) is kept per Job in `lost_work`. Run time is wall time on the node (a pod slowed
by GPU sharing is counted as if it ran at full speed).

A duration hook may hold a pod's work (`Work.hold`: a gang rank blocked in its launcher's rendezvous) until
`begin`, `stall` a running pod's work (a peer rank was lost: no progress, the pod keeps its GPUs and never finishes
on its own), fail its containers with a launcher's message (`fail_containers`), or have it fail where its work
would start (`Work.fail`: CUDA out of memory); workloads/gang.py and workloads/training_hook.py use them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetwin.api.podresources import pod_requests
from kubetwin.api.podspec import TemplateMemo
from kubetwin.controllers.attachdetach import MOUNT_TIMEOUT, AttachDetachController
from kubetwin.controllers.kubelet_admission import NodeAdmission
from kubetwin.controllers.kubelet_status import kubelet_conditions
from kubetwin.controllers.nodelifecycle import node_is_ready
from kubetwin.controllers.volumes import claim_volumes
from kubetwin.devices import sharing
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.devices.gpuruntime import GpuRuntime
from kubetwin.k8s.names import GPU, TPU
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.k8s.units import go_duration, parse_duration
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

DURATION = "kubetwin.io/duration"
FAIL_AFTER = "kubetwin.io/fail-after"
EXIT_CODE = "kubetwin.io/exit-code"  # the code a fail-after container exits with (default 1)
BACKOFF_INITIAL, BACKOFF_MAX = 10.0, 300.0  # kubelet's CrashLoopBackOff
CHECKPOINT = "kubetwin.io/checkpoint-interval"
# How long an imported pod's containers had run before the run's start (importer/convert.py): it starts warm (no
# image pull or cold start), and its work counts from its real start, so it ends and checkpoints where it would have.
ELAPSED = "kubetwin.io/elapsed"
ACCELERATORS = {GPU: "gpu_seconds", TPU: "tpu_chip_seconds"}


def checkpoint_split(ran: float, interval: float | None) -> tuple[float, float]:
    """(saved, lost) seconds of work of a pod that ran `ran` seconds, checkpointing every `interval` seconds
    (None or 0: no checkpoints, everything is lost)."""
    if not interval or interval <= 0 or ran <= 0:
        return 0.0, max(ran, 0.0)
    saved = math.floor(ran / interval + 1e-9) * interval
    return saved, ran - saved


def work_key(pod: Obj) -> tuple[str, str, str] | None:
    """The piece of work a pod does: (namespace, Job, completion index) for a Job's pod, None for others."""
    owner = controller_of(pod)
    if not owner or owner[0] != "Job":
        return None
    meta = pod["metadata"]
    return meta.get("namespace") or "", owner[1], (meta.get("annotations") or {}).get(
        "batch.kubernetes.io/job-completion-index", "")


@dataclass
class Startup:
    """What a pod's start costs beyond binding, as a startup hook computes it: image pulls (image, seconds, bytes)
    while the pod is Pending in ContainerCreating, then `ready_after` seconds Running but not Ready (a model server
    loading weights and warming up before its readiness probe passes); `reason` explains it in a describe. With
    `fail`, the container exits (code 1, the message in its terminated state) after `ready_after` instead of
    turning Ready -- a model server that cannot start on its device -- and the hooks are asked again at each
    restart (CrashLoopBackOff under restartPolicy Always/OnFailure, Failed under Never)."""

    pulls: list[tuple[str, float, int]] = field(default_factory=list)
    ready_after: float = 0.0
    reason: str = ""
    fail: str = ""


StartupHook = Callable[[Obj, "Obj | None"], "Startup | None"]


@dataclass
class Work:
    """A pod's run as a duration hook computes it instead of kubetwin.io/duration (a training pod: the step-time
    model, workloads/training_hook.py): `duration` seconds of work, checkpointed every `interval` seconds of work
    (None: the pod's kubetwin.io/checkpoint-interval), after `setup` seconds paid at every start (copying a dataset)
    and `restart` more when it resumes from a checkpoint (reading it back). Setup and restart are not work: a pod
    stopped during them saves and loses nothing."""

    duration: float
    interval: float | None = None
    setup: float = 0.0
    restart: float = 0.0
    reason: str = ""
    hold: bool = False  # the containers run but the work waits for Kubelet.begin (a gang's rendezvous)
    fail: str = ""  # the containers exit 1 with this message where the work would start (CUDA out of memory)
    # `duration` is already the time on the pod's own device (the training step model computes at a MIG instance's
    # compute slices / 7, devices/container.py): GpuRuntime adds no MIG slowdown on top
    on_device: bool = False


DurationHook = Callable[[Obj, "Obj | None"], "float | Work | None"]


@dataclass
class _Run:
    """A pod's work while it runs: what it resumed from, since when, and what it holds."""

    key: tuple[str, str, str] | None
    start: float
    interval: float | None
    duration: float
    resumed: float
    accelerators: dict[str, float]  # GPUs by the device plugin or DRA claims (MIG devices as shares), TPU chips
    stalled: float | None = None  # when its progress stopped (a peer rank was lost): work after it is not done


class Kubelet:
    """All nodes' kubelets in one: pods bound to a node start at once and end after their duration."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self._started: set[str] = set()
        self._to_start: list[Obj] = []
        self._ips = 0  # pod IPs from GKE's default pod range 10.4.0.0/14, handed out in order
        self.gpus = GpuRuntime(env, self._finish)
        # work key -> checkpoint intervals of work saved: a count, not seconds, because a duration hook's interval
        # and duration depend on the nodes (a training pod resumed on slower GPUs restarts from the same checkpoint)
        self.progress: dict[tuple[str, str, str], float] = {}
        self.lost_work: dict[tuple[str, str], dict[str, float]] = {}  # (ns, Job or pod) -> lost seconds, ...
        self._runs: dict[str, _Run] = {}  # pod uid -> its run, while it runs a kubetwin.io/duration
        self._held: dict[str, tuple[Obj, Obj | None, Work]] = {}  # uid -> a Running pod whose work waits (begin)
        self.startup_hooks: list[StartupHook] = []  # e.g. serving's model-server cold start
        self.duration_hooks: list[DurationHook] = []  # e.g. training's step-time model; first non-None wins
        self._images: dict[str, dict[str, float]] = {}  # node -> image -> when its pull ends (or ended)
        self._crashing: set[str] = set()  # pods whose container exits while starting (Startup.fail)
        self.admission = NodeAdmission()  # each node's admitted pods, for the kubelet's resource check
        self.volumes: AttachDetachController | None = None  # the volume gate (attach/detach controller)
        self._mounting: dict[str, Obj] = {}  # uid -> a bound pod waiting for its volumes, in binding order
        self._requests = TemplateMemo(pod_requests)  # a running pod's requests, once per pod template
        self._durations: dict[str, float] = {}  # annotation text -> seconds: a Job's pods share a few texts
        store.watch("Pod", self._on_pod)

    def use_volumes(self, volumes: AttachDetachController) -> None:
        """Wait for each pod's claims to be bound and their volumes attached before its containers start."""
        self.volumes = volumes
        volumes.listeners.append(self._volumes_changed)

    def contribute(self, until: float) -> Contribution:
        """Work lost to interrupted pods (preempted, failed, deleted while running) since their last checkpoint:
        GPU-hours (nvidia.com/gpu) and TPU chip-hours (google.com/tpu) in all, and per Job."""
        lost = self.lost_work
        out: dict[str, Any] = {
            "wasted_gpu_hours": round(sum(v["gpu_seconds"] for v in lost.values()) / 3600, 3),
            "wasted_tpu_chip_hours": round(sum(v["tpu_chip_seconds"] for v in lost.values()) / 3600, 3)}
        if lost:
            out["lost_work"] = {f"{ns}/{name}": {
                "gpu_hours": round(v["gpu_seconds"] / 3600, 3), "tpu_chip_hours": round(
                    v["tpu_chip_seconds"] / 3600, 3), "hours": round(v["seconds"] / 3600, 3),
                "interruptions": int(v["interruptions"])} for (ns, name), v in sorted(lost.items())}
        return Contribution(summary=out)

    def work_start(self, uid: str) -> float | None:
        """When the running pod's work starts (after its setup or checkpoint restore); None if it runs none."""
        if uid in self._held:
            return math.inf
        run = self._runs.get(uid)
        return run.start if run is not None else None

    def stepping(self, uid: str) -> bool:
        """Whether the running pod is doing its work now: not held, not in its setup, not stalled (a pod the
        kubelet runs no work for counts as stepping)."""
        run = self._runs.get(uid)
        if uid in self._held:
            return False
        return run is None or (run.start <= self.env.now and run.stalled is None)

    def begin(self, uid: str, work: Work | None = None) -> None:
        """Start the work of a pod held at its start (`Work.hold`), with `work` recomputed by the caller or the
        one the pod was held with."""
        held = self._held.pop(uid, None)
        cur = self._current(held[0]) if held is not None else None
        if held is None or cur is None:
            return
        self._begin(cur, held[1], work if work is not None else held[2])

    def stall(self, uid: str) -> None:
        """The pod's work stops progressing (a peer rank is gone and its collectives hang): it keeps its node and
        GPUs, never finishes on its own, and what it ran after now is not work done."""
        run = self._runs.get(uid)
        if run is not None and run.stalled is None:
            run.stalled = self.env.now

    def fail_containers(self, pod: Obj, message: str, exit_code: int = 1) -> None:
        """The containers exit with `exit_code` and `message` (a launcher's error): the pod fails as with
        restartPolicy Never (the Job's backoffLimit decides what follows)."""
        cur = self._current(pod)
        if cur is not None:
            self._finish(cur, "Failed", exit_code, "Error", message)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        # every pod write reaches here: the uid and phase are read once
        uid = pod["metadata"]["uid"]
        phase = pod.get("status", {}).get("phase")
        gone = etype == "DELETED"
        if uid in self._held and (gone or phase != "Running"):
            del self._held[uid]
        if uid in self._runs:
            if gone or phase == "Failed":
                self._stopped(pod, self._runs.pop(uid))
            elif phase == "Succeeded":
                run = self._runs.pop(uid)
                if run.key is not None:
                    self.progress.pop(run.key, None)  # done: nothing of it is left to resume
        if gone or phase in ("Succeeded", "Failed"):
            self.admission.release(pod["spec"].get("nodeName"), uid)
        if gone:
            self.gpus.release(uid)
            self._crashing.discard(uid)
            self._started.discard(uid)  # uids are never reused: a day of 1,000,000 pods need not keep them all
            return
        if not pod["spec"].get("nodeName"):
            return
        if uid in self._started or pod["status"].get("phase") != "Pending":
            return
        self._started.add(uid)
        if not self._to_start:  # one pass starts every pod bound at this instant, in binding order
            self.env.after(0, self._start_all)
        self._to_start.append(pod)

    def _start_all(self) -> None:
        pods, self._to_start = self._to_start, []
        for pod in pods:
            self._start(pod)

    def _start(self, pod: Obj) -> None:
        meta = pod["metadata"]
        ns, name = meta.get("namespace") or "", meta["name"]
        cur = self.store.get("Pod", ns, name)
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Pending":
            return  # gone, or already ended (a node shutting down killed it before it started)
        now = self.store.timestamp(self.env.now)
        node = self.store.get("Node", "", cur["spec"]["nodeName"])
        if node is None or not node_is_ready(node):
            # no kubelet runs for a missing node (PodGC deletes the pod) and a NotReady node's does not start
            # pods (the taint eviction controller deletes them); twin: the pod is not retried if the node recovers
            return
        # the device manager's Allocate: a shared GPU allows one per container
        refused = sharing.admission_error((node.get("metadata") or {}).get("labels") or {}, cur)
        if refused:
            status = {**cur.get("status", {}), "phase": "Failed", "reason": "UnexpectedAdmissionError",
                      "message": refused, "startTime": now}
            failed = self.store.update({**cur, "status": status})
            self.events.event(failed, "Warning", "UnexpectedAdmissionError", refused, "kubelet")
            return
        short = self.admission.admit(cur, node)  # the resources the node's kubelet already admitted
        if short is not None:
            reason, error = short
            status = {**cur.get("status", {}), "phase": "Failed", "reason": reason,
                      "message": f"Pod was rejected: {error}"}
            failed = self.store.update({**cur, "status": status})
            self.events.event(failed, "Warning", reason, error, "kubelet")
            return
        if self.volumes is not None and claim_volumes(cur) and not self.volumes.ready(cur):
            self._await_volumes(cur)  # WaitForAttachAndMount: its claims are unbound or their volumes unattached
            return
        self._prepare(cur, node)

    def _await_volumes(self, cur: Obj) -> None:
        """The pod waits for its volumes in ContainerCreating; FailedMount once podAttachAndMountTimeout passes."""
        uid = meta_uid(cur)
        self._mounting[uid] = cur
        status = {**cur.get("status", {}), "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "ready": False, "restartCount": 0, "started": False,
             "state": {"waiting": {"reason": "ContainerCreating"}}} for c in cur["spec"].get("containers") or []]}
        if status != cur.get("status"):
            self._mounting[uid] = self.store.update({**cur, "status": status})
        self.env.after(MOUNT_TIMEOUT, lambda: self._mount_timeout(uid))

    def _mount_timeout(self, uid: str) -> None:
        pod = self._mounting.get(uid)
        cur = self._pending(pod) if pod is not None else None
        if cur is None or self.volumes is None:
            return
        waiting = self.volumes.waiting(cur)
        if not waiting:
            return
        names = [v for v, _ in claim_volumes(cur) if v in waiting.get("unattached", []) + waiting.get(
            "unprocessed", [])]
        self.events.event(cur, "Warning", "FailedMount", "Unable to attach or mount volumes: unmounted volumes=["
                          f"{' '.join(names)}], unattached volumes=[{' '.join(waiting.get('unattached', []))}], "
                          f"failed to process volumes=[{' '.join(waiting.get('unprocessed', []))}]: context deadline "
                          "exceeded", "kubelet")

    def _volumes_changed(self) -> None:
        """A volume was attached, detached or bound: the pods waiting for theirs try again, in binding order."""
        for uid, pod in list(self._mounting.items()):
            cur = self._pending(pod)
            if cur is None:
                del self._mounting[uid]
                continue
            if self.volumes is not None and self.volumes.ready(cur):
                del self._mounting[uid]
                self._prepare(cur, self.store.get("Node", "", cur["spec"]["nodeName"]))

    def _pending(self, pod: Obj) -> Obj | None:
        meta = pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Pending":
            return None
        return cur

    def _prepare(self, cur: Obj, node: Obj | None) -> None:
        """The pod's volumes are ready: pull its images (a startup hook's), then run its containers."""
        startup = self._startup(cur, node)
        if startup is None:
            self._run_containers(cur, node, None)
            return
        have = self._images.setdefault(cur["spec"]["nodeName"], {})
        now_t = self.env.now
        pulls = []  # (image, seconds this pod waits, bytes); a pull in progress for another pod is waited for
        for img, sec, size in startup.pulls:
            done = have.get(img)
            if done is None:
                have[img] = now_t + sec
                pulls.append((img, sec, size))
            elif done > now_t:
                pulls.append((img, done - now_t, size))
            else:
                self.events.event(cur, "Normal", "Pulled", f'Container image "{img}" already present on machine',
                                  "kubelet")
        if not pulls:
            self._run_containers(cur, node, startup)
            return
        status = {**cur.get("status", {}), "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "ready": False, "restartCount": 0, "started": False,
             "state": {"waiting": {"reason": "ContainerCreating"}}} for c in cur["spec"].get("containers") or []]}
        creating = self.store.update({**cur, "status": status})
        for img, _, _ in pulls:
            self.events.event(creating, "Normal", "Pulling", f'Pulling image "{img}"', "kubelet")
        total = sum(sec for _, sec, _ in pulls)  # serializeImagePulls defaults to true (KubeletConfiguration)
        self.env.after(total, lambda: self._pulled(creating, node, startup, pulls))

    def _pulled(self, pod: Obj, node: Obj | None, startup: Startup, pulls: list[tuple[str, float, int]]) -> None:
        meta = pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Pending":
            return
        for img, sec, size in pulls:
            self.events.event(cur, "Normal", "Pulled", f'Successfully pulled image "{img}" in {go_duration(sec)} '
                              f"({go_duration(sec)} including waiting). Image size: {size} bytes.", "kubelet")
        self._run_containers(cur, node, startup)

    def _run_containers(self, cur: Obj, node: Obj | None, startup: Startup | None) -> None:
        meta = cur["metadata"]
        elapsed = (meta.get("annotations") or {}).get(ELAPSED)  # started before the run: its real start time
        now = self.store.timestamp(self.env.now - (self._duration(elapsed) if elapsed is not None else 0.0))
        ready_after = startup.ready_after if startup is not None else 0.0
        self._ips += 1
        ip = f"10.{4 + (self._ips >> 16) % 4}.{(self._ips >> 8) & 255}.{self._ips & 255}"
        status = {**cur.get("status", {}), "phase": "Running", "startTime": now, "podIP": ip,
                  "podIPs": [{"ip": ip}]}
        ready = ready_after <= 0
        status["containerStatuses"] = [{"name": c["name"], "image": c.get("image", ""), "ready": ready,
                                        "restartCount": 0, "started": True, "state": {"running": {"startedAt": now}}}
                                       for c in cur["spec"].get("containers") or []]
        status["conditions"] = kubelet_conditions(cur, status, now)
        running = self.store.update({**cur, "status": status})
        for c in cur["spec"].get("containers") or []:
            self.events.event(running, "Normal", "Created", f"Created container: {c['name']}", "kubelet")
            self.events.event(running, "Normal", "Started", f"Started container {c['name']}", "kubelet")
        if startup is not None and startup.fail:  # it exits before any work: no duration, no kubetwin.io/fail-after
            self._crashing.add(meta["uid"])
            self.env.after(ready_after, lambda: self._container_failed(running, 0, startup.fail))
            return
        if not ready:
            self.env.after(ready_after, lambda: self._became_ready(running))
        annotations = meta.get("annotations") or {}
        hooked: float | Work | None = None
        for hook in self.duration_hooks:  # the first that answers wins
            hooked = hook(running, node)
            if hooked is not None:
                break
        if hooked is not None or DURATION in annotations:
            work = hooked if isinstance(hooked, Work) else Work(
                self._duration(annotations[DURATION]) if hooked is None else float(hooked))
            if work.hold:
                self._held[meta["uid"]] = (running, node, work)
            else:
                self._begin(running, node, work)
        if FAIL_AFTER in annotations:
            self._arm_failure(running, 0)

    def _begin(self, running: Obj, node: Obj | None, work: Work) -> None:
        """The pod's work starts: resume from its checkpointed progress, pay setup and restore, run; or fail
        where the work would start (`Work.fail`: through GpuRuntime, as a shared GPU's out-of-memory fails)."""
        meta, annotations = running["metadata"], running["metadata"].get("annotations") or {}
        duration = work.duration
        interval = work.interval if work.interval is not None else (
            self._duration(annotations[CHECKPOINT]) if CHECKPOINT in annotations else None)
        key = work_key(running)
        resumed = min(self.progress.get(key, 0.0) * interval, duration) if key is not None and interval else 0.0
        overhead = work.setup + (work.restart if resumed > 0 else 0.0)  # work starts after it
        if ELAPSED in annotations:  # already running at the run's start: no setup, its work under way
            overhead = -min(self._duration(annotations[ELAPSED]), duration - resumed)
        if work.fail:
            self.gpus.fail(running, work.fail, max(overhead, 0.0))
            return
        if math.isinf(duration):  # no duration (a gang rank released without one): it runs until stopped
            return
        req: dict[str, float] = {**self._requests(running)}
        dra_gpus = nvidia_dra.pod_gpus(self.store, running)  # GPUs held through ResourceClaims
        if dra_gpus:
            req[GPU] = req.get(GPU, 0) + dra_gpus
        self._runs[meta["uid"]] = _Run(key, self.env.now + overhead, interval, duration, resumed,
                                       {r: req[r] for r in ACCELERATORS if req.get(r)})
        self.gpus.start(running, node, overhead + duration - resumed, on_device=work.on_device)

    def _duration(self, value: object) -> float:
        """parse_duration, remembered per annotation text (every pod of a Job carries the same one)."""
        if not isinstance(value, str):
            return parse_duration(value)
        seconds = self._durations.get(value)
        if seconds is None:
            seconds = self._durations[value] = parse_duration(value)
        return seconds

    def _became_ready(self, pod: Obj) -> None:
        """The readiness probe passes: the model is loaded and the server answers."""
        cur = self._current(pod)
        if cur is None:
            return
        status = {**cur["status"], "containerStatuses": [
            {**cs, "ready": True} for cs in cur["status"].get("containerStatuses") or []]}
        status["conditions"] = kubelet_conditions(cur, status, self.store.timestamp(self.env.now))
        self.store.update({**cur, "status": status})

    def _arm_failure(self, pod: Obj, attempt: int) -> None:
        after = self._duration(pod["metadata"]["annotations"][FAIL_AFTER])
        code = int(pod["metadata"]["annotations"].get(EXIT_CODE, 1))
        self.env.after(after, lambda: self._container_failed(pod, attempt, exit_code=code))

    def _current(self, pod: Obj) -> Obj | None:
        meta = pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Running":
            return None
        return cur

    def _container_failed(self, pod: Obj, attempt: int, message: str = "", exit_code: int = 1) -> None:
        cur = self._current(pod)
        statuses = (cur or {}).get("status", {}).get("containerStatuses") or []
        if cur is None or any(cs.get("restartCount", 0) != attempt for cs in statuses):
            return
        if cur["spec"].get("restartPolicy", "Always") == "Never":
            self._crashing.discard(meta_uid(cur))
            self._finish(cur, "Failed", exit_code, "Error", message)
            return
        n, meta = attempt + 1, cur["metadata"]
        backoff = min(BACKOFF_INITIAL * 2 ** attempt, BACKOFF_MAX)
        now = self.store.timestamp(self.env.now)
        who = f"{meta['name']}_{meta.get('namespace')}({meta['uid']})"
        status = dict(cur["status"])
        status["containerStatuses"] = [{
            **cs, "ready": False, "started": False, "restartCount": n, "state": {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {int(backoff)}s restarting failed container={cs['name']} pod={who}"}},
            "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error",
                                         **({"message": message} if message else {}), "finishedAt": now,
                                         "startedAt": cs["state"].get("running", {}).get("startedAt")}}}
            for cs in statuses]
        status["conditions"] = kubelet_conditions(cur, status, now)
        waiting = self.store.update({**cur, "status": status})
        for cs in statuses:
            self.events.event(waiting, "Warning", "BackOff", f"Back-off restarting failed container {cs['name']} in "
                              f"pod {who}", "kubelet")
        self.env.after(backoff, lambda: self._restarted(waiting, n))

    def _restarted(self, pod: Obj, n: int) -> None:
        cur = self._current(pod)
        if cur is None:
            return
        now = self.store.timestamp(self.env.now)
        if meta_uid(cur) in self._crashing:
            self._start_again(cur, n, now)
            return
        status = {**cur["status"], "containerStatuses": [
            {**cs, "ready": True, "started": True, "state": {"running": {"startedAt": now}}}
            for cs in cur["status"].get("containerStatuses") or []]}
        status["conditions"] = kubelet_conditions(cur, status, now)
        running = self.store.update({**cur, "status": status})
        for cs in status["containerStatuses"]:
            self.events.event(running, "Normal", "Started", f"Started container {cs['name']}", "kubelet")
        self._arm_failure(running, n)

    def _startup(self, pod: Obj, node: Obj | None) -> Startup | None:
        """The first startup hook's answer for the pod on its node (serving's cold start), None when none has one,
        or for a pod that was already running when the run started (kubetwin.io/elapsed: its image is on the node,
        its server warm)."""
        if ELAPSED in (pod["metadata"].get("annotations") or {}):
            return None
        return next((s for s in (h(pod, node) for h in self.startup_hooks) if s is not None), None)

    def _start_again(self, cur: Obj, n: int, now: str) -> None:
        """A container that exited while starting runs its start again (the image is on the node): the hooks say
        whether it fails again (the same device, or a GPU its neighbours have left since) or turns Ready."""
        node = self.store.get("Node", "", cur["spec"]["nodeName"])
        startup = self._startup(cur, node)
        status = {**cur["status"], "containerStatuses": [
            {**cs, "ready": False, "started": True, "state": {"running": {"startedAt": now}}}
            for cs in cur["status"].get("containerStatuses") or []]}
        running = self.store.update({**cur, "status": status})
        for cs in status["containerStatuses"]:
            self.events.event(running, "Normal", "Started", f"Started container {cs['name']}", "kubelet")
        if startup is not None and startup.fail:
            self.env.after(startup.ready_after, lambda: self._container_failed(running, n, startup.fail))
            return
        self._crashing.discard(meta_uid(cur))
        self.env.after(startup.ready_after if startup is not None else 0.0, lambda: self._became_ready(running))

    def _finish(self, pod: Obj, phase: str, exit_code: int, reason: str = "Completed", message: str = "") -> None:
        meta = pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Running":
            return
        run = self._runs.get(meta["uid"])
        if phase == "Succeeded" and run is not None and run.stalled is not None:
            return  # stalled: its work is not done, it waits for a collective that never completes
        self.gpus.release(meta["uid"])
        now = self.store.timestamp(self.env.now)
        status = {**cur["status"], "phase": phase}
        terminated = {"exitCode": exit_code, "reason": reason, **({"message": message} if message else {})}
        status["containerStatuses"] = [{**cs, "ready": False, "started": False, "state": {"terminated": {
            **terminated, "startedAt": cs["state"].get("running", {}).get("startedAt"), "finishedAt": now}}}
            for cs in status.get("containerStatuses") or []]
        status["conditions"] = kubelet_conditions(cur, status, now)
        self.store.update({**cur, "status": status})

    def _stopped(self, pod: Obj, run: _Run) -> None:
        """The pod stopped before its work was done (failed, preempted, deleted): keep what it checkpointed for
        the next pod doing the same work, and count the rest as lost."""
        self.gpus.release(pod["metadata"]["uid"])  # a shared GPU's other tenants speed up
        ran = (self.env.now if run.stalled is None else run.stalled) - run.start
        saved, lost = checkpoint_split(min(ran, run.duration - run.resumed), run.interval)
        if run.key is not None and run.interval:
            self.progress[run.key] = min(run.duration, run.resumed + saved) / run.interval
        meta = pod["metadata"]
        owner = run.key[1] if run.key is not None else meta["name"]
        rec = self.lost_work.setdefault((meta.get("namespace") or "", owner), {
            "seconds": 0.0, "interruptions": 0, **{k: 0.0 for k in ACCELERATORS.values()}})
        rec["seconds"] += lost
        rec["interruptions"] += 1
        for res, n in run.accelerators.items():
            rec[ACCELERATORS[res]] += lost * n


def meta_uid(pod: Obj) -> str:
    return pod["metadata"]["uid"]
