"""The HorizontalPodAutoscaler controller (autoscaling/v2), as kube-controller-manager runs it.

Sources (kubernetes/kubernetes): pkg/controller/podautoscaler/horizontal.go (reconcileAutoscaler, the
normalization with and without `behavior`, stabilization, scale events, conditions, events),
replica_calculator.go (the per-metric formulas, tolerance, pod grouping), pkg/apis/autoscaling/v2/defaults.go
(behavior defaults), cmd/kube-controller-manager flags (sync period 15 s, downscale stabilization 5 min,
tolerance 0.1). Every sync period each HPA reads its target's scale (Deployment spec.replicas, status.replicas,
selector), asks the metric sources, takes the largest proposal, normalizes it and writes spec.replicas back.

Metric sources: External metrics come from external metrics servers registered for the store with
`register_external_metrics` (KEDA's metrics server registers itself, as its APIService does); Pods and Object
metrics from the `MetricsProvider` given to the constructor (the custom metrics API over the twin's per-pod
series); Resource metrics (cpu/memory) have no metrics-server in the twin and report the real "no metrics" error.
Time comparisons use the simulated clock exactly where the real controller uses time.Now().
The per-metric replica arithmetic is the `ReplicaCalculator` mixin (hpa_replicas.py), the normalization with
and without `behavior` the `ScaleNormalizer` mixin (hpa_behavior.py); this module holds the control loop,
status, conditions, events and the API server's field validation.
"""

from __future__ import annotations

from kubetwin.autoscaler.hpa_behavior import HpaState, ScaleNormalizer
from kubetwin.autoscaler.hpa_replicas import MetricError, ReplicaCalculator
from kubetwin.autoscaler.hpa_replicas import format_milli as format_milli
from kubetwin.autoscaler.hpa_replicas import register_external_metrics as register_external_metrics
from kubetwin.k8s.conditions import set_condition
from kubetwin.prometheus.promql import MetricsProvider
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPONENT = "horizontal-pod-autoscaler"  # the HPA controller's event source (horizontal.go NewHorizontalController)
SYNC_PERIOD = 15.0  # --horizontal-pod-autoscaler-sync-period default 15s
DOWNSCALE_STABILIZATION = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization default 5m
TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance default 0.1
# the kinds with a scale subresource the twin runs, by the group their "not found" names; a LeaderWorkerSet's scale
# reads spec.replicas and selects its leaders (status.hpaPodSelector; its CRD's subresources.scale)
SCALABLE = {"Deployment": "apps", "ReplicaSet": "apps", "StatefulSet": "apps",
            "LeaderWorkerSet": "leaderworkerset.x-k8s.io"}


class HorizontalPodAutoscalerController:
    """Reconciles every HorizontalPodAutoscaler each sync period; scales Deployments through the store."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, metrics: MetricsProvider | None = None,
                 sync_period: float = SYNC_PERIOD, downscale_stabilization: float = DOWNSCALE_STABILIZATION,
                 tolerance: float = TOLERANCE, scale_to_zero: bool = False) -> None:
        self.store, self.env, self.events, self.sync_period = store, env, events, sync_period
        self.scale_to_zero = scale_to_zero  # the HPAScaleToZero feature gate (alpha, off by default)
        self._state: dict[tuple[str, str], HpaState] = {}
        self.calculator = ReplicaCalculator(store, env, metrics, tolerance)
        self.normalizer = ScaleNormalizer(env, downscale_stabilization, self._set)
        self._scheduled: set[tuple[str, str]] = set()
        store.watch("HorizontalPodAutoscaler", self._on_hpa)

    # -- loop ---------------------------------------------------------------------------------------
    def _on_hpa(self, etype: str, obj: Obj, old: Obj | None) -> None:
        key = (obj["metadata"].get("namespace") or "default", obj["metadata"]["name"])
        if etype == "DELETED":
            self._state.pop(key, None)
            return
        if key not in self._scheduled:  # a new HPA is queued at once, then resynced every sync period
            self._scheduled.add(key)
            self.env.after(0, lambda: self._tick(key))

    def _tick(self, key: tuple[str, str]) -> None:
        hpa = self.store.get("HorizontalPodAutoscaler", *key)
        if hpa is None:
            self._scheduled.discard(key)
            return
        self.reconcile(hpa)
        self.env.after(self.sync_period, lambda: self._tick(key))

    # -- reconcile ----------------------------------------------------------------------------------
    def reconcile(self, hpa: Obj) -> None:
        """horizontal.go reconcileAutoscaler, one pass."""
        ns, name = hpa["metadata"].get("namespace") or "default", hpa["metadata"]["name"]
        spec = hpa.get("spec") or {}
        now = self.env.now
        status = dict(hpa.get("status") or {})
        conds: list[dict] = [dict(c) for c in status.get("conditions") or []]
        ref = spec.get("scaleTargetRef") or {}
        target = self.store.get(ref.get("kind", ""), ns, ref.get("name", "")) if ref.get("kind") in SCALABLE \
            else None
        if target is None:
            err = (f'{(ref.get("kind") or "").lower()}s.{SCALABLE[ref["kind"]]} "{ref.get("name")}" not found'
                   if ref.get("kind") in SCALABLE else f'no matches for kind "{ref.get("kind")}" in group ""')
            self.events.event(hpa, "Warning", "FailedGetScale", err, COMPONENT)
            self._set(conds, "AbleToScale", "False", "FailedGetScale",
                      f"the HPA controller was unable to get the target's current scale: {err}")
            self._write_status(hpa, {**status, "conditions": conds})
            return
        self._set(conds, "AbleToScale", "True", "SucceededGetScale",
                  "the HPA controller was able to get the target's current scale")
        current = int((target.get("spec") or {}).get("replicas", 1))
        state = self._state.setdefault((ns, name), HpaState())
        if not state.recommendations:  # recordInitialRecommendation
            state.recommendations.append((current, now))
        min_replicas = int(spec.get("minReplicas", 1))
        if min_replicas == 0 and not self.scale_to_zero:
            min_replicas = 1  # the API server refuses minReplicas 0 without HPAScaleToZero; see hpa_field_errors
        max_replicas = int(spec.get("maxReplicas", 1))
        behavior = spec.get("behavior")
        metric_statuses = status.get("currentMetrics") or []
        rescale, reason = True, ""
        if current == 0 and min_replicas != 0:
            desired, rescale = 0, False
            self._set(conds, "ScalingActive", "False", "ScalingDisabled",
                      "scaling is disabled since the replica count of the target is zero")
        elif current > max_replicas:
            reason, desired = "Current number of replicas above Spec.MaxReplicas", max_replicas
        elif current < min_replicas:
            reason, desired = "Current number of replicas below Spec.MinReplicas", min_replicas
        else:
            try:
                proposal, metric_name, metric_statuses = self._compute_metrics(hpa, target, conds)
            except MetricError as e:
                self._write_status(hpa, {**status, "currentReplicas": current, "conditions": conds})
                self.events.event(hpa, "Warning", "FailedComputeMetricsReplicas", str(e), COMPONENT)
                return
            desired = proposal
            if desired > current:
                reason = f"{metric_name} above target"
            if desired < current:
                reason = "All metrics below target"
            if behavior is None:
                desired = self.normalizer.normalize(state, conds, current, desired, min_replicas,
                                                    max_replicas)
            else:
                desired = self.normalizer.normalize_with_behaviors(state, conds, behavior, current, desired,
                                                                   min_replicas, max_replicas)
            rescale = desired != current
        if rescale:
            self.store.patch(target["kind"], ns, target["metadata"]["name"],
                             lambda d: {**d, "spec": {**d["spec"], "replicas": desired}})
            self._set(conds, "AbleToScale", "True", "SucceededRescale",
                      f"the HPA controller was able to update the target scale to {desired}")
            self.events.event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}", COMPONENT)
            if behavior is not None:
                self.normalizer.store_scale_event(state, behavior, current, desired)
        else:
            desired = current
        new = {**status, "currentReplicas": current, "desiredReplicas": desired, "currentMetrics": metric_statuses,
               "conditions": conds}
        if rescale:
            new["lastScaleTime"] = self.store.timestamp(now)
        self._write_status(hpa, new)

    def _write_status(self, hpa: Obj, status: dict) -> None:
        status = {k: v for k, v in status.items() if v is not None}
        if "observedGeneration" not in status or status["observedGeneration"] != hpa["metadata"].get("generation"):
            status["observedGeneration"] = hpa["metadata"].get("generation", 1)
        if status != hpa.get("status"):
            self.store.patch("HorizontalPodAutoscaler", hpa["metadata"].get("namespace") or "default",
                             hpa["metadata"]["name"], lambda h: {**h, "status": status})

    def _set(self, conds: list[dict], ctype: str, status: str, reason: str, message: str) -> None:
        """setCondition: lastTransitionTime moves only when the status changes (apimeta.SetStatusCondition)."""
        conds[:] = set_condition(conds, {"type": ctype, "status": status, "lastTransitionTime": self.store.timestamp(
            self.env.now), "reason": reason, "message": message})[0]

    # -- metrics ------------------------------------------------------------------------------------
    def _compute_metrics(self, hpa: Obj, target: Obj, conds: list[dict]) -> tuple[int, str, list[dict]]:
        """computeReplicasForMetrics: the largest proposal over the metrics; all invalid is an error."""
        specs = (hpa.get("spec") or {}).get("metrics") or []
        statuses, proposal, name, errors = [], 0, "", []
        for m in specs:
            try:
                count, mname, st = self.calculator.metric_replicas(hpa, target, m)
            except MetricError as e:
                self.events.event(hpa, "Warning", e.reason, e.calc_error, COMPONENT)
                errors.append(e)
                statuses.append({"type": ""})
                continue
            statuses.append(st)
            if count > proposal or not name:
                proposal, name = count, mname
        if errors and (len(errors) == len(specs) or proposal < int((target.get("spec") or {}).get("replicas", 1))):
            first = errors[0]  # all invalid, or some invalid while the valid ones would scale down
            self._set(conds, "ScalingActive", "False", first.reason,
                      f"the HPA was unable to compute the replica count: {first.calc_error}")
            raise MetricError(first.reason, first.calc_error,
                              f"invalid metrics ({len(errors)} invalid out of {len(specs)}), first error is: {first}")
        if not specs:
            raise MetricError("FailedGetResourceMetric", "no metrics", "invalid metrics (0 invalid out of 0)")
        self._set(conds, "ScalingActive", "True", "ValidMetricFound",
                  f"the HPA was able to successfully calculate a replica count from {name}")
        return proposal, name, statuses


def hpa_field_errors(hpa: Obj, scale_to_zero: bool = False) -> list[tuple[str, str]]:
    """The API server's validation of the fields the twin relies on (pkg/apis/autoscaling/validation):
    (field path, message) pairs, for `kubetwin validate`."""
    spec = hpa.get("spec") or {}
    out = []
    lo = spec.get("minReplicas")
    floor = 0 if scale_to_zero else 1
    if lo is not None and lo < floor:
        out.append(("spec.minReplicas", f"Invalid value: {lo}: must be greater than or equal to {floor}"))
    hi = spec.get("maxReplicas")
    if hi is None:
        out.append(("spec.maxReplicas", "Required value"))
    elif hi < 1:
        out.append(("spec.maxReplicas", f"Invalid value: {hi}: must be greater than 0"))
    elif lo is not None and hi < lo:
        out.append(("spec.maxReplicas", f"Invalid value: {hi}: must be greater than or equal to `minReplicas`"))
    return out
