"""The job controller of bare Workloads in Kueue's performance suite: its runner's Workload reconciler.

Kueue's scheduler performance test (kubernetes-sigs/kueue@ff69552e test/performance/scheduler) creates Workloads
with no job behind them, each labelled with its run time, and its runner (runner/controller/controller.go) stands in
for the job: once it sees a Workload Admitted it waits ``kueue.x-k8s.io/performance-scheduler-running-ms``
milliseconds from that moment (``setAdmittedTime``: the time the update reached it) and marks it
``Finished=True`` reason ``ByTest`` "By test runner" (``workload.SetConditionAndUpdate``); an evicted one it
releases at once (``UnsetQuotaReservationWithCondition(wl, "Pending", "Evicted by the test runner")``), as a job
controller stops its job. The twin does the same for every Workload carrying that label, so the suite's Workloads
-- or any bare Workload a scenario labels so -- finish; a bare Workload without it holds its quota until deleted,
as in a cluster (validate says so).

Its requests go through its own client: the runner's rest.Config comes from envtest (controller-runtime
pkg/envtest/server.go: QPS 1000, Burst 2000), one bucket per API type as controller-runtime builds them.
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.kueue import api
from kubetwin.kueue.controller.workload import update_status
from kubetwin.kueue.outcomes import condition, find_condition, is_true
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

RUNNING_TIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"  # runner/generator/generator.go
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
RUNNER_QPS, RUNNER_BURST = 1000.0, 2000  # envtest's rest.Config (the runner's -qps/-burst flags left at 0)


def running_ms(wl: Obj) -> int | None:
    """The label's run time; None without the label, 0 when it does not parse (the runner's strconv.Atoi
    failure leaves 0)."""
    value = (wl["metadata"].get("labels") or {}).get(RUNNING_TIME_LABEL)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return 0


class PerformanceRunner:
    """Finishes labelled Workloads their run time after it sees them admitted; releases them when evicted."""

    def __init__(self, store: Store, env: Environment) -> None:
        self.store, self.env = store, env
        self.client = ApiClient("performance-scheduler-runner", RUNNER_QPS, RUNNER_BURST, shared=False)
        self._epoch = api.parse_time(store.start_time)
        self._admitted_at: dict[str, float] = {}  # Workload key -> when the runner saw it admitted
        self._releasing: set[str] = set()
        store.watch("Workload", self._on_workload)

    def _on_workload(self, etype: str, wl: Obj, old: Obj | None) -> None:
        ms = running_ms(wl)
        if ms is None:
            return
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if etype == "DELETED" or not is_true(wl, "Admitted"):
            self._admitted_at.pop(key, None)
            return
        if is_true(wl, "Finished"):
            return
        if is_true(wl, "Evicted"):
            if key not in self._releasing and (wl.get("status") or {}).get("admission"):
                self._releasing.add(key)
                self._request(lambda: self._release(key))
            return
        if key not in self._admitted_at:
            self._admitted_at[key] = since = self.env.now
            self.env.after(ms / 1000.0, lambda: self._request(lambda: self._finish(key, since)))

    def _request(self, do: Callable[[], None]) -> None:
        due = self.client.reserve("workloads/status", "update", self.env.now)
        self.env.at(due, do)

    def _finish(self, key: str, since: float) -> None:
        ns, name = key.split("/", 1)
        wl = self.store.get("Workload", ns, name)
        if wl is None or self._admitted_at.get(key) != since or is_true(wl, "Finished") or is_true(wl, "Evicted"):
            return
        update_status(self.store, wl, conditions=[
            condition("Finished", True, "ByTest", "By test runner", self._epoch + self.env.now)])

    def _release(self, key: str) -> None:
        self._releasing.discard(key)
        ns, name = key.split("/", 1)
        wl = self.store.get("Workload", ns, name)
        if wl is None or not (wl.get("status") or {}).get("admission"):
            return
        now = self._epoch + self.env.now
        conds = [condition("QuotaReserved", False, "Pending", "Evicted by the test runner", now)]
        if (find_condition(wl, "Admitted") or {}).get("status") == "True":  # workload.SyncAdmittedCondition
            conds.append(condition("Admitted", False, "NoReservation", "The workload has no reservation", now))
        update_status(self.store, wl, conditions=conds, admission=None)


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """A bare Workload in the manifests: what Kueue needs of it to queue it (a queue, pod sets with counts and
    containers; the Workload CRD itself is not shipped: api/crds/README.md), and what finishes it."""
    spec = m.obj.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, dict) else None
    if not isinstance(pod_sets, list) or not pod_sets or not all(
            isinstance(ps, dict) and isinstance(((ps.get("template") or {}).get("spec") or {}).get("containers"),
                                                list) for ps in pod_sets):
        return [Diagnostic(m.file, m.line_of("spec.podSets"), m.ref, "spec.podSets",
                           "Required value: a Workload needs podSets, each with a count and a pod template with "
                           "containers", "write podSets: [{name: main, count: 1, template: {spec: {containers: "
                           "[{name: c, resources: {requests: {cpu: \"1\"}}}]}}}]")]
    out: list[Diagnostic] = []
    if not spec.get("queueName"):
        out.append(Diagnostic(m.file, m.line_of("spec"), m.ref, "spec.queueName", "a Workload without queueName "
                              "is not queued: Kueue never admits it", "set spec.queueName to a LocalQueue of its "
                              "namespace", "notice"))
    ms = (m.obj.get("metadata") or {}).get("labels", {}).get(RUNNING_TIME_LABEL)
    owned = any(isinstance(r, dict) and r.get("controller")
                for r in (m.obj.get("metadata") or {}).get("ownerReferences") or [])
    if ms is None and not owned:  # a job's Workload (an imported cluster's): its job's pods run it
        out.append(Diagnostic(m.file, m.line, m.ref, "metadata.labels", "nothing runs a bare Workload: once "
                              "admitted it holds its quota until it is deleted, as in a cluster",
                              f"label it {RUNNING_TIME_LABEL}: \"<ms>\" to have it Finished that long after its "
                              "admission, as Kueue's performance-test runner does", "notice"))
    elif running_ms(m.obj) == 0 and str(ms).strip() != "0":
        fld = f"metadata.labels.{RUNNING_TIME_LABEL}"
        out.append(Diagnostic(m.file, m.line_of(fld), m.ref, fld, f"{ms!r} is not a number of milliseconds: "
                              "the runner finishes it at once (strconv.Atoi fails, 0)", "write whole "
                              "milliseconds, e.g. \"200\"", "notice"))
    return out
