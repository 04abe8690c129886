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
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from kubetwin.api.units import parse_quantity
from kubetwin.serving.promql import LOOKBACK, MetricsProvider
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store, matches

COMPONENT = "horizontal-pod-autoscaler"  # the HPA controller's event source (horizontal.go NewHorizontalController)
SYNC_PERIOD = 15.0  # --horizontal-pod-autoscaler-sync-period default 15s
DOWNSCALE_STABILIZATION = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization default 5m
TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance default 0.1
SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM = 2.0, 4.0  # horizontal.go scaleUpLimitFactor/Minimum (no behavior)
# defaults.go GenerateHPAScaleUpRules / GenerateHPAScaleDownRules
DEFAULT_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                 {"type": "Percent", "value": 100, "periodSeconds": 15}]}
DEFAULT_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}

# External metrics API servers per store: fn(namespace, metric name, selector) -> metric values, or raises.
ExternalMetrics = Callable[[str, str, dict | None], list[float]]
_EXTERNAL: weakref.WeakKeyDictionary[Store, list[ExternalMetrics]] = weakref.WeakKeyDictionary()


def register_external_metrics(store: Store, server: ExternalMetrics) -> None:
    """Serve external.metrics.k8s.io for this store (what an APIService registration does). Servers are asked in
    registration order; one that does not know the metric raises LookupError."""
    _EXTERNAL.setdefault(store, []).append(server)


def milli(value: object) -> int:
    """A quantity's MilliValue (rounded up, as resource.Quantity.MilliValue does)."""
    return int(math.ceil(parse_quantity(value) * 1000))


def format_milli(m: int) -> str:
    """resource.NewMilliQuantity(m, DecimalSI).String(): the canonical decimal-SI form."""
    if m % 1000:
        return f"{m}m"
    n, i = m // 1000, 0
    while n and n % 1000 == 0 and i < 6:
        n, i = n // 1000, i + 1
    return f"{n}{['', 'k', 'M', 'G', 'T', 'P', 'E'][i]}"


def go_selector(sel: dict | None) -> str:
    """A *metav1.LabelSelector printed with %+v (the generated String()), as it appears in the HPA's messages."""
    if sel is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted((sel.get("matchLabels") or {}).items()))
    exprs = ",".join(f"LabelSelectorRequirement{{Key:{e['key']},Operator:{e['operator']},Values:[]string{{"
                     f"{','.join(e.get('values') or [])}}},}}" for e in sel.get("matchExpressions") or [])
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


class MetricError(Exception):
    """One metric could not be computed: the condition reason and the replica calculator's error."""

    def __init__(self, reason: str, calc_error: str, wrapped: str) -> None:
        super().__init__(wrapped)
        self.reason, self.calc_error = reason, calc_error


@dataclass
class _State:
    """The controller's in-memory memory of one HPA (recommendations, scaleUpEvents, scaleDownEvents maps)."""

    recommendations: list[tuple[int, float]] = field(default_factory=list)
    up_events: list[tuple[int, float]] = field(default_factory=list)
    down_events: list[tuple[int, float]] = field(default_factory=list)


def _rules(given: dict | None, default: dict, window: float | None) -> dict:
    """GenerateHPAScale{Up,Down}Rules: fill unset fields with the defaults (scale-down window from the flag)."""
    given = given or {}
    out = {"selectPolicy": given.get("selectPolicy") or default["selectPolicy"],
           "policies": given.get("policies") or default["policies"],
           "stabilizationWindowSeconds": given.get("stabilizationWindowSeconds",
                                                   default.get("stabilizationWindowSeconds", window))}
    if out["stabilizationWindowSeconds"] is None:
        out["stabilizationWindowSeconds"] = window
    out["tolerance"] = given.get("tolerance")
    return out


def _pod_ready(pod: Obj) -> bool:
    """podutil.IsPodReady: Running with the Ready condition True (a pod without conditions counts as ready once
    Running, for stores without a kubelet)."""
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    conds = st.get("conditions")
    return not conds or any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


class HorizontalPodAutoscalerController:
    """Reconciles every HorizontalPodAutoscaler each sync period; scales Deployments through the store."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, metrics: MetricsProvider | None = None,
                 sync_period: float = SYNC_PERIOD, downscale_stabilization: float = DOWNSCALE_STABILIZATION,
                 tolerance: float = TOLERANCE, scale_to_zero: bool = False) -> None:
        self.store, self.env, self.events, self.metrics = store, env, events, metrics
        self.sync_period, self.downscale_window, self.tolerance = sync_period, downscale_stabilization, tolerance
        self.scale_to_zero = scale_to_zero  # the HPAScaleToZero feature gate (alpha, off by default)
        self._state: dict[tuple[str, str], _State] = {}
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
        target = self.store.get(ref.get("kind", ""), ns, ref.get("name", "")) if ref.get("kind") in (
            "Deployment", "ReplicaSet", "StatefulSet") else None
        if target is None:
            err = (f'{(ref.get("kind") or "").lower()}s.apps "{ref.get("name")}" not found'
                   if ref.get("kind") in ("Deployment", "ReplicaSet", "StatefulSet") else
                   f'no matches for kind "{ref.get("kind")}" in group ""')
            self.events.event(hpa, "Warning", "FailedGetScale", err, COMPONENT)
            self._set(conds, "AbleToScale", "False", "FailedGetScale",
                      f"the HPA controller was unable to get the target's current scale: {err}")
            self._write_status(hpa, {**status, "conditions": conds})
            return
        self._set(conds, "AbleToScale", "True", "SucceededGetScale",
                  "the HPA controller was able to get the target's current scale")
        current = int((target.get("spec") or {}).get("replicas", 1))
        state = self._state.setdefault((ns, name), _State())
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
                desired = self._normalize(state, conds, current, desired, min_replicas, max_replicas)
            else:
                desired = self._normalize_with_behaviors(state, conds, behavior, current, desired, min_replicas,
                                                         max_replicas)
            rescale = desired != current
        if rescale:
            self.store.patch(target["kind"], ns, target["metadata"]["name"],
                             lambda d: {**d, "spec": {**d["spec"], "replicas": desired}})
            self._set(conds, "AbleToScale", "True", "SucceededRescale",
                      f"the HPA controller was able to update the target scale to {desired}")
            self.events.event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}", COMPONENT)
            if behavior is not None:  # storeScaleEvent
                (state.up_events if desired > current else state.down_events).append((abs(desired - current), now))
                self._prune_events(state, behavior)
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
        """setCondition: lastTransitionTime moves only when the status changes."""
        now = self.store.timestamp(self.env.now)
        for i, c in enumerate(conds):
            if c["type"] == ctype:
                ltt = c.get("lastTransitionTime", now) if c["status"] == status else now
                conds[i] = {"type": ctype, "status": status, "lastTransitionTime": ltt, "reason": reason,
                            "message": message}
                return
        conds.append({"type": ctype, "status": status, "lastTransitionTime": now, "reason": reason,
                      "message": message})

    # -- metrics ------------------------------------------------------------------------------------
    def _tolerances(self, hpa: Obj) -> tuple[float, float]:
        """(scale-down, scale-up) tolerance: the per-HPA behavior tolerance (HPAConfigurableTolerance, k8s 1.33)
        or the controller flag."""
        b = (hpa.get("spec") or {}).get("behavior") or {}
        down = (b.get("scaleDown") or {}).get("tolerance")
        up = (b.get("scaleUp") or {}).get("tolerance")
        return (float(parse_quantity(down)) if down is not None else self.tolerance,
                float(parse_quantity(up)) if up is not None else self.tolerance)

    def _compute_metrics(self, hpa: Obj, target: Obj, conds: list[dict]) -> tuple[int, str, list[dict]]:
        """computeReplicasForMetrics: the largest proposal over the metrics; all invalid is an error."""
        specs = (hpa.get("spec") or {}).get("metrics") or []
        statuses, proposal, name, errors = [], 0, "", []
        for m in specs:
            try:
                count, mname, st = self._metric(hpa, target, m)
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

    def _metric(self, hpa: Obj, target: Obj, m: dict) -> tuple[int, str, dict]:
        ns = hpa["metadata"].get("namespace") or "default"
        spec_replicas = int((target.get("spec") or {}).get("replicas", 1))
        status_replicas = int((target.get("status") or {}).get("replicas", 0))
        down_tol, up_tol = self._tolerances(hpa)

        def within(ratio: float) -> bool:
            return (1.0 - down_tol) <= ratio <= (1.0 + up_tol)

        mtype = m.get("type")
        if mtype == "External":
            ext = m.get("external") or {}
            metric, tgt = ext.get("metric") or {}, ext.get("target") or {}
            mname, sel = metric.get("name", ""), metric.get("selector")
            label = f"external metric {mname}({go_selector(sel)})"
            try:
                values = self._external(ns, mname, sel)
            except Exception as e:  # noqa: BLE001 - any metrics server failure is a metric error
                calc = f"unable to get external metric {ns}/{mname}/{go_selector(sel)}: {e}"
                raise MetricError("FailedGetExternalMetric", calc,
                                  f"failed to get {mname} external metric: {calc}") from None
            usage = sum(int(v * 1000) for v in values)  # the metrics server's int64(value*1000) milli-values
            if tgt.get("averageValue") is not None:  # GetExternalPerPodMetricReplicas
                t_milli = milli(tgt["averageValue"])
                ratio = usage / (t_milli * status_replicas) if status_replicas else math.inf
                count = status_replicas if within(ratio) else math.ceil(usage / t_milli)
                avg = math.ceil(usage / status_replicas) if status_replicas else usage
                return count, label, {"type": "External", "external": {
                    "metric": metric, "current": {"averageValue": format_milli(avg)}}}
            if tgt.get("value") is not None:  # GetExternalMetricReplicas
                ratio = usage / milli(tgt["value"])
                count = self._usage_ratio_count(spec_replicas, ratio, within, ns, target, "FailedGetExternalMetric")
                return count, label, {"type": "External", "external": {
                    "metric": metric, "current": {"value": format_milli(usage)}}}
            err = "invalid external metric source: neither a value target nor an average value target was set"
            raise MetricError("FailedGetExternalMetric", err, err)
        if mtype == "Pods":
            pm = m.get("pods") or {}
            metric, tgt = pm.get("metric") or {}, pm.get("target") or {}
            mname = metric.get("name", "")
            t_milli = milli(tgt.get("averageValue", 0))
            count, avg = self._pods_metric(ns, target, mname, metric.get("selector"), t_milli, spec_replicas, within)
            return count, f"pods metric {mname}", {"type": "Pods", "pods": {
                "metric": metric, "current": {"averageValue": format_milli(avg)}}}
        if mtype == "Object":
            om = m.get("object") or {}
            metric, tgt, obj = om.get("metric") or {}, om.get("target") or {}, om.get("describedObject") or {}
            mname = metric.get("name", "")
            value = self._object_metric(ns, mname, metric.get("selector"), obj)
            if tgt.get("value") is not None:  # GetObjectMetricReplicas
                ratio = value / milli(tgt["value"])
                count = self._usage_ratio_count(spec_replicas, ratio, within, ns, target, "FailedGetObjectMetric")
                return count, f"{obj.get('kind')} metric {mname}", {"type": "Object", "object": {
                    "metric": metric, "describedObject": obj, "current": {"value": format_milli(value)}}}
            if tgt.get("averageValue") is not None:  # GetObjectPerPodMetricReplicas
                t_milli = milli(tgt["averageValue"])
                ratio = value / (t_milli * status_replicas) if status_replicas else math.inf
                count = status_replicas if within(ratio) else math.ceil(value / t_milli)
                avg = math.ceil(value / status_replicas) if status_replicas else value
                return count, f"external metric {mname}({go_selector(metric.get('selector'))})", {
                    "type": "Object", "object": {"metric": metric, "describedObject": obj,
                                                 "current": {"averageValue": format_milli(avg)}}}
            err = "invalid object metric source: neither a value target nor an average value target was set"
            raise MetricError("FailedGetObjectMetric", err, err)
        if mtype == "Resource" or mtype == "ContainerResource":
            res = (m.get("resource") or m.get("containerResource") or {}).get("name", "cpu")
            calc = f"unable to get metrics for resource {res}: no metrics returned from resource metrics API"
            raise MetricError("FailedGetResourceMetric", calc, f"failed to get {res} utilization: {calc}")
        err = f"unknown metric source type {mtype!r}"
        raise MetricError("InvalidMetricSourceType", err, err)

    def _external(self, ns: str, name: str, selector: dict | None) -> list[float]:
        for server in _EXTERNAL.get(self.store, []):
            try:
                return server(ns, name, selector)
            except LookupError:
                continue
        raise LookupError(f'the server could not find the requested resource (get {name}.external.metrics.k8s.io)')

    def _pods(self, ns: str, target: Obj) -> list[Obj]:
        sel = (target.get("spec") or {}).get("selector")
        return [p for p in self.store.list("Pod", ns) if sel and matches(sel, p["metadata"].get("labels"))]

    def _usage_ratio_count(self, current: int, ratio: float, within: Callable[[float], bool], ns: str,
                           target: Obj, reason: str) -> int:
        """getUsageRatioReplicaCount: ceil(ratio × ready pods); from zero replicas, ceil(ratio)."""
        if current == 0:
            return math.ceil(ratio)
        if within(ratio):
            return current
        pods = self._pods(ns, target)
        if not pods:
            raise MetricError(reason, "no pods returned by selector while calculating replica "
                              "count", "unable to calculate ready pods: no pods returned by selector while "
                              "calculating replica count")
        return math.ceil(ratio * sum(1 for p in pods if _pod_ready(p)))

    def _pods_metric(self, ns: str, target: Obj, name: str, selector: dict | None, t_milli: int, current: int,
                     within: Callable[[float], bool]) -> tuple[int, int]:
        """calcPlainMetricReplicas with groupPods: deleted/failed pods ignored, pending pods unready (0 on a
        scale-up), pods without a metric missing (target on a scale-down, 0 on a scale-up)."""
        if self.metrics is None:
            calc = f"unable to get metric {name}: no custom metrics API is served"
            raise MetricError("FailedGetPodsMetric", calc, calc)
        now = self.env.now
        values: dict[str, int] = {}
        for labels, samples in self.metrics.series(name, now - LOOKBACK, now):
            if labels.get("namespace", ns) != ns or "pod" not in labels:
                continue
            if selector and not matches(selector, labels):
                continue
            inside = [v for t, v in samples if now - LOOKBACK < t <= now]
            if inside:
                values[labels["pod"]] = int(inside[-1] * 1000)
        pods = self._pods(ns, target)
        if not pods:
            calc = "no pods returned by selector while calculating replica count"
            raise MetricError("FailedGetPodsMetric", calc, calc)
        ready, unready, missing = 0, [], []
        metrics: dict[str, int] = {}
        for p in pods:
            pname, phase = p["metadata"]["name"], (p.get("status") or {}).get("phase")
            if p["metadata"].get("deletionTimestamp") or phase == "Failed":
                continue
            if phase == "Pending":
                unready.append(pname)
                continue
            if pname not in values:
                missing.append(pname)
                continue
            metrics[pname] = values[pname]
            ready += 1
        if not metrics:
            calc = f"unable to get metric {name}: did not receive metrics for any ready pods"
            raise MetricError("FailedGetPodsMetric", calc, calc)
        avg = sum(metrics.values()) / len(metrics)
        ratio, utilization = avg / t_milli, int(avg)
        rebalance = bool(unready) and ratio > 1.0
        if not rebalance and not missing:
            return (current if within(ratio) else math.ceil(ratio * ready)), utilization
        for pname in missing:
            metrics[pname] = t_milli if ratio < 1.0 else 0
        if rebalance:
            for pname in unready:
                metrics[pname] = 0
        new_ratio = sum(metrics.values()) / len(metrics) / t_milli
        if within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current, utilization
        new = math.ceil(new_ratio * len(metrics))
        if (new_ratio < 1.0 and new > current) or (new_ratio > 1.0 and new < current):
            return current, utilization
        return new, utilization

    def _object_metric(self, ns: str, name: str, selector: dict | None, obj: dict) -> int:
        """The custom metrics API for one object: the series of `name` labelled with the object (its lowercased
        kind as the label name, e.g. service="gw") in the namespace."""
        if self.metrics is None:
            raise MetricError("FailedGetObjectMetric", f"unable to get metric {name}: no custom metrics API is served",
                              f"failed to get {name} object metric")
        now, kind = self.env.now, (obj.get("kind") or "").lower()
        total, found = 0, False
        for labels, samples in self.metrics.series(name, now - LOOKBACK, now):
            if labels.get("namespace", ns) != ns or labels.get(kind) != obj.get("name"):
                continue
            if selector and not matches(selector, labels):
                continue
            inside = [v for t, v in samples if now - LOOKBACK < t <= now]
            if inside:
                total, found = total + int(inside[-1] * 1000), True
        if not found:
            calc = (f"unable to get metric {name}: {obj.get('kind')} on {ns} {obj.get('name')}/the server could not "
                    "find the metric")
            raise MetricError("FailedGetObjectMetric", calc, f"failed to get {name} object metric: {calc}")
        return total

    # -- normalization ------------------------------------------------------------------------------
    def _normalize(self, state: _State, conds: list[dict], current: int, desired: int, lo: int, hi: int) -> int:
        """normalizeDesiredReplicas (no behavior): the downscale stabilization window (max over it; a sample
        exactly at the cutoff still counts), then min/max and the scale-up limit max(2×current, 4)."""
        now, cutoff = self.env.now, self.env.now - self.downscale_window
        best, old = desired, None
        for i, (rec, ts) in enumerate(state.recommendations):
            if ts < cutoff:
                old = i
            elif rec > best:
                best = rec
        if old is not None:
            state.recommendations[old] = (desired, now)
        else:
            state.recommendations.append((desired, now))
        if best != desired:
            self._set(conds, "AbleToScale", "True", "ScaleDownStabilized",
                      "recent recommendations were higher than current one, applying the highest recent "
                      "recommendation")
        else:
            self._set(conds, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
        up_limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
        if hi > up_limit:
            top, why, msg = up_limit, "ScaleUpLimit", "the desired replica count is increasing faster than the " \
                "maximum scale rate"
        else:
            top, why, msg = hi, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
        if best < lo:
            out, why, msg = lo, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
        elif best > top:
            out = top
        else:
            out, why, msg = best, "DesiredWithinRange", "the desired count is within the acceptable range"
        self._set(conds, "ScalingLimited", "False" if out == best else "True", why, msg)
        return out

    def _normalize_with_behaviors(self, state: _State, conds: list[dict], behavior: dict, current: int,
                                  desired: int, lo: int, hi: int) -> int:
        """normalizeDesiredReplicasWithBehaviors: stabilization per direction (a sample must be newer than the
        cutoff), then the scale-up/scale-down rate limits from the policies and the scale events."""
        up = _rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP, None)
        down = _rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN, self.downscale_window)
        now = self.env.now
        if desired >= current:
            window, better = up["stabilizationWindowSeconds"], min
            reason, message = "ScaleUpStabilized", ("recent recommendations were lower than current one, applying "
                                                    "the lowest recent recommendation")
        else:
            window, better = down["stabilizationWindowSeconds"], max
            reason, message = "ScaleDownStabilized", ("recent recommendations were higher than current one, "
                                                      "applying the highest recent recommendation")
        obsolete = now - max(up["stabilizationWindowSeconds"], down["stabilizationWindowSeconds"])
        cutoff, rec, old = now - window, desired, None
        for i, (r, ts) in enumerate(state.recommendations):
            if ts > cutoff:
                rec = better(r, rec)
            if ts < obsolete:
                old = i
        if old is not None:
            state.recommendations[old] = (desired, now)
        else:
            state.recommendations.append((desired, now))
        if rec != desired:
            self._set(conds, "AbleToScale", "True", reason, message)
        else:
            self._set(conds, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
        out, why, msg = rec, "DesiredWithinRange", "the desired count is within the acceptable range"
        if rec > current:
            limit = max(self._up_limit(state, current, up), current)
            if hi > limit:
                top, w, mm = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the " \
                    "maximum scale rate"
            else:
                top, w, mm = hi, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
            if rec > top:
                out, why, msg = top, w, mm
        elif rec < current:
            limit = min(self._down_limit(state, current, down), current)
            if lo < limit:
                bottom, w, mm = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the " \
                    "maximum scale rate"
            else:
                bottom, w, mm = lo, "TooFewReplicas", "the desired replica count is less than the minimum replica " \
                    "count"
            if rec < bottom:
                out, why, msg = bottom, w, mm
        self._set(conds, "ScalingLimited", "False" if out == rec else "True", why, msg)
        return out

    def _changed(self, events: list[tuple[int, float]], period: float) -> int:
        """getReplicasChangePerPeriod: changes strictly newer than now - period."""
        cutoff = self.env.now - period
        return sum(n for n, ts in events if ts > cutoff)

    def _up_limit(self, state: _State, current: int, rules: dict) -> int:
        """calculateScaleUpLimitWithScalingRules."""
        select = rules["selectPolicy"]
        if select == "Disabled":
            return current
        result = math.inf if select == "Min" else -math.inf
        pick = min if select == "Min" else max
        for p in rules["policies"]:
            start = current - self._changed(state.up_events, p["periodSeconds"]) + self._changed(
                state.down_events, p["periodSeconds"])
            proposed = start + p["value"] if p["type"] == "Pods" else math.ceil(start * (1 + p["value"] / 100))
            result = pick(result, proposed)
        return int(result)

    def _down_limit(self, state: _State, current: int, rules: dict) -> int:
        """calculateScaleDownLimitWithBehaviors."""
        select = rules["selectPolicy"]
        if select == "Disabled":
            return current
        result = -math.inf if select == "Min" else math.inf
        pick = max if select == "Min" else min
        for p in rules["policies"]:
            start = current - self._changed(state.up_events, p["periodSeconds"]) + self._changed(
                state.down_events, p["periodSeconds"])
            proposed = start - p["value"] if p["type"] == "Pods" else int(start * (1 - p["value"] / 100))
            result = pick(result, proposed)
        return int(result)

    def _prune_events(self, state: _State, behavior: dict) -> None:
        """markScaleEventsOutdated: events older than the longest policy period are dropped."""
        for events, rules in ((state.up_events, _rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP, None)),
                              (state.down_events, _rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN, 0))):
            longest = max((p["periodSeconds"] for p in rules["policies"]), default=0)
            events[:] = [(n, ts) for n, ts in events if ts >= self.env.now - longest]


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
