"""Spot VM preemption on GKE: the notice, the kubelet's graceful node shutdown, the VM stopping, the MIG re-creating it.

What the twin replays (sources; numbers are GKE's defaults):
- Compute Engine preempts a Spot VM with a preemption notice and an ACPI G2 soft off; 30 s later the VM is stopped
  (ACPI G3 mechanical off). Compute Engine API `Scheduling.skipGuestOsShutdown`: "120 seconds between GCE ACPI G2
  Soft Off and ACPI G3 Mechanical Off for Standard VMs and 30 seconds for Spot VMs";
  https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms ("Termination and graceful shutdown of Spot VMs").
- GKE runs the kubelet's graceful node shutdown on Spot nodes: of the 30 s, non-system pods get up to the first 15 s
  (a larger terminationGracePeriodSeconds has no effect), pods of priority system-cluster-critical /
  system-node-critical the next 15 s (https://cloud.google.com/kubernetes-engine/docs/how-to/preemptible-vms,
  same text on the Spot VMs page). Kubelet terms: shutdownGracePeriod 30s, shutdownGracePeriodCriticalPods 15s.
- The kubelet's shutdown manager (kubernetes pkg/kubelet/nodeshutdown): records the Node event `Shutdown` "Shutdown
  manager detected shutdown event", reports the node NotReady (KubeletNotReady, "node is shutting down"; its
  ReadyCondition setter includes the shutdown manager's error, and it records `NodeNotReady`), kills every pod
  with gracePeriod = min(pod's terminationGracePeriodSeconds, its group's period), and writes phase Failed, reason
  `Terminated`, message "Pod was terminated in response to imminent node shutdown." and condition
  DisruptionTarget/TerminationByKubelet. The node-lifecycle controller (controllers/nodelifecycle.py) then taints
  the NotReady node `node.kubernetes.io/not-ready` NoSchedule (TaintNodesByCondition), which is what keeps new pods
  off it, and NoExecute.
  (`node.kubernetes.io/out-of-service` is the taint an administrator adds after a *non-graceful* shutdown; nothing
  sets it here.)
- PodDisruptionBudgets: graceful node shutdown kills pods through the kubelet, not the Eviction API, so a preemption
  ignores PDBs (as every involuntary disruption does); drains (kubectl drain, node upgrades, the cluster
  autoscaler's scale-down) evict through the Eviction API and honour them.
- A Spot node pool's VMs live in a managed instance group, which re-creates a preempted VM (same instance name)
  when capacity allows: here after the pool's bootDelay (a twin assumption, as at first boot).
- A multi-host TPU slice is recovered and rescheduled only as a whole (https://cloud.google.com/tpu/docs/
  failure-recovery, "Multi-host slice recovery requirements"): preempting one host shuts down every host of the
  slice together (the twin's reading: the slice is one unit of capacity) and NodePoolController.fail_slice
  re-creates it whole.

The twin's simplifications: pods use their whole grace period (a pod that exits at once on SIGTERM is not
modelled); the Node object is deleted when the VM stops (t + 30 s) and registered again when the MIG's new VM
boots. The `Preempted` Node event is the twin's own wording (Compute Engine reports preemption in its audit log,
`compute.instances.preempted`, not as a Kubernetes Event).
"""

from __future__ import annotations

import random
from collections import Counter

from kubetwin.api.twin import DEFAULT_ZONE
from kubetwin.controllers.kubelet_status import kubelet_conditions
from kubetwin.k8s.conditions import set_condition
from kubetwin.k8s.names import GKE_NODEPOOL, ZONE
from kubetwin.k8s.units import parse_duration
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

NOTICE_TO_STOP = 30.0  # Spot VM: ACPI G2 soft off -> G3 mechanical off
POD_GRACE_CAP = 15.0  # GKE: non-system pods' share of the 30 s
CRITICAL_GRACE = 15.0  # shutdownGracePeriodCriticalPods
SYSTEM_CRITICAL_PRIORITY = 2000000000  # scheduling.SystemCriticalPriority (system-cluster-critical)
DEFAULT_GRACE = 30  # the API default of terminationGracePeriodSeconds
SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NODE_SHUTTING_DOWN = "node is shutting down"
POOL_LABEL = GKE_NODEPOOL


class SpotPreemptionController:
    """Preempts the VMs of Spot node pools that carry `spec.spotPreemption` (rate and/or schedule).

    `preemptions[pool]` counts Compute Engine preemption notices, `nodes_shut_down[pool]` the nodes that went down
    with them (a multi-host slice's hosts all go), `timeline` lists (time, pool, node) of each notice."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, pools: object, seed: int = 0) -> None:
        self.store, self.env, self.events, self.pools, self.seed = store, env, events, pools, seed
        self.preemptions: Counter[str] = Counter()
        self.nodes_shut_down: Counter[str] = Counter()
        self.timeline: list[tuple[float, str, str]] = []
        self._lives: Counter[str] = Counter()  # node name -> VMs registered under it so far
        self._shutting: set[str] = set()  # node uids shutting down
        store.watch("NodePool", self._on_pool)
        store.watch("Node", self._on_node)

    def contribute(self, until: float) -> Contribution:
        """summary.json's spot section (preemptions and shut-down nodes per pool, when and where) when a pool
        has spotPreemption or a preemption happened."""
        if not (self.preemptions or any((p.get("spec") or {}).get("spotPreemption")
                                        for p in self.store.list("NodePool"))):
            return Contribution()
        return Contribution(summary={"spot": {
            "preemptions": dict(sorted(self.preemptions.items())),
            "nodes_shut_down": dict(sorted(self.nodes_shut_down.items())),
            "preemption_times": [{"t": t, "pool": pool, "node": node} for t, pool, node in self.timeline]}})

    # -- when ---------------------------------------------------------------------------------------
    @staticmethod
    def _policy(pool: Obj | None) -> dict | None:
        spec = (pool or {}).get("spec") or {}
        return spec.get("spotPreemption") if spec.get("spot") else None

    def _on_pool(self, etype: str, pool: Obj, old: Obj | None) -> None:
        policy = self._policy(pool)
        if etype != "ADDED" or not policy:
            return
        name, uid = pool["metadata"]["name"], pool["metadata"].get("uid")
        for i, entry in enumerate(policy.get("schedule") or []):
            self.env.at(parse_duration(entry["at"]), lambda i=i, e=entry: self._scheduled(name, uid, i, e))

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        """Each VM draws its own time to preemption when it registers (exponential, seeded by the Scenario seed,
        the node name and how many VMs had that name before): the same seed gives the same preemptions."""
        if etype != "ADDED":
            return
        name = node["metadata"]["name"]
        pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL, "")
        policy = self._policy(self.store.get("NodePool", "", pool))
        rate = float((policy or {}).get("ratePerNodeHour") or 0.0)
        if rate <= 0:
            return
        self._lives[name] += 1
        delay = random.Random(f"{self.seed}/{name}/{self._lives[name]}").expovariate(rate / 3600.0)
        uid = node["metadata"].get("uid")
        self.env.after(delay, lambda: self._fire(name, uid))

    def _fire(self, name: str, uid: str | None) -> None:
        node = self.store.get("Node", "", name)
        if node is not None and node["metadata"].get("uid") == uid:  # the same VM still
            self.preempt(name)

    def _scheduled(self, pool: str, uid: str | None, i: int, entry: dict) -> None:
        live = self.store.get("NodePool", "", pool)
        if live is None or live["metadata"].get("uid") != uid:
            return
        up = sorted(n["metadata"]["name"] for n in self.store.list("Node")
                    if (n["metadata"].get("labels") or {}).get(POOL_LABEL) == pool
                    and n["metadata"].get("uid") not in self._shutting)
        if entry.get("nodeNames"):
            picked = [n for n in entry["nodeNames"] if n in up]
        else:
            rng = random.Random(f"{self.seed}/{pool}/schedule/{i}")
            picked = sorted(rng.sample(up, min(entry.get("nodes") or 1, len(up))))
        for name in picked:
            self.preempt(name)

    # -- what ---------------------------------------------------------------------------------------
    def preempt(self, name: str) -> bool:
        """Compute Engine preempts the VM behind Node `name` now. Returns False if it is gone or going already."""
        node = self.store.get("Node", "", name)
        if node is None or node["metadata"].get("uid") in self._shutting:
            return False
        pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL, "")
        slice_pool = self.pools.slice_of(name) if hasattr(self.pools, "slice_of") else None
        hosts = [name]
        if slice_pool is not None:  # the whole multi-host slice goes with it
            hosts += [h for h in self.pools.slice_nodes(slice_pool) if h != name]
        self.preemptions[pool] += 1
        self.timeline.append((self.env.now, pool, name))
        self.events.event(node, "Warning", "Preempted",  # the twin's wording (see the module docstring)
                          f"Compute Engine preempted Spot VM {name}: ACPI G2 soft off now, the VM stops in "
                          f"{int(NOTICE_TO_STOP)}s" + (f"; multi-host TPU slice {slice_pool} goes with it"
                                                        if slice_pool is not None else ""), "compute-engine")
        down = [h for h in hosts if self._shutdown(h)]
        self.env.after(NOTICE_TO_STOP, lambda: self._stopped(name, down, slice_pool))
        return True

    def _shutdown(self, name: str) -> bool:
        """The kubelet's graceful node shutdown on one node."""
        node = self.store.get("Node", "", name)
        if node is None or node["metadata"].get("uid") in self._shutting:
            return False
        self._shutting.add(node["metadata"].get("uid"))
        self.nodes_shut_down[(node["metadata"].get("labels") or {}).get(POOL_LABEL, "")] += 1
        now = self.store.timestamp(self.env.now)
        self.events.event(node, "Normal", "Shutdown", "Shutdown manager detected shutdown event", "kubelet")
        ready = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": NODE_SHUTTING_DOWN,
                 "lastTransitionTime": now}
        status = node.get("status") or {}
        # the kubelet's ReadyCondition setter (pkg/kubelet/nodestatus/setters.go) updates Ready where it stands
        node = self.store.update({**node, "status": {**status, "conditions": set_condition(
            status.get("conditions"), ready)[0]}})
        self.events.event(node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady", "kubelet")
        pods = [p for p in self.store.list("Pod") if p["spec"].get("nodeName") == name
                and (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        normal = [p for p in pods if int(p["spec"].get("priority") or 0) < SYSTEM_CRITICAL_PRIORITY]
        critical = [p for p in pods if int(p["spec"].get("priority") or 0) >= SYSTEM_CRITICAL_PRIORITY]
        first = max((self._kill(p, 0.0, POD_GRACE_CAP) for p in normal), default=0.0)
        for p in critical:  # after the non-system pods are gone (or their period ran out)
            self._kill(p, first, CRITICAL_GRACE)
        return True

    def _kill(self, pod: Obj, start: float, cap: float) -> float:
        """Kill one pod `start` seconds from now with gracePeriod min(terminationGracePeriodSeconds, cap);
        returns when it is dead, from now."""
        grace = min(float(pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE)), cap)
        meta = pod["metadata"]
        ns, name, uid = meta.get("namespace") or "", meta["name"], meta.get("uid")

        def stopping() -> None:
            cur = self.store.get("Pod", ns, name)
            if cur is not None and cur["metadata"].get("uid") == uid:
                for c in cur["spec"].get("containers") or []:
                    self.events.event(cur, "Normal", "Killing", f"Stopping container {c['name']}", "kubelet")

        def dead() -> None:
            cur = self.store.get("Pod", ns, name)
            if cur is None or cur["metadata"].get("uid") != uid or cur["status"].get("phase") not in (
                    "Pending", "Running"):
                return
            self.store.update({**cur, "status": terminated_status(cur, self.store.timestamp(self.env.now))})
        self.env.after(start, stopping)
        self.env.after(start + grace, dead)
        return start + grace

    def _stopped(self, name: str, hosts: list[str], slice_pool: str | None) -> None:
        """30 s after the notice the VMs are off: their Nodes go; the MIG re-creates them (a slice: whole)."""
        if slice_pool is not None:
            self.pools.fail_slice(slice_pool, name, cause="was preempted")
        for h in hosts:
            node = self.store.get("Node", "", h)
            if node is None:
                continue
            zone = (node["metadata"].get("labels") or {}).get(ZONE, DEFAULT_ZONE)
            self.store.delete("Node", "", h)
            if slice_pool is None and hasattr(self.pools, "recreate"):
                self.pools.recreate(h, zone)


def terminated_status(pod: Obj, now: str) -> dict:
    """The status the kubelet's shutdown manager leaves on a pod it killed (phase Failed unless it had
    succeeded, reason Terminated, DisruptionTarget/TerminationByKubelet; containers killed: exit code 137)."""
    status = dict(pod.get("status") or {})
    if status.get("phase") != "Succeeded":
        status["phase"] = "Failed"
    status["reason"], status["message"] = SHUTDOWN_REASON, SHUTDOWN_MESSAGE
    status["containerStatuses"] = [{**cs, "ready": False, "started": False, "state": {"terminated": {
        "exitCode": 137, "reason": "Error", "startedAt": (cs.get("state") or {}).get("running", {}).get("startedAt"),
        "finishedAt": now}}} for cs in status.get("containerStatuses") or []]
    status["conditions"] = kubelet_conditions(pod, status, now, shared=[{
        "type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": SHUTDOWN_MESSAGE}])
    return status
