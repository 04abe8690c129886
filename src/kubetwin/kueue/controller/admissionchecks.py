"""Kueue's admission checks and the ProvisioningRequest admission check controller (GKE DWS through Kueue).

Follows kubernetes-sigs/kueue (names, states, messages; the code is not copied):
- apis/kueue/v1beta2/admissioncheck_types.go, provisioningrequestconfig_types.go: an AdmissionCheck names its
  controller (`kueue.x-k8s.io/provisioning-request`) and a ProvisioningRequestConfig (`provisioningClassName`,
  `parameters`, `managedResources`, `retryStrategy` {backoffLimitCount 3, backoffBaseSeconds 60,
  backoffMaxSeconds 1800}); a ClusterQueue lists its checks in `admissionChecksStrategy.admissionChecks[{name,
  onFlavors}]` (v1beta1 also `admissionChecks: [names]`).
- pkg/controller/admissionchecks/provisioning/admissioncheck_reconciler.go: the check is `Active` (True "Active",
  "The admission check is active") when its config exists, else False "BadParametersRef". A ClusterQueue with a
  missing or inactive check admits nothing (pkg/cache clusterqueue.go: AdmissionCheckNotFound /
  AdmissionCheckInactive): it is listed in the snapshot's `inactive`, its workloads wait
  "ClusterQueue <name> is inactive", and its status gets `Active=False` with the reason.
- pkg/scheduler/scheduler.go admit + pkg/workload/admissionchecks.go: a workload that gets quota in a ClusterQueue
  with checks (those whose onFlavors is empty or holds one of its assigned flavors) gets QuotaReserved=True and
  `status.admissionChecks[{name, state: Pending}]`, no Admitted=True: its job stays suspended.
- pkg/controller/admissionchecks/provisioning/controller.go + provisioning.go: per check a ProvisioningRequest
  `<workload>-<check>-<attempt>` (owned by the Workload) with one PodTemplate `ppt-<request>-<podSet>` per PodSet
  (the PodSet's template with the flavors' nodeSelector and tolerations, owned by the request), count from the
  admission, the config's class and parameters plus the Workload's `provreq.kueue.x-k8s.io/<Param>` annotations
  (copied from the job). syncCheckStates maps its conditions: Failed => Retry "Retrying after failure: <msg>" while
  attempt <= backoffLimitCount, else Rejected; CapacityRevoked on an active workload => Rejected; BookingExpired
  before admission => Retry "Retrying after booking expired: <msg>" (Rejected past the limit); Provisioned=True =>
  Ready with podSetUpdates annotations autoscaling.x-k8s.io/consume-provisioning-request and
  autoscaling.x-k8s.io/provisioning-class-name; Accepted => Pending with the Provisioned condition's message.
  Each state change is an `AdmissionCheckUpdated` event.
- pkg/controller/core/workload_controller.go: a Retry check evicts the Workload (Evicted=True "AdmissionCheck",
  "At least one admission check is false"), its quota is released, the checks go back to Pending, and it is queued
  again at requeueState.requeueAt = eviction + requeueAfterSeconds, base·2^(attempt-1) capped at max (KEP-3258
  `requeueAfterSeconds`/`retryCount`; Kueue's jitter left out); the next reservation creates attempt+1. A Rejected
  check deactivates it (spec.active=false, Evicted "DeactivatedDueToAdmissionCheck", Warning event
  AdmissionCheckRejected). When every check is Ready: Admitted=True and the job starts with the podSetUpdates.

Checks with another controllerName are never marked Active by anyone in the twin, so their ClusterQueues stay
inactive (as in a cluster where that controller is not installed). The config's `podSetUpdates.nodeSelector`
(values from provisioningClassDetails) is not modelled: GKE's queued provisioning publishes none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from kubetwin.api.conditions import conditions_of, set_condition
from kubetwin.api.podresources import pod_requests
from kubetwin.controllers.common import owner_ref
from kubetwin.kueue import api
from kubetwin.kueue.controller.jobframework import pod_set_infos
from kubetwin.kueue.controller.workload import update_status
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.metrics import KueueMetrics
from kubetwin.kueue.outcomes import condition, find_condition, is_true
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"  # kueue.ProvisioningRequestControllerName
CONFIG_KIND = "ProvisioningRequestConfig"
CONSUMES = "autoscaling.x-k8s.io/consume-provisioning-request"  # provisioning/constants.go ConsumesAnnotationKey
CLASS_NAME = "autoscaling.x-k8s.io/provisioning-class-name"  # ClassNameAnnotationKey
PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"  # controller/constants ProvReqAnnotationPrefix
PR_API = "autoscaling.x-k8s.io/v1"
PENDING, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"  # kueue.CheckState*
NOT_ACTIVE = "the check is not active"  # CheckInactiveMessage
NO_REQUEST_NEEDED = "the provisioning request is not needed"  # NoRequestNeeded
_HASH = 5
_MAX_PREFIX = 252 - _HASH


def limit_object_name(name: str) -> str:
    """provisioning.go limitObjectName: a name too long is cut and suffixed with 5 hex of its sha1."""
    if len(name) <= _MAX_PREFIX:
        return name
    return f"{name[:_MAX_PREFIX]}-{hashlib.sha1(name.encode()).hexdigest()[:_HASH]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_object_name(f"{workload}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    return limit_object_name(f"ppt-{request}-{pod_set}")


@dataclass(frozen=True)
class ProvisioningConfig:
    name: str
    class_name: str
    parameters: dict
    managed_resources: tuple[str, ...] = ()
    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt n: base·2^(n-1), capped at max."""
        return float(min(self.backoff_base_seconds * 2 ** max(0, attempt - 1), self.backoff_max_seconds))


def parse_config(obj: Obj) -> ProvisioningConfig:
    spec = obj.get("spec") or {}
    rs = spec.get("retryStrategy") or {}
    return ProvisioningConfig(
        obj["metadata"]["name"], spec.get("provisioningClassName") or "",
        {str(k): str(v) for k, v in (spec.get("parameters") or {}).items()},
        tuple(spec.get("managedResources") or ()), int(rs.get("backoffLimitCount", 3)),
        int(rs.get("backoffBaseSeconds", 60)), int(rs.get("backoffMaxSeconds", 1800)))


class CheckHost(Protocol):
    """What the admission checks need from Kueue's manager (`KueueController`): the scheduler's cache (read, and
    the checks' verdict on a ClusterQueue), the metrics, the clock, and three hand-offs made at the same instant —
    upstream the workload and ClusterQueue controllers react to the same status writes through their watches."""

    sched: KueueScheduler
    metrics: KueueMetrics

    def now(self) -> float:
        """Seconds since the epoch, the clock's now."""
        ...

    def on_admitted(self, key: str, cq: str, wl: Obj) -> None:
        """Admitted=True was written (the last check turned Ready): the job starts."""
        ...

    def requeue_evicted(self, wl: Obj) -> None:
        """wl was evicted or deactivated (a Retry or Rejected check): the cache and the job follow."""
        ...

    def cluster_queues_changed(self) -> None:
        """A ClusterQueue's check-derived activity changed."""
        ...


class AdmissionChecks:
    """The AdmissionCheck reconciler, the provisioning check controller and the workload controller's check rules.
    Workloads are written through the store; what the manager must do next goes through `CheckHost`."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, host: CheckHost) -> None:
        self.store, self.env, self.events, self.host = store, env, events, host
        self._refresh_queued = False
        self._sync: set[str] = set()
        store.watch("AdmissionCheck", self._on_check)
        store.watch(CONFIG_KIND, self._on_check)
        store.watch("ProvisioningRequest", self._on_request)

    # -- watches ------------------------------------------------------------------------------------------
    def _on_check(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if not self._refresh_queued:
            self._refresh_queued = True
            self.env.after(0, self._refresh)

    def _on_request(self, etype: str, pr: Obj, old: Obj | None) -> None:
        for ref in pr["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Workload":
                self.queue_sync(f"{pr['metadata'].get('namespace') or 'default'}/{ref['name']}")

    def queue_sync(self, key: str) -> None:
        if not self._sync:
            self.env.after(0, self._sync_all)
        self._sync.add(key)

    # -- AdmissionCheck Active, ClusterQueue Active --------------------------------------------------------
    def _config_of(self, ac: Obj) -> tuple[ProvisioningConfig | None, str]:
        ref = (ac.get("spec") or {}).get("parameters")
        if not ref:
            return None, "missing parameters reference"
        if ref.get("apiGroup") != api.GROUP or ref.get("kind") != CONFIG_KIND:
            return None, f"wrong parameters reference {ref.get('apiGroup')}/{ref.get('kind')}"
        obj = self.store.get(CONFIG_KIND, "", ref.get("name") or "")
        if obj is None:
            return None, f'provisioningrequestconfigs.kueue.x-k8s.io "{ref.get("name")}" not found'
        return parse_config(obj), ""

    def _refresh(self) -> None:
        """acReconciler.Reconcile for every provisioning check, then the ClusterQueues' check-derived activity."""
        self._refresh_queued = False
        for ac in sorted(self.store.list("AdmissionCheck"), key=lambda o: o["metadata"]["name"]):
            if (ac.get("spec") or {}).get("controllerName") != CONTROLLER_NAME:
                continue
            _, err = self._config_of(ac)
            new = (condition("Active", True, "Active", "The admission check is active", self.host.now()) if not err
                   else condition("Active", False, "BadParametersRef", err, self.host.now()))
            old = find_condition(ac, "Active")
            if old is None or old.get("status") != new["status"]:
                new["observedGeneration"] = ac["metadata"].get("generation", 1)
                conds, _ = set_condition(conditions_of(ac), new)
                self.store.update({**ac, "status": {**(ac.get("status") or {}), "conditions": conds}})
        self.refresh_cluster_queues()
        for wl in self.store.list("Workload"):  # acHandler/prcHandler: reconcile the workloads using the checks
            if (wl.get("status") or {}).get("admissionChecks"):
                self.queue_sync(f"{wl['metadata']['namespace']}/{wl['metadata']['name']}")

    def _inactive_reason(self, cq: api.ClusterQueue) -> tuple[str, str]:
        names = list(dict.fromkeys(n for n, _ in cq.admission_checks))
        missing = [n for n in names if self.store.get("AdmissionCheck", "", n) is None]
        if missing:
            return "AdmissionCheckNotFound", f"references missing AdmissionCheck(s): [{' '.join(missing)}]"
        inactive = [n for n in names if not is_true(self.store.get("AdmissionCheck", "", n) or {}, "Active")]
        if inactive:
            return "AdmissionCheckInactive", f"references inactive AdmissionCheck(s): [{' '.join(inactive)}]"
        return "", ""

    def refresh_cluster_queues(self) -> None:
        """Mark ClusterQueues whose checks are missing or inactive (the snapshot leaves them out), and queue the
        write of their Active condition (this runs from watch handlers). Only ClusterQueues with admission checks
        get one."""
        sched = self.host.sched
        changed = False
        for name in sorted(sched.cluster_queues):
            spec = sched.cluster_queues[name]
            if not spec.admission_checks:
                continue
            reason, _ = self._inactive_reason(spec)
            became = sched.set_checks_inactive(name, reason)
            changed = changed or became is not None
            pending = [(wi.obj.namespace, wi.obj.name) for wi in became or ()]  # marked inactive below
            self.env.after(0, lambda name=name, pending=pending: self._write_active(name, pending))
        if changed:
            self.host.cluster_queues_changed()

    def _write_active(self, name: str, pending: list[tuple[str, str]]) -> None:
        """The ClusterQueue reconciler: write its Active condition as the queue stands now, when it reads
        differently, and mark the pending Workloads of a queue that became inactive."""
        spec = self.host.sched.cluster_queues.get(name)
        obj = self.store.get("ClusterQueue", "", name)
        if spec is None or obj is None:
            return
        reason, message = self._inactive_reason(spec)
        missing_flavors = {fq.name for rg in spec.resource_groups for fq in rg.flavors} - set(self.host.sched.flavors)
        if reason:
            new = condition("Active", False, reason, f"Can't admit new workloads: {message}.", self.host.now())
        elif missing_flavors or spec.stop_policy not in ("None", "", None):
            new = None  # the snapshot's other reasons: not written by the twin yet
        else:
            new = condition("Active", True, "Ready", "Can admit new workloads", self.host.now())
        old = find_condition(obj, "Active")
        if new is not None and (old is None or (old["status"], old["reason"], old["message"])
                                != (new["status"], new["reason"], new["message"])):
            conds, _ = set_condition(conditions_of(obj), new)  # updateCqStatusIfChanged: SetStatusCondition
            self.store.update({**obj, "status": {**(obj.get("status") or {}), "conditions": conds}})
        for ns, wl_name in pending:
            wl = self.store.get("Workload", ns, wl_name)
            if wl is not None:
                self.inactive_queue(wl, name)

    def inactive_queue(self, wl: Obj, cluster_queue: str) -> None:
        """workload_controller.go: a pending Workload of an inactive ClusterQueue is QuotaReserved=False
        Inadmissible "ClusterQueue <name> is inactive" (here: inactive because of its admission checks)."""
        spec = self.host.sched.cluster_queues.get(cluster_queue)
        if spec is None or not spec.checks_inactive:
            return
        message = f"ClusterQueue {cluster_queue} is inactive"
        old = find_condition(wl, "QuotaReserved") or {}
        if (old.get("status"), old.get("reason"), old.get("message")) != ("False", "Inadmissible", message):
            update_status(self.store, wl, conditions=[condition("QuotaReserved", False, "Inadmissible", message,
                                                              self.host.now())])

    # -- a reservation in a ClusterQueue with checks ---------------------------------------------------------
    def for_admission(self, cluster_queue: str, admission: dict) -> list[str]:
        """workload.AdmissionChecksForWorkload: the CQ's checks whose onFlavors is empty or holds an assigned
        flavor."""
        spec = self.host.sched.cluster_queues.get(cluster_queue)
        if spec is None:
            return []
        flavors = {f for psa in admission.get("podSetAssignments") or [] for f in (psa.get("flavors") or {}).values()}
        out: list[str] = []
        for name, on in spec.admission_checks:
            if name not in out and (not on or flavors & set(on)):
                out.append(name)
        return out

    def initial_states(self, wl: Obj, checks: list[str]) -> list[dict]:
        """SyncAdmittedCondition's input: one Pending state per check, keeping what an earlier attempt left."""
        old = {s["name"]: s for s in (wl.get("status") or {}).get("admissionChecks") or []}
        now = api.format_time(self.host.now())
        out = []
        for name in checks:
            s = old.get(name)
            if s is not None and s.get("state") == PENDING:
                out.append(s)
            else:
                out.append({"name": name, "state": PENDING, "message": "", "lastTransitionTime": now,
                            **({"retryCount": s["retryCount"]} if s and s.get("retryCount") else {})})
        return out

    # -- the provisioning controller ---------------------------------------------------------------------
    def _sync_all(self) -> None:
        keys, self._sync = sorted(self._sync), set()
        for key in keys:
            self.sync(key)

    def _attempts(self, ns: str, wl_name: str, check: str) -> list[tuple[int, Obj]]:
        prefix = limit_object_name(f"{wl_name}-{check}-")
        out = []
        for pr in self.store.list("ProvisioningRequest", ns):
            tail = pr["metadata"]["name"][len(prefix):] if pr["metadata"]["name"].startswith(prefix) else ""
            if tail.isdigit():
                out.append((int(tail), pr))
        return sorted(out, key=lambda t: t[0])

    def sync(self, key: str) -> None:
        ns, name = key.split("/", 1)
        wl = self.store.get("Workload", ns, name)
        if wl is None or is_true(wl, "Finished") or not (wl.get("status") or {}).get("admission"):
            return
        if not is_true(wl, "QuotaReserved") or is_true(wl, "Evicted"):
            return
        states = [dict(s) for s in (wl.get("status") or {}).get("admissionChecks") or []]
        messages: list[str] = []
        for s in states:
            ac = self.store.get("AdmissionCheck", "", s["name"])
            if ac is None or (ac.get("spec") or {}).get("controllerName") != CONTROLLER_NAME:
                continue
            before = (s.get("state"),)
            self._sync_check(wl, ac, s)
            if s.get("state") != before[0]:
                s["lastTransitionTime"] = api.format_time(self.host.now())
                msg = f"Admission check {s['name']} updated state from {before[0]} to {s['state']}"
                messages.append(msg + (f" with message {s['message']}" if s.get("message") else ""))
        if states != wl["status"]["admissionChecks"]:
            wl = update_status(self.store, wl, admissionChecks=states)
            for m in messages:
                self.events.event(wl, "Normal", "AdmissionCheckUpdated", m, CONTROLLER_NAME)
        self._workload_rules(wl)

    def _sync_check(self, wl: Obj, ac: Obj, s: dict) -> None:
        """One check's state from its newest ProvisioningRequest, creating the next attempt when needed."""
        cfg, _ = self._config_of(ac)
        if cfg is None:
            s.update(state=PENDING, message=NOT_ACTIVE)
            return
        if s.get("state") in (RETRY, REJECTED):
            return  # the workload controller acts on it
        pod_sets = self._pod_sets(wl, cfg)
        if not pod_sets:
            if s.get("state") != READY:
                s.update(state=READY, message=NO_REQUEST_NEEDED)
                s.pop("podSetUpdates", None)
            return
        ns, wl_name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        attempts = self._attempts(ns, wl_name, s["name"])
        attempt, pr = attempts[-1] if attempts else (0, None)
        done = pr is not None and (is_true(pr, "Failed") or (is_true(pr, "BookingExpired") and not is_true(pr, "Failed")
                                                            and not is_true(wl, "Admitted")))
        if pr is None or (done and int(s.get("retryCount") or 0) >= attempt):
            self._create_request(wl, s["name"], cfg, pod_sets, attempt + 1)
            return
        if is_true(pr, "Failed"):
            _retry_or_reject(s, cfg, attempt, "Retrying after failure",
                             (find_condition(pr, "Failed") or {}).get("message", ""))
        elif is_true(pr, "CapacityRevoked"):
            if wl["spec"].get("active") is not False:
                s.update(state=REJECTED, message=(find_condition(pr, "CapacityRevoked") or {}).get("message", ""))
        elif is_true(pr, "BookingExpired"):
            if not is_true(wl, "Admitted"):
                _retry_or_reject(s, cfg, attempt, "Retrying after booking expired",
                                 (find_condition(pr, "BookingExpired") or {}).get("message", ""))
        elif is_true(pr, "Provisioned"):
            if s.get("state") != READY:
                cls = pr["spec"].get("provisioningClassName", "")
                s.update(state=READY, message=(find_condition(pr, "Provisioned") or {}).get("message", ""),
                         podSetUpdates=[{"name": ps_name, "annotations": {CONSUMES: pr["metadata"]["name"],
                                                                          CLASS_NAME: cls}}
                                        for ps_name in self._request_pod_sets(pr, wl)])
        elif is_true(pr, "Accepted"):
            prov = find_condition(pr, "Provisioned")
            if prov is not None:
                s.update(state=PENDING, message=prov.get("message", ""))
        else:
            s["state"] = PENDING

    @staticmethod
    def _request_pod_sets(pr: Obj, wl: Obj) -> list[str]:
        """podSetUpdates: the PodSets behind the request's PodTemplates (controller.go podSetUpdates)."""
        by_template = {template_name(pr["metadata"]["name"], ps["name"]): ps["name"] for ps in wl["spec"]["podSets"]}
        return [by_template[ps["podTemplateRef"]["name"]] for ps in pr["spec"].get("podSets") or []
                if ps["podTemplateRef"]["name"] in by_template]

    @staticmethod
    def _pod_sets(wl: Obj, cfg: ProvisioningConfig) -> list[tuple[dict, int]]:
        """(PodSet, admitted count) that need capacity: all, or with managedResources those requesting one."""
        counts = {psa["name"]: int(psa.get("count", 0) or 0)
                  for psa in wl["status"]["admission"].get("podSetAssignments") or []}
        out = []
        for ps in wl["spec"]["podSets"]:
            count = counts.get(ps["name"], int(ps.get("count", 1)))
            if count <= 0:
                continue
            if cfg.managed_resources:
                reqs = pod_requests({"spec": ps["template"].get("spec") or {}})
                if not any(reqs.get(r) for r in cfg.managed_resources):
                    continue
            out.append((ps, count))
        return out

    def _create_request(self, wl: Obj, check: str, cfg: ProvisioningConfig, pod_sets: list[tuple[dict, int]],
                        attempt: int) -> None:
        """PodTemplates + ProvisioningRequest for one attempt (controller.go syncOwnedProvisionRequest)."""
        ns, wl_name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        name = request_name(wl_name, check, attempt)
        params = dict(cfg.parameters)
        for k, v in sorted((wl["metadata"].get("annotations") or {}).items()):
            if k.startswith(PROVREQ_PREFIX):
                params[k[len(PROVREQ_PREFIX):]] = str(v)
        spec: dict = {"provisioningClassName": cfg.class_name,
                      "podSets": [{"podTemplateRef": {"name": template_name(name, ps["name"])}, "count": count}
                                  for ps, count in pod_sets]}
        if params:
            spec["parameters"] = params
        pr = self.store.create({"apiVersion": PR_API, "kind": "ProvisioningRequest",
                                "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner_ref(wl)]},
                                "spec": spec})
        infos = {i.name: i for i in pod_set_infos(self.store, wl)}
        for ps, _ in pod_sets:
            tmpl = {**ps["template"], "spec": dict(ps["template"].get("spec") or {})}
            info = infos.get(ps["name"])
            if info is not None:  # podset.Merge of the admission's flavors
                pod = tmpl["spec"]
                selector = {**(pod.get("nodeSelector") or {}), **info.node_selector}
                tols = list(pod.get("tolerations") or [])
                tols += [t for t in info.tolerations if t not in tols]
                if selector:
                    pod["nodeSelector"] = selector
                if tols:
                    pod["tolerations"] = tols
            self.store.create({"apiVersion": "v1", "kind": "PodTemplate",
                               "metadata": {"name": template_name(name, ps["name"]), "namespace": ns,
                                            "ownerReferences": [owner_ref(pr)]},
                               "template": tmpl})
        self.events.event(wl, "Normal", "ProvisioningRequestCreated",
                          f"Created ProvisioningRequest: {name!r}", CONTROLLER_NAME)

    # -- the workload controller's rules for check states ---------------------------------------------------
    def _workload_rules(self, wl: Obj) -> None:
        states = (wl.get("status") or {}).get("admissionChecks") or []
        if not states or is_true(wl, "Evicted") or not is_true(wl, "QuotaReserved"):
            return
        host, now = self.host, self.host.now()
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        cq = wl["status"]["admission"]["clusterQueue"]
        rejected = [s for s in states if s.get("state") == REJECTED]
        retry = [s for s in states if s.get("state") == RETRY]
        status = dict(wl["status"])
        if rejected:
            names = "[" + " ".join(s["name"] for s in rejected) + "]"
            reason = "DeactivatedDueToAdmissionCheck"
            message = f"The workload is deactivated due to Admission check(s): {names}, were rejected"
            status.pop("requeueState", None)
            status["conditions"] = set_condition(status.get("conditions"),  # workload.SetEvictedCondition
                                                 condition("Evicted", True, reason, message, now))[0]
            wl = self.store.update({**wl, "spec": {**wl["spec"], "active": False}, "status": status})
            for s in rejected:
                self.events.event(wl, "Warning", "AdmissionCheckRejected", f"Deactivating workload because "
                                  f"AdmissionCheck for {s['name']} was Rejected: {s.get('message', '')}",
                                  "kueue-workload-controller")
            host.metrics.evicted(key, cq, "Deactivated")
        elif retry:
            wait = max(float(s.get("requeueAfterSeconds") or 0) for s in retry)
            status["requeueState"] = {**(status.get("requeueState") or {}),
                                      "requeueAt": api.format_time(now + wait)}
            message = "At least one admission check is false"
            status["conditions"] = set_condition(status.get("conditions"),
                                                 condition("Evicted", True, "AdmissionCheck", message, now))[0]
            wl = self.store.update({**wl, "status": status})
            self.events.event(wl, "Normal", "EvictedDueToAdmissionCheck", message, "kueue-workload-controller")
            host.metrics.evicted(key, cq, "AdmissionCheck")
        elif all(s.get("state") == READY for s in states) and not is_true(wl, "Admitted"):
            wl = update_status(self.store, wl, conditions=[condition("Admitted", True, "Admitted",
                                                              "The workload is admitted", now)])
            host.on_admitted(key, cq, wl)
            return
        else:
            return
        host.requeue_evicted(wl)

    @staticmethod
    def reset_on_release(wl: Obj, now: float) -> list[dict] | None:
        """workload.ResetChecksOnEviction: the checks go back to Pending once the quota is released."""
        states = (wl.get("status") or {}).get("admissionChecks")
        if not states:
            return None
        out = []
        for s in states:
            s = {k: v for k, v in s.items() if k not in ("podSetUpdates", "requeueAfterSeconds")}
            if s.get("state") != PENDING:
                s["state"] = PENDING
                s["lastTransitionTime"] = api.format_time(now)
            out.append(s)
        return out

    def pod_set_updates(self, wl: Obj) -> dict[str, dict]:
        """PodSet -> merged podSetUpdates (annotations, labels, nodeSelector, tolerations) of its Ready checks."""
        out: dict[str, dict] = {}
        for s in (wl.get("status") or {}).get("admissionChecks") or []:
            for u in s.get("podSetUpdates") or []:
                cur = out.setdefault(u["name"], {"annotations": {}, "labels": {}, "nodeSelector": {},
                                                 "tolerations": []})
                for k in ("annotations", "labels", "nodeSelector"):
                    cur[k].update(u.get(k) or {})
                cur["tolerations"] += [t for t in u.get("tolerations") or [] if t not in cur["tolerations"]]
        return out


def _retry_or_reject(state: dict, cfg: ProvisioningConfig, attempt: int, retrying: str, message: str) -> None:
    """syncCheckStates: Retry with the config's backoff while attempts remain, else Rejected."""
    if attempt <= cfg.backoff_limit_count:
        state.update(state=RETRY, message=f"{retrying}: {message}", requeueAfterSeconds=int(cfg.backoff(attempt)),
                     retryCount=attempt)
    else:
        state.update(state=REJECTED, message=message)
