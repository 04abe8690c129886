"""The ProvisioningRequest admission check controller (GKE DWS through Kueue): its AdmissionChecks' Active
condition, and per Workload one ProvisioningRequest per attempt whose conditions become the check's state.

Follows kubernetes-sigs/kueue pkg/controller/admissionchecks/provisioning (names, states, messages; the code is not
copied):
- apis/kueue/v1beta2/admissioncheck_types.go, provisioningrequestconfig_types.go: an AdmissionCheck names its
  controller (`kueue.x-k8s.io/provisioning-request`) and a ProvisioningRequestConfig (`provisioningClassName`,
  `parameters`, `managedResources`, `retryStrategy` {backoffLimitCount 3, backoffBaseSeconds 60,
  backoffMaxSeconds 1800}).
- admissioncheck_reconciler.go: the check is `Active` (True "Active", "The admission check is active") when its
  config exists, else False "BadParametersRef".
- controller.go + provisioning.go: per check a ProvisioningRequest
  `<workload>-<check>-<attempt>` (owned by the Workload) with one PodTemplate `ppt-<request>-<podSet>` per PodSet
  (the PodSet's template with the flavors' nodeSelector and tolerations, owned by the request), count from the
  admission, the config's class and parameters plus the Workload's `provreq.kueue.x-k8s.io/<Param>` annotations
  (copied from the job). syncCheckStates maps its conditions: Failed => Retry "Retrying after failure: <msg>" while
  attempt <= backoffLimitCount, else Rejected; CapacityRevoked on an active workload => Rejected; BookingExpired
  before admission => Retry "Retrying after booking expired: <msg>" (Rejected past the limit); Provisioned=True =>
  Ready with podSetUpdates annotations autoscaling.x-k8s.io/consume-provisioning-request and
  autoscaling.x-k8s.io/provisioning-class-name; Accepted => Pending with the Provisioned condition's message.
  Each state change is an `AdmissionCheckUpdated` event.

The check states are written into the Workload's status through the store; what Kueue does with them (evict on
Retry, deactivate on Rejected, admit when all are Ready) is `kueue.controller.admissionchecks`, told through
`ProvisioningHost` at the same instant. The config's `podSetUpdates.nodeSelector` (values from
provisioningClassDetails) is not modelled: GKE's queued provisioning publishes none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from kubetwin.api.podresources import pod_requests
from kubetwin.k8s.conditions import conditions_of, set_condition
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.kueue import api
from kubetwin.kueue.controller import workload
from kubetwin.kueue.controller.admissionchecks import PENDING, READY, REJECTED, RETRY
from kubetwin.kueue.controller.jobframework import pod_set_infos
from kubetwin.kueue.controller.workload import update_status
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


class ProvisioningHost(Protocol):
    """What the provisioning controller hands on (Kueue's side of admission checks, `AdmissionChecks`): upstream
    Kueue's own controllers see the AdmissionCheck and Workload writes through their watches."""

    def now(self) -> float:
        """Seconds since the epoch, the clock's now."""
        ...

    def refresh_cluster_queues(self) -> None:
        """AdmissionChecks' Active conditions were reconciled: which ClusterQueues may admit."""
        ...

    def workload_rules(self, wl: Obj) -> None:
        """A Workload's check states were synced: evict, deactivate or admit it."""
        ...


class ProvisioningController:
    """The AdmissionCheck reconciler and the ProvisioningRequest check controller of `CONTROLLER_NAME`."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, host: ProvisioningHost) -> None:
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
        self.host.refresh_cluster_queues()
        for wl in self.store.list("Workload"):  # acHandler/prcHandler: reconcile the workloads using the checks
            if (wl.get("status") or {}).get("admissionChecks"):
                self.queue_sync(f"{wl['metadata']['namespace']}/{wl['metadata']['name']}")

    # -- each Workload's check states -----------------------------------------------------------------------
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
        wl = workload.get(self.store, key)
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
        self.host.workload_rules(wl)

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


def _retry_or_reject(state: dict, cfg: ProvisioningConfig, attempt: int, retrying: str, message: str) -> None:
    """syncCheckStates: Retry with the config's backoff while attempts remain, else Rejected."""
    if attempt <= cfg.backoff_limit_count:
        state.update(state=RETRY, message=f"{retrying}: {message}", requeueAfterSeconds=int(cfg.backoff(attempt)),
                     retryCount=attempt)
    else:
        state.update(state=REJECTED, message=message)
