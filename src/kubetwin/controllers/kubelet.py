"""Pod lifecycle on a node: start, run for kubetwin.io/duration, finish; node loss fails its pods.

`kubetwin.io/fail-after` makes the containers exit 1 that long after they start: the pod fails with
restartPolicy Never; with OnFailure or Always the kubelet restarts them in place after CrashLoopBackOff
(10s doubling to 5m) and counts restartCount, as the real kubelet does.

Checkpoints (`kubetwin.io/checkpoint-interval` on a pod or pod template): a pod that ran r seconds saved
floor(r / interval) x interval of its work; the next pod doing the same piece of work (the same Job and completion
index: the Job's replacement pod, or a restarted JobSet's re-created child Job, which keeps its name) runs only what
is left of `kubetwin.io/duration`. Without the annotation a stopped pod's work is all lost. Work lost (run time since
the last checkpoint x accelerators) is kept per Job in `lost_work`. Run time is wall time on the node (a pod slowed
by GPU sharing is counted as if it ran at full speed)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from kubetwin.api.podresources import pod_requests
from kubetwin.api.units import parse_duration
from kubetwin.controllers.common import controller_of
from kubetwin.devices import sharing
from kubetwin.devices.gpuruntime import GpuRuntime
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

DURATION = "kubetwin.io/duration"
FAIL_AFTER = "kubetwin.io/fail-after"
BACKOFF_INITIAL, BACKOFF_MAX = 10.0, 300.0  # kubelet's CrashLoopBackOff
CHECKPOINT = "kubetwin.io/checkpoint-interval"
ACCELERATORS = {"nvidia.com/gpu": "gpu_seconds", "google.com/tpu": "tpu_chip_seconds"}


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
    loading weights and warming up before its readiness probe passes); `reason` explains it in a describe."""

    pulls: list[tuple[str, float, int]] = field(default_factory=list)
    ready_after: float = 0.0
    reason: str = ""


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


DurationHook = Callable[[Obj, "Obj | None"], "float | Work | None"]


@dataclass
class _Run:
    """A pod's work while it runs: what it resumed from, since when, and what it holds."""

    key: tuple[str, str, str] | None
    start: float
    interval: float | None
    duration: float
    resumed: float
    accelerators: dict[str, int]


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
        self.startup_hooks: list[StartupHook] = []  # e.g. serving's model-server cold start
        self.duration_hooks: list[DurationHook] = []  # e.g. training's step-time model; first non-None wins
        self._images: dict[str, dict[str, float]] = {}  # node -> image -> when its pull ends (or ended)
        store.watch("Pod", self._on_pod)

    def work_start(self, uid: str) -> float | None:
        """When the running pod's work starts (after its setup or checkpoint restore); None if it runs none."""
        run = self._runs.get(uid)
        return run.start if run is not None else None

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        uid = pod["metadata"]["uid"]
        if uid in self._runs:
            phase = pod.get("status", {}).get("phase")
            if etype == "DELETED" or phase == "Failed":
                self._stopped(pod, self._runs.pop(uid))
            elif phase == "Succeeded":
                run = self._runs.pop(uid)
                if run.key is not None:
                    self.progress.pop(run.key, None)  # done: nothing of it is left to resume
        if etype == "DELETED":
            self.gpus.release(pod["metadata"]["uid"])
            return
        if not pod["spec"].get("nodeName"):
            return
        key = pod["metadata"]["uid"]
        if key in self._started or pod["status"].get("phase") != "Pending":
            return
        self._started.add(key)
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
        # the device manager's Allocate: a shared GPU allows one per container
        refused = sharing.admission_error(((node or {}).get("metadata") or {}).get("labels") or {}, cur)
        if refused:
            status = {**cur.get("status", {}), "phase": "Failed", "reason": "UnexpectedAdmissionError",
                      "message": refused, "startTime": now}
            failed = self.store.update({**cur, "status": status})
            self.events.event(failed, "Warning", "UnexpectedAdmissionError", refused, "kubelet")
            return
        startup = next((s for s in (h(cur, node) for h in self.startup_hooks) if s is not None), None)
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
            self.events.event(cur, "Normal", "Pulled", f'Successfully pulled image "{img}" in {_go_duration(sec)} '
                              f"({_go_duration(sec)} including waiting). Image size: {size} bytes.", "kubelet")
        self._run_containers(cur, node, startup)

    def _run_containers(self, cur: Obj, node: Obj | None, startup: Startup | None) -> None:
        meta = cur["metadata"]
        now = self.store.timestamp(self.env.now)
        ready_after = startup.ready_after if startup is not None else 0.0
        self._ips += 1
        ip = f"10.{4 + (self._ips >> 16) % 4}.{(self._ips >> 8) & 255}.{self._ips & 255}"
        status = {**cur.get("status", {}), "phase": "Running", "startTime": now, "podIP": ip,
                  "podIPs": [{"ip": ip}]}
        ready = ready_after <= 0
        unready = ", ".join(c["name"] for c in cur["spec"].get("containers") or [])
        status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"] + [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized")] + [
            {"type": t, "status": "True", "lastTransitionTime": now} if ready else
            {"type": t, "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now,
             "message": f"containers with unready status: [{unready}]"} for t in ("ContainersReady", "Ready")]
        status["containerStatuses"] = [{"name": c["name"], "image": c.get("image", ""), "ready": ready,
                                        "restartCount": 0, "started": True, "state": {"running": {"startedAt": now}}}
                                       for c in cur["spec"].get("containers") or []]
        running = self.store.update({**cur, "status": status})
        for c in cur["spec"].get("containers") or []:
            self.events.event(running, "Normal", "Created", f"Created container: {c['name']}", "kubelet")
            self.events.event(running, "Normal", "Started", f"Started container {c['name']}", "kubelet")
        if not ready:
            self.env.after(ready_after, lambda: self._became_ready(running))
        annotations = meta.get("annotations") or {}
        hooked = next((w for w in (h(running, node) for h in self.duration_hooks) if w is not None), None)
        if hooked is not None or DURATION in annotations:
            work = hooked if isinstance(hooked, Work) else Work(
                parse_duration(annotations[DURATION]) if hooked is None else float(hooked))
            duration = work.duration
            interval = work.interval if work.interval is not None else (
                parse_duration(annotations[CHECKPOINT]) if CHECKPOINT in annotations else None)
            key = work_key(running)
            resumed = min(self.progress.get(key, 0.0) * interval, duration) if key is not None and interval else 0.0
            overhead = work.setup + (work.restart if resumed > 0 else 0.0)  # work starts after it
            req = pod_requests(running)
            self._runs[meta["uid"]] = _Run(key, self.env.now + overhead, interval, duration, resumed,
                                           {r: req[r] for r in ACCELERATORS if req.get(r)})
            self.gpus.start(running, node, overhead + duration - resumed)
        if FAIL_AFTER in annotations:
            self._arm_failure(running, 0)

    def _became_ready(self, pod: Obj) -> None:
        """The readiness probe passes: the model is loaded and the server answers."""
        cur = self._current(pod)
        if cur is None:
            return
        status = _ready(cur, self.store.timestamp(self.env.now))
        status["containerStatuses"] = [{**cs, "ready": True} for cs in cur["status"].get("containerStatuses") or []]
        self.store.update({**cur, "status": status})

    def _arm_failure(self, pod: Obj, attempt: int) -> None:
        after = parse_duration(pod["metadata"]["annotations"][FAIL_AFTER])
        self.env.after(after, lambda: self._container_failed(pod, attempt))

    def _current(self, pod: Obj) -> Obj | None:
        meta = pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Running":
            return None
        return cur

    def _container_failed(self, pod: Obj, attempt: int) -> None:
        cur = self._current(pod)
        statuses = (cur or {}).get("status", {}).get("containerStatuses") or []
        if cur is None or any(cs.get("restartCount", 0) != attempt for cs in statuses):
            return
        if cur["spec"].get("restartPolicy", "Always") == "Never":
            self._finish(cur, "Failed", 1, "Error")
            return
        n, meta = attempt + 1, cur["metadata"]
        backoff = min(BACKOFF_INITIAL * 2 ** attempt, BACKOFF_MAX)
        now = self.store.timestamp(self.env.now)
        who = f"{meta['name']}_{meta.get('namespace')}({meta['uid']})"
        status = {**cur["status"], "conditions": [
            {**c, "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now}
            if c["type"] in ("Ready", "ContainersReady") else c for c in cur["status"]["conditions"]]}
        status["containerStatuses"] = [{
            **cs, "ready": False, "started": False, "restartCount": n, "state": {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {int(backoff)}s restarting failed container={cs['name']} pod={who}"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now,
                                         "startedAt": cs["state"].get("running", {}).get("startedAt")}}}
            for cs in statuses]
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
        status = _ready(cur, now)
        status["containerStatuses"] = [{**cs, "ready": True, "started": True, "state": {"running": {"startedAt": now}}}
                                       for cs in cur["status"].get("containerStatuses") or []]
        running = self.store.update({**cur, "status": status})
        for cs in status["containerStatuses"]:
            self.events.event(running, "Normal", "Started", f"Started container {cs['name']}", "kubelet")
        self._arm_failure(running, n)

    def _finish(self, pod: Obj, phase: str, exit_code: int, reason: str = "Completed", message: str = "") -> None:
        meta = pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or cur["status"].get("phase") != "Running":
            return
        self.gpus.release(meta["uid"])
        now = self.store.timestamp(self.env.now)
        status = {**cur["status"], "phase": phase}
        status["conditions"] = [({**c, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                                 if c["type"] in ("Ready", "ContainersReady") else c) for c in status["conditions"]]
        terminated = {"exitCode": exit_code, "reason": reason, **({"message": message} if message else {})}
        status["containerStatuses"] = [{**cs, "ready": False, "started": False, "state": {"terminated": {
            **terminated, "startedAt": cs["state"].get("running", {}).get("startedAt"), "finishedAt": now}}}
            for cs in status.get("containerStatuses") or []]
        self.store.update({**cur, "status": status})

    def _stopped(self, pod: Obj, run: _Run) -> None:
        """The pod stopped before its work was done (failed, preempted, deleted): keep what it checkpointed for
        the next pod doing the same work, and count the rest as lost."""
        self.gpus.release(pod["metadata"]["uid"])  # a shared GPU's other tenants speed up
        ran = self.env.now - run.start
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


def _ready(pod: Obj, now: str) -> dict:
    """The pod's status with Ready and ContainersReady turned True at `now`."""
    return {**pod["status"], "conditions": [
        {"type": c["type"], "status": "True", "lastTransitionTime": now}
        if c["type"] in ("Ready", "ContainersReady") else c for c in pod["status"]["conditions"]]}


def _go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration prints it in kubelet events (1m2.5s, 850ms)."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    m, sec = divmod(seconds, 60)
    h, m = divmod(int(m), 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "")
    return out + f"{sec:.3f}".rstrip("0").rstrip(".") + "s"
