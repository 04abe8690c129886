"""Gangs: the ranks of a distributed training job block until every rank runs, and stall when one is lost.

Why: torchrun, JAX and the launchers built on them (DeepSpeed, Megatron, MaxText) start with a rendezvous: each
rank blocks in it until all `world` ranks have joined. Three Running pods of a four-rank job do not train while
the fourth is Pending; they hold and bill their GPUs at 0 % DCGM_FI_DEV_GPU_UTIL, and a rendezvous that does not
complete within the launcher's timeout fails them. Once training, every step runs collectives over all ranks: a
rank lost mid-run (Spot preemption, node lost, pod deleted) leaves the survivors blocked in a collective until
NCCL's watchdog (or JAX's coordination service) takes them down.

The rule (`launcher_of` and `multi_host_rank` below are its one implementation): the pods of one Job, JobSet or
Kueue pod group (kueue.x-k8s.io/pod-group-name, its size from kueue.x-k8s.io/pod-group-total-count) that runs more
than one pod at once are a gang when any of these holds, with or without training annotations:
- they carry a training spec (training.kubetwin.io/*) or declare `training.kubetwin.io/gang: "true"`;
- a pod requests google.com/tpu and lands on a host of a multi-host TPU slice (devices/tpu.py `node_slice`): GKE
  gives each pod of the Indexed Job TPU_WORKER_ID (its completion index) and TPU_WORKER_HOSTNAMES (every worker's
  hostname), and the slice's TPU runtime and jax.distributed.initialize wait for every worker ("About TPUs in GKE",
  ../shared/reference/controllers-kueue-dra-deviceplugin-tpu-jobset.md §4: all pods of a slice must run at once);
- a container starts a multi-node launcher: torchrun / `python -m torch.distributed.run` / `torch.distributed.launch`
  with `--nnodes` other than 1 (an elastic `--nnodes=1:N` is no gang: it trains from one node), or JAX's
  multi-process start (JAX_COORDINATOR_ADDRESS in its env, `jax.distributed.initialize` or MaxText in its command).
`training.kubetwin.io/gang: "false"` opts a job out. The launcher: `training.kubetwin.io/launcher`, else the one the
command names, else jax on TPU and torchrun on GPU; torchrun's `--rdzv-conf join_timeout=N` sets its rendezvous
timeout (workloads/training_spec.py lists the gang annotations and the launchers' defaults). A gang rank without a
training spec works for its kubetwin.io/duration once the rendezvous completes, or until stopped without one.
Twin assumption: other single-host TPU pods of one Job are independent (no gang) unless a launcher says otherwise.

The model, per rank (a pod): it starts (the kubelet's duration hook holds its work, `Work.hold`) and waits. When
every rank of the gang waits, all begin their work at once. A rank still waiting `rendezvous-timeout` after it
started fails: exit code 1, the launcher's error as the termination message (torchrun's c10d rendezvous raises
torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError; jax.distributed.initialize a DEADLINE_EXCEEDED
barrier error). When a stepping rank stops before it is done, the others stall (no progress: the kubelet counts
no work after it; GPUs held) and fail `collective-timeout` later with the watchdog's message. What follows is the
Job's backoffLimit (replacement pods rejoin a new rendezvous, resuming from the last checkpoint) or the JobSet's
failurePolicy, as for any failed pod. Twin assumptions: no elastic restarts inside the pod (torchrun
--max-restarts 0, its default), the termination message is the error's last line (terminationMessagePolicy
FallbackToLogsOnError shows it), ranks of restartPolicy OnFailure pods fail the pod like Never ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.podresources import pod_requests
from kubetwin.controllers.kubelet import Kubelet, Work
from kubetwin.devices import tpu
from kubetwin.k8s.conditions import find_condition
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store
from kubetwin.workloads.training import BF16, DDP_BUCKET_BYTES
from kubetwin.workloads.training_spec import PREFIX, GangSpec, TrainingSpec, object_pods, parse_gang

# torchrun (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py: _DistributedRendezvousOpExecutor.run raises
# RendezvousTimeoutError() without text; torchrun's traceback ends with its qualified name).
TORCH_RDZV = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
# jax.distributed.initialize's registration barrier (XLA coordination service, xla/tsl coordination_service.cc:
# kClusterRegisterBarrierId "[Init]Wait_for_all_tasks_to_register"), as GKE recipe users report it
# (AI-Hypercomputer/gpu-recipes issue 2); it waits initialization_timeout=300 s (jax/_src/distributed.py).
JAX_RDZV = ("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: "
            "[Init]Wait_for_all_tasks_to_register::0. This usually happens because a task triggered the barrier too "
            "early or too slowly. Please look at the task logs (both timed out and first task) to debug further.")


# torchrun's console scripts and modules (torch/distributed/run.py; torch.distributed.launch wraps it)
_TORCHRUN = re.compile(r"(?:^|[\s/;&|(])(?:torchrun|torch\.distributed\.run|torch\.distributed\.launch)(?=$|[\s;&|)])")
_NNODES = re.compile(r"--nnodes[= ]+(\S+)")
# --rdzv-conf / --rdzv_conf key=value list (torch/distributed/run.py); the c10d handler reads "join_timeout"
# (dynamic_rendezvous.py create_handler: _get_timeout(params, "join"), default RendezvousTimeout join 600 s)
_JOIN = re.compile(r"join_timeout=([0-9.]+)")
_JAX = re.compile(r"jax\.distributed\.initialize|maxtext", re.IGNORECASE)
JAX_ENV = "JAX_COORDINATOR_ADDRESS"  # jax/_src/distributed.py reads it when no coordinator_address is passed


@dataclass(frozen=True)
class Launcher:
    """What a container's command says about its rendezvous: the launcher and torchrun's join timeout (None:
    the launcher's default)."""

    name: str
    rendezvous_timeout: float | None = None
    nodes: int | None = None  # torchrun's --nnodes (its minimum): the rendezvous waits for that many nodes


def launcher_of(pod_spec: dict) -> Launcher | None:
    """The multi-node launcher a pod's containers start, from their command, args and env; None when none does
    (single-node torchrun: `--nnodes=1`, or elastic with a minimum of 1 node, trains without its peers)."""
    for c in (pod_spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        text = " ".join(str(x) for x in [*(c.get("command") or []), *(c.get("args") or [])])
        if _TORCHRUN.search(text):
            nnodes = _NNODES.search(text)
            # torchrun reads an option it is not given from its PET_<OPTION> variable (torch.distributed.run's
            # env action): Kubeflow Trainer's torch plugin and the training operator set PET_NNODES
            pet = next((str(e.get("value")) for e in c.get("env") or [] if isinstance(e, dict)
                        and e.get("name") == "PET_NNODES" and e.get("value") is not None), None)
            low = (nnodes.group(1).split(":")[0] if nnodes else pet or "1").strip("\"'")
            if low == "1" or "--standalone" in text:  # torchrun's default --nnodes is 1:1; standalone: one node
                continue
            join = _JOIN.search(text)
            return Launcher("torchrun", float(join.group(1)) if join else None, int(low) if low.isdigit() else None)
        env = {str(e.get("name")) for e in c.get("env") or [] if isinstance(e, dict)}
        if JAX_ENV in env or _JAX.search(text):
            return Launcher("jax")
    return None


def multi_host_rank(pod: Obj, node: Obj | None) -> Launcher | None:
    """Whether the pod, on its node, is one rank of a multi-host workload by itself (the caller checks the job runs
    more than one pod): a launcher in its command, else a TPU pod on a multi-host slice (jax unless it says
    otherwise). None: not by this rule."""
    found = launcher_of(pod.get("spec") or {})
    if found is not None:
        return found
    if pod_requests(pod).get(tpu.RESOURCE) and node is not None and tpu.node_slice(node) is not None:
        return Launcher("jax")
    return None


def _multi_host_template(pod_spec: dict, on_slice: bool) -> bool:
    """The manifest-time view of the rule, for install and validate: a launcher, or TPU chips when the pod may
    land on a multi-host slice (`on_slice`: install cannot know where a pod lands, validate reads its selector)."""
    return launcher_of(pod_spec) is not None or bool(on_slice and pod_requests({"spec": pod_spec}).get(tpu.RESOURCE))


def _selects_multi_host(pod_spec: dict) -> bool:
    """Whether the pod's nodeSelector names a TPU topology of more chips than the pod takes (one host of a
    multi-host slice); a pod without one may still land on a slice (install asks `might_be_gang` instead)."""
    sel = pod_spec.get("nodeSelector") or {}
    topology = sel.get(tpu.TOPOLOGY_LABEL)
    if not topology:
        return False
    try:
        return tpu.chips(str(topology)) > int(pod_requests({"spec": pod_spec}).get(tpu.RESOURCE) or 0)
    except (tpu.TopologyError, ValueError):
        return False


def might_be_gang(kind: str, obj: dict) -> bool:
    """Whether a Job, JobSet or Kueue pod group's Pod may be a gang without gang annotations: it runs more than one
    pod at once and one of its pod templates requests TPU chips or starts a multi-node launcher (install wires the
    gang coordinator then; the kubelet hook decides per pod where it lands)."""
    if kind == "TrainJob":  # Kubeflow Trainer: a multi-node trainer runs torchrun / JAX over its nodes
        return int(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1) > 1
    if kind == "PyTorchJob":  # the training operator: its master and workers are one torch.distributed world
        specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        return sum(int((rs or {}).get("replicas", 1)) for rs in specs.values() if isinstance(rs, dict)) > 1
    if kind not in ("Job", "JobSet", "Pod") or not isinstance(obj.get("spec"), dict):
        return False
    if kind == "Pod":  # kueue pkg/controller/jobs/pod: GroupNameLabel, GroupTotalCountAnnotation
        meta = obj.get("metadata") or {}
        count = str((meta.get("annotations") or {}).get("kueue.x-k8s.io/pod-group-total-count", ""))
        grouped = bool((meta.get("labels") or {}).get("kueue.x-k8s.io/pod-group-name"))
        return grouped and count.isdigit() and int(count) > 1 and _multi_host_template(obj["spec"], True)
    pods = object_pods(kind, obj["spec"])
    return (sum(n for _, n in pods) > 1 and any(_multi_host_template(s, True) for s, _ in pods)) or any(
        ((launcher_of(s) or Launcher("")).nodes or 0) > 1 for s, _ in pods)


def gang_spec(annotations: dict, found: Launcher | None) -> GangSpec:
    """The gang's launcher and timeouts: annotations first, then what the command says, then the defaults (jax
    for a TPU slice found without a launcher in its command). Raises SpecError as parse_gang does."""
    if found is None:
        return parse_gang(annotations)
    return parse_gang(annotations, found.name, found.rendezvous_timeout)


def watchdog_message(launcher: str, rank: int, seq: int, spec: TrainingSpec | None, world: int,
                     timeout: float) -> str:
    """The error a survivor dies of: ProcessGroupNCCL's watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:
    "[Rank r] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=..., NumelIn=...,
    NumelOut=..., Timeout(ms)=...) ran for ... milliseconds before timing out.") for torchrun; for JAX the
    coordination service's missed-heartbeat error (its wording here is a twin assumption)."""
    ms = int(round(timeout * 1000))
    if launcher == "jax":
        return (f"jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: The following tasks are unhealthy (stopped "
                f"sending heartbeats): /job:jax_worker/replica:0/task:{rank}. The tasks have crashed. Check the task "
                "logs for an earlier error to debug further.")
    if spec is not None and spec.fsdp:  # FSDP's next all-gather of a layer's shard
        out = int(spec.params / spec.layers / (spec.tp * spec.pp))
        op, numel_in, numel_out = "_ALLGATHER_BASE", max(1, out // max(1, world)), out
    elif spec is not None:  # DDP's gradient bucket
        op, numel_in = "ALLREDUCE", int(min(DDP_BUCKET_BYTES, BF16 * spec.params / (spec.tp * spec.pp)) // BF16)
        numel_out = numel_in
    else:
        op, numel_in, numel_out = "ALLREDUCE", 1, 1
    return (f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
            f"NumelIn={numel_in}, NumelOut={numel_out}, Timeout(ms)={ms}) ran for {ms} milliseconds before "
            "timing out.")


@dataclass
class _Rank:
    pod: Obj
    node: Obj | None
    rank: int
    since: float  # when it started waiting


@dataclass
class _Gang:
    spec: GangSpec
    world: int
    waiting: dict[str, _Rank] = field(default_factory=dict)  # uid -> a rank blocked in the rendezvous
    stepping: dict[str, _Rank] = field(default_factory=dict)  # uid -> a rank training
    stalled: float | None = None  # when a stepping rank was lost (the survivors hang since)
    gave_up: dict[int, float] = field(default_factory=dict)  # rank -> when it last failed its rendezvous
    log: list[dict] = field(default_factory=list)  # what explain tells: rendezvous timeouts, stalls, starts


def diagnostics(m: Manifest, chains: list[list[tuple[str, dict]]]) -> list[Diagnostic]:
    """A notice for a gang whose pods restart in place (restartPolicy OnFailure): the twin fails the pod when the
    launcher fails, as with restartPolicy Never, and the Job replaces it (the kubelet does not restart a rank's
    container in place). A warning for torchrun waiting for more nodes (--nnodes) than the object runs pods: its
    rendezvous never completes."""
    if m.kind not in ("Job", "JobSet"):
        return []
    pods = object_pods(m.kind, m.obj.get("spec") or {})
    world = sum(n for _, n in pods)
    out = []
    paths = [t.at("spec") for t in kinds.pod_templates(m.obj)]
    for (pod_spec, _), chain, base in zip(pods, chains, paths, strict=False):
        merged = {k: v for _, a in chain for k, v in a.items()}
        declared = str(merged.get(PREFIX + "gang", "")).lower()
        found = launcher_of(pod_spec)
        if found is not None and (found.nodes or 0) > world and declared != "false":
            out.append(Diagnostic(
                m.file, m.line_of(f"{base}.containers"), m.ref, f"{base}.containers",
                f"torchrun --nnodes={found.nodes} waits for {found.nodes} nodes but the {m.kind} runs {world} "
                f"pod{'s' if world != 1 else ''} at once: its rendezvous never completes, and every rank fails "
                f"with RendezvousTimeoutError after join_timeout ({int(found.rendezvous_timeout or 600)} s)",
                f"run {found.nodes} pods (parallelism and completions), or pass --nnodes={world}", "warning"))
        if pod_spec.get("restartPolicy") != "OnFailure" or declared == "false" or (world <= 1 and declared != "true"):
            continue  # one pod is no gang unless declared one
        if declared != "true" and not any(str(k).startswith(PREFIX) for k in merged) and \
                not _multi_host_template(pod_spec, _selects_multi_host(pod_spec)):
            continue  # no annotation, no TPU slice, no launcher: not a gang by the rule
        out.append(Diagnostic(m.file, m.line_of(f"{base}.restartPolicy"), m.ref, f"{base}.restartPolicy",
                              "a gang rank whose launcher fails (rendezvous or collective timeout) fails the pod "
                              "in the twin, as with restartPolicy Never; the kubelet does not restart its "
                              "container in place", 'use restartPolicy: Never (and the Job\'s backoffLimit)',
                              "notice"))
    return out


class GangCoordinator:
    """The launchers' rendezvous and collective timeouts over the kubelet's runs; `record` feeds training.json."""

    def __init__(self, store: Store, env: Environment, kubelet: Kubelet, model: Any) -> None:
        self.store, self.env, self.kubelet, self.model = store, env, kubelet, model
        self.gangs: dict[tuple[str, str], _Gang] = {}
        self._member: dict[str, tuple[str, str]] = {}  # uid of a stepping rank -> its gang
        store.watch("Pod", self._on_pod)

    def join(self, pod: Obj, node: Obj | None, gspec: GangSpec, world: int, rank: int,
             work: Callable[[Obj, Obj | None], Work | None]) -> None:
        """A rank started and blocks in the rendezvous (the kubelet holds its work)."""
        key, uid = self.model.job_key(pod), pod["metadata"]["uid"]
        g = self.gangs.setdefault(key, _Gang(gspec, world))
        g.spec, g.world = gspec, world
        g.waiting[uid] = _Rank(pod, node, rank, self.env.now)
        self.env.after(0, lambda: self._try_release(key, work))
        self.env.after(gspec.rendezvous_timeout, lambda: self._rendezvous_timeout(key, uid))

    def _running(self, r: _Rank) -> Obj | None:
        meta = r.pod["metadata"]
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        ok = cur is not None and cur["metadata"]["uid"] == meta["uid"] and cur["status"].get("phase") == "Running"
        return cur if ok else None

    def _try_release(self, key: tuple[str, str], work: Callable[[Obj, Obj | None], Work | None]) -> None:
        g = self.gangs[key]
        for uid, r in list(g.waiting.items()):
            if self._running(r) is None:
                del g.waiting[uid]
        if len({r.rank for r in g.waiting.values()}) < g.world:
            return
        ranks = list(g.waiting.items())  # in the order they joined (the kubelet started them)
        g.waiting = {}
        waited = self.env.now - min(r.since for _, r in ranks)
        g.log.append({"t": self.env.now, "event": "started", "ranks": len(ranks), "waited": waited})
        for uid, r in ranks:  # every rank is bound now: the placement is the real one
            self.kubelet.begin(uid, work(self._running(r) or r.pod, r.node))
            g.stepping[uid] = r
            self._member[uid] = key

    def _rendezvous_timeout(self, key: tuple[str, str], uid: str) -> None:
        g = self.gangs[key]
        r = g.waiting.pop(uid, None)
        if r is None or self._running(r) is None:
            return
        message = JAX_RDZV if g.spec.launcher == "jax" else TORCH_RDZV
        g.gave_up[r.rank] = self.env.now
        present = {w.rank for w in g.waiting.values()} | {k for k, t in g.gave_up.items() if t == self.env.now}
        g.log.append({"t": self.env.now, "event": "rendezvous timeout", "rank": r.rank,
                      "pod": r.pod["metadata"]["name"], "waited": self.env.now - r.since,
                      "missing": self._missing(key, g, present), "message": message})
        self.kubelet.fail_containers(r.pod, message)

    def _missing(self, key: tuple[str, str], g: _Gang, present: set[int]) -> list[dict]:
        """The ranks not at the rendezvous, each with its current pod and why it is not running."""
        pods: dict[int, Obj] = {}
        for p in self.model.gang_pods(key):
            if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            rank = self.model.rank(p)
            if rank not in pods or p["metadata"].get("creationTimestamp", "") >= \
                    pods[rank]["metadata"].get("creationTimestamp", ""):
                pods[rank] = p
        out = []
        for rank in range(g.world):
            if rank in present:
                continue
            p = pods.get(rank)
            if p is None:
                out.append({"rank": rank, "pod": None, "phase": None, "why": "no pod for this rank"})
                continue
            st = p.get("status") or {}
            cond = find_condition(st.get("conditions"), "PodScheduled")
            why = ""
            if st.get("phase") == "Pending" and cond and cond.get("status") == "False":
                why = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
            elif st.get("phase") == "Pending" and not p["spec"].get("nodeName"):
                why = "not scheduled yet"
            elif st.get("phase") == "Pending":
                why = f"starting on {p['spec']['nodeName']}"
            elif st.get("phase") == "Running" and p["metadata"]["uid"] in self._member:
                why = "still stuck in the previous run's collectives"
            out.append({"rank": rank, "pod": p["metadata"]["name"], "phase": st.get("phase"), "why": why})
        return out

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        """Watch handler: a stepping rank that stopped before its work was done is lost (enqueued, not handled)."""
        uid = pod["metadata"]["uid"]
        if uid not in self._member:
            return
        phase = (pod.get("status") or {}).get("phase")
        if etype == "DELETED" or phase in ("Failed", "Succeeded") or pod["metadata"].get("deletionTimestamp"):
            self.env.after(0, lambda: self._stopped(uid, pod, etype))

    def _stopped(self, uid: str, pod: Obj, etype: str) -> None:
        key = self._member.pop(uid, None)
        if key is None:
            return
        g = self.gangs[key]
        r = g.stepping.pop(uid)
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            return
        if g.stalled is not None:  # already hung on an earlier loss (or this is a survivor failing)
            if not g.stepping:
                g.stalled = None
            return
        alive = {suid: s for suid, s in g.stepping.items() if self._running(s) is not None}
        if not alive:
            return  # every rank stopped at this instant (a multi-host slice lost whole): nobody is left to stall
        g.stalled = self.env.now
        st = pod.get("status") or {}
        why = "deleted" if etype == "DELETED" or pod["metadata"].get("deletionTimestamp") else (
            f"{st.get('reason') or 'Failed'}: {st.get('message', '')}".rstrip(": "))
        spec_pl = self.model.inputs.get(key)
        step = self.model.breakdowns[key].step if key in self.model.breakdowns else 0.0
        g.log.append({"t": self.env.now, "event": "rank lost", "rank": r.rank, "pod": pod["metadata"]["name"],
                      "why": why, "survivors": len(alive), "timeout": g.spec.collective_timeout})
        for suid, s in sorted(alive.items(), key=lambda kv: kv[1].rank):
            start = self.kubelet.work_start(suid)
            seq = 1 + (int((self.env.now - start) / step) if step > 0 and start is not None
                       and start <= self.env.now else 0)
            message = watchdog_message(g.spec.launcher, s.rank, seq, spec_pl[0] if spec_pl else None,
                                       g.world, g.spec.collective_timeout)
            self.kubelet.stall(suid)
            self.env.after(g.spec.collective_timeout, lambda s=s, m=message: self.kubelet.fail_containers(s.pod, m))

    def record(self, key: tuple[str, str]) -> dict | None:
        """The gang's part of training.json: launcher, world, timeouts and what happened, in order."""
        g = self.gangs.get(key)
        if g is None:
            return None
        out = {"launcher": g.spec.launcher, "world": g.world, "rendezvous_timeout": g.spec.rendezvous_timeout,
               "collective_timeout": g.spec.collective_timeout, "log": g.log}
        waiting = sorted((r for r in g.waiting.values() if self._running(r) is not None), key=lambda r: r.rank)
        if waiting:  # the run ended while these ranks still waited in the rendezvous
            present = {r.rank for r in waiting}
            out["waiting_at_end"] = {"ranks": [{"rank": r.rank, "pod": r.pod["metadata"]["name"], "since": r.since}
                                               for r in waiting],
                                     "missing": self._missing(key, g, present)}
        return out
