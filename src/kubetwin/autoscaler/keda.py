"""The KEDA operator and metrics server for ScaledObjects (keda.sh/v1alpha1) with prometheus triggers.

Sources (kedacore/keda): controllers/keda/scaledobject_controller.go (Reconcile: conditions, label, target check,
replica bounds, HPA), controllers/keda/hpa.go (the `keda-hpa-<name>` HPA: min = max(1, minReplicaCount), External
metrics `s<i>-<scaler>` with a `scaledobject.keda.sh/name` selector, behavior copied), pkg/scaling/executor/
scale_scaledobjects.go (RequestScale: activation, scale from/to zero or idle, cooldown only for the last replica,
conditions and events), pkg/scaling/scale_handler.go (a poll every pollingInterval, first one at once),
pkg/scalers/prometheus_scaler.go (metadata, `isActive = value > activationThreshold`, empty results),
apis/keda/v1alpha1 (defaults: pollingInterval 30, cooldownPeriod 300, initialCooldownPeriod 0, max 100; condition
reasons and messages). The metrics server answers the HPA's External metric by evaluating the trigger's query
when the HPA asks (no caching unless the trigger sets useCachedMetrics).

The twin evaluates the PromQL query itself (`prometheus.promql`) over the given MetricsProvider; serverAddress is
required (KEDA requires it) but never contacted.
Trigger parsing and the spec's validation (also used by `kubetwin validate`) are in `keda_spec`.
"""

from __future__ import annotations

import math

from kubetwin.autoscaler.hpa import format_milli, register_external_metrics
from kubetwin.autoscaler.keda_spec import DEFAULT_MAX_REPLICAS, PrometheusTrigger, bounds_error, parse_trigger
from kubetwin.autoscaler.keda_spec import scaled_object_errors as scaled_object_errors
from kubetwin.k8s.conditions import find_condition, set_condition
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.prometheus.promql import Evaluator, MetricsProvider, PromQLError
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPONENT = "keda-operator"
DEFAULT_POLLING_INTERVAL = 30  # apis/keda/v1alpha1 withtriggers_types.go defaultPollingInterval
DEFAULT_COOLDOWN_PERIOD = 300  # pkg/scaling/executor/scale_executor.go defaultCooldownPeriod
DEFAULT_INITIAL_COOLDOWN_PERIOD = 0  # scale_executor.go defaultInitialCooldownPeriod
OWNER_LABEL = "scaledobject.keda.sh/name"  # v1alpha1.ScaledObjectOwnerAnnotation
PAUSED, PAUSED_REPLICAS = "autoscaling.keda.sh/paused", "autoscaling.keda.sh/paused-replicas"
READY_REASON = "ScaledObjectReady"  # ScaledObjectConditionReadySuccessReason
READY_MESSAGE = "ScaledObject is defined correctly and is ready for scaling"  # ...ReadySuccessMessage
GVKR = {"Deployment": ("apps", "v1", "deployments"), "StatefulSet": ("apps", "v1", "statefulsets")}


class KedaController:
    """The operator (one scale loop per ScaledObject) and the external metrics server, over the store."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, metrics: MetricsProvider) -> None:
        self.store, self.env, self.events = store, env, events
        self.evaluator = Evaluator(metrics)
        self._loops: dict[tuple[str, str], int] = {}  # key -> generation of its running scale loop
        self._specs: dict[tuple[str, str], dict] = {}
        self._last_active: dict[tuple[str, str], float] = {}
        self._cached: dict[tuple[str, str, str], float] = {}
        store.watch("ScaledObject", self._on_so)
        register_external_metrics(store, self._serve_external)

    # -- reconcile ----------------------------------------------------------------------------------
    def _on_so(self, etype: str, obj: Obj, old: Obj | None) -> None:
        key = (obj["metadata"].get("namespace") or "default", obj["metadata"]["name"])
        if etype == "DELETED":
            self.env.after(0, lambda: self._finalize(obj))
            return
        spec_key = {"spec": obj.get("spec"), "annotations": obj["metadata"].get("annotations")}
        if self._specs.get(key) != spec_key:  # GenerationChangedPredicate (+ the pause annotations)
            self._specs[key] = spec_key
            self.env.after(0, lambda: self._reconcile(key))

    def _reconcile(self, key: tuple[str, str]) -> None:
        """scaledobject_controller.go Reconcile + reconcileScaledObject."""
        so = self.store.get("ScaledObject", *key)
        if so is None:
            return
        ns, name = key
        labels = so["metadata"].get("labels") or {}
        if labels.get(OWNER_LABEL) != name:  # ensureScaledObjectLabel
            so = self.store.update({**so, "metadata": {**so["metadata"], "labels": {**labels, OWNER_LABEL: name}}})
        status = dict(so.get("status") or {})
        conds = [dict(c) for c in status.get("conditions") or []] or [
            {"type": t, "status": "Unknown"} for t in ("Ready", "Active", "Fallback", "Paused")]
        spec = so.get("spec") or {}
        annotations = so["metadata"].get("annotations") or {}
        if annotations.get(PAUSED) == "true" or PAUSED_REPLICAS in annotations:
            self._loops.pop(key, None)
            self._delete_hpa(so)
            if PAUSED_REPLICAS in annotations:
                self._scale(so, int(annotations[PAUSED_REPLICAS]))
                status["pausedReplicaCount"] = int(annotations[PAUSED_REPLICAS])
            _set(conds, "Paused", "True", "ScaledObjectPaused", "ScaledObject is paused")
            _set(conds, "Ready", "True", READY_REASON, "ScaledObject is paused")
            self._write(so, {**status, "conditions": conds})
            return
        if _cond(conds, "Paused").get("status") == "True":
            _set(conds, "Paused", "False", "ScaledObjectUnpaused", "pause annotation removed for ScaledObject")
            status.pop("pausedReplicaCount", None)
        msg, err = self._check(so, status)
        if err:
            full = f"{msg}: {err}"
            _set(conds, "Ready", "False", "ScaledObjectCheckFailed", full)
            _set(conds, "Active", "Unknown", "UnknownState", "ScaledObject check failed")
            self.events.event(so, "Warning", "ScaledObjectCheckFailed", full, COMPONENT)
            self._write(so, {**status, "conditions": conds})
            if "not found" in err:  # the reconciler requeues; the target may be created later
                self.env.after(float(spec.get("pollingInterval") or DEFAULT_POLLING_INTERVAL),
                               lambda: self._reconcile(key))
            return
        if _cond(conds, "Ready").get("status") != "True":
            self.events.event(so, "Normal", "ScaledObjectReady", "ScaledObject is ready for scaling", COMPONENT)
        _set(conds, "Ready", "True", READY_REASON, READY_MESSAGE)
        if not spec.get("fallback"):
            _set(conds, "Fallback", "False", "NoFallbackFound", "No fallbacks are active on this scaled object")
        self._write(so, {**status, "conditions": conds})
        generation = self._loops.get(key, 0) + 1  # a new scale loop replaces the old one
        self._loops[key] = generation
        self.events.event(so, "Normal", "KEDAScalersStarted", "Started scalers watch", COMPONENT)
        self._poll(key, generation)

    def _check(self, so: Obj, status: dict) -> tuple[str, str]:
        """The checks before the HPA; fills status with the target and trigger facts. ('', '') when fine."""
        spec = so.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        if not ref.get("name"):
            return ("ScaledObject doesn't have correct scaleTargetRef specification",
                    "ScaledObject.spec.scaleTargetRef.name is missing")
        kind = ref.get("kind") or "Deployment"
        ns = so["metadata"].get("namespace") or "default"
        target = self.store.get(kind, ns, ref["name"]) if kind in GVKR else None
        if target is None:
            self.events.event(so, "Warning", "ScaledObjectCheckFailed", "Target resource doesn't exist", COMPONENT)
            group, version, resource = GVKR.get(kind, ("", "", kind.lower() + "s"))
            return ("ScaledObject doesn't have correct scaleTargetRef specification",
                    f'{resource}.{group} "{ref["name"]}" not found' if group else
                    f'no matches for kind "{kind}" in version "{ref.get("apiVersion", "apps/v1")}"')
        group, version, resource = GVKR[kind]
        status["scaleTargetKind"] = f"{group}/{version}.{kind}"
        status["scaleTargetGVKR"] = {"group": group, "kind": kind, "resource": resource, "version": version}
        if status.get("originalReplicaCount") is None:
            status["originalReplicaCount"] = int((target.get("spec") or {}).get("replicas", 1))
        bounds = bounds_error(spec)
        if bounds:
            return "ScaledObject doesn't have correct Idle/Min/Max Replica Counts specification", bounds
        triggers = spec.get("triggers") or []
        status["triggersTypes"] = ",".join(sorted({str(t.get("type")) for t in triggers}))
        try:
            parsed = [parse_trigger(i, t) for i, t in enumerate(triggers)]
        except ValueError as e:  # buildScalers: KEDAScalerFailed, then the HPA cannot be built
            self.events.event(so, "Warning", "KEDAScalerFailed", str(e), COMPONENT)
            return "failed to ensure HPA is correctly created for ScaledObject", str(e)
        status["externalMetricNames"] = [t.metric_name for t in parsed]
        status["hpaName"] = self._ensure_hpa(so, parsed)
        return "", ""

    def _ensure_hpa(self, so: Obj, triggers: list[PrometheusTrigger]) -> str:
        """hpa.go newHPAForScaledObject, created or updated to match the ScaledObject."""
        spec, ns, name = so.get("spec") or {}, so["metadata"].get("namespace") or "default", so["metadata"]["name"]
        hpa_cfg = (spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
        hpa_name = hpa_cfg.get("name") or f"keda-hpa-{name}"
        ref = spec.get("scaleTargetRef") or {}
        metrics = []
        for t in triggers:
            target = ({"type": "AverageValue", "averageValue": format_milli(int(t.threshold * 1000))}
                      if t.metric_type == "AverageValue" else
                      {"type": "Value", "value": format_milli(int(t.threshold * 1000))})
            metrics.append({"type": "External", "external": {
                "metric": {"name": t.metric_name, "selector": {"matchLabels": {OWNER_LABEL: name}}},
                "target": target}})
        hpa_spec: dict = {
            "scaleTargetRef": {"apiVersion": ref.get("apiVersion") or "apps/v1",
                               "kind": ref.get("kind") or "Deployment", "name": ref["name"]},
            "minReplicas": max(1, int(spec.get("minReplicaCount") or 0)),
            "maxReplicas": int(spec.get("maxReplicaCount", DEFAULT_MAX_REPLICAS)), "metrics": metrics}
        if hpa_cfg.get("behavior") is not None:
            hpa_spec["behavior"] = hpa_cfg["behavior"]
        labels = {**(so["metadata"].get("labels") or {}), "app.kubernetes.io/name": hpa_name,
                  "app.kubernetes.io/part-of": name, "app.kubernetes.io/managed-by": "keda-operator"}
        cur = self.store.get("HorizontalPodAutoscaler", ns, hpa_name)
        if cur is None:
            self.store.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {
                "name": hpa_name, "namespace": ns, "labels": labels, "ownerReferences": [owner_ref(so)]},
                "spec": hpa_spec})
        elif cur.get("spec") != hpa_spec:
            self.store.update({**cur, "spec": hpa_spec})
        return hpa_name

    def _delete_hpa(self, so: Obj) -> None:
        ns = so["metadata"].get("namespace") or "default"
        name = (so.get("status") or {}).get("hpaName") or f"keda-hpa-{so['metadata']['name']}"
        self.store.delete("HorizontalPodAutoscaler", ns, name)

    def _finalize(self, so: Obj) -> None:
        """finalizeScaledObject: stop the loop, restoreToOriginalReplicaCount, the HPA goes with its owner."""
        key = (so["metadata"].get("namespace") or "default", so["metadata"]["name"])
        self._loops.pop(key, None)
        self._specs.pop(key, None)
        self._last_active.pop(key, None)
        if ((so.get("spec") or {}).get("advanced") or {}).get("restoreToOriginalReplicaCount"):
            orig = (so.get("status") or {}).get("originalReplicaCount")
            if orig is not None:
                self._scale(so, int(orig))
        self._delete_hpa(so)

    # -- the scale loop -----------------------------------------------------------------------------
    def _poll(self, key: tuple[str, str], generation: int) -> None:
        if self._loops.get(key) != generation:
            return
        so = self.store.get("ScaledObject", *key)
        if so is None:
            return
        self._check_scalers(key, so)
        interval = (so.get("spec") or {}).get("pollingInterval")
        interval = DEFAULT_POLLING_INTERVAL if interval is None else interval
        self.env.after(float(interval), lambda: self._poll(key, generation))

    def _check_scalers(self, key: tuple[str, str], so: Obj) -> None:
        """scale_handler checkScalers → executor RequestScale."""
        spec = so.get("spec") or {}
        triggers = [parse_trigger(i, t) for i, t in enumerate(spec.get("triggers") or [])]
        active, is_error, active_names = False, False, []
        for t in triggers:
            try:
                value = self._value(key[0], t)
            except (PromQLError, ValueError) as e:
                is_error = True
                self.events.event(so, "Warning", "KEDAScalerFailed", str(e), COMPONENT)
                continue
            self._cached[(*key, t.metric_name)] = value
            if value > t.activation:
                active = True
                active_names.append(t.name or "prometheusScaler")
        status = dict(so.get("status") or {})
        conds = [dict(c) for c in status.get("conditions") or []]
        _set(conds, "Ready", "True", READY_REASON, READY_MESSAGE)
        ns = key[0]
        ref = spec.get("scaleTargetRef") or {}
        target = self.store.get(ref.get("kind") or "Deployment", ns, ref.get("name", ""))
        if target is None:
            _set(conds, "Ready", "False", "ErrorGettingCurrentReplicas",
                 f'Error getting current replicas count for ScaleTarget: deployments.apps "{ref.get("name")}" '
                 "not found")
            self._write(so, {**status, "conditions": conds})
            return
        current = int((target.get("spec") or {}).get("replicas", 1))
        lo = int(spec.get("minReplicaCount") or 0)
        idle = spec.get("idleReplicaCount")
        now = self.env.now
        if active:
            _set(conds, "Active", "True", "ScalerActive", "Scaling is performed because triggers are active")
            if (idle is not None and current < lo) or current == 0:  # scaleFromZeroOrIdle
                replicas = lo if lo > 0 else 1
                self._scale(so, replicas)
                self.events.event(so, "Normal", "KEDAScaleTargetActivated",
                                  f"Scaled {status.get('scaleTargetKind')} {ns}/{ref['name']} from {current} to "
                                  f"{replicas}, triggered by {';'.join(active_names)}", COMPONENT)
                self._last_active[key] = now
            elif is_error:
                _set(conds, "Ready", "Unknown", "PartialTriggerError",
                     "Some triggers defined in ScaledObject are not working correctly")
            else:
                self._last_active[key] = now
        else:
            _set(conds, "Active", "False", "ScalerNotActive",
                 "Scaling is not performed because triggers are not active")
            if is_error and spec.get("fallback") is None:
                _set(conds, "Ready", "False", "TriggerError", "Triggers defined in ScaledObject are not working "
                     "correctly")
            elif is_error:
                pass  # fallback replicas are the HPA's (not modelled; see the module notes)
            elif (idle is not None and current > idle) or (current > 0 and lo == 0):
                self._scale_to_zero_or_idle(key, so, status, conds, current)
            elif idle is None and current < lo:
                self._scale(so, lo)
        if key in self._last_active:
            status["lastActiveTime"] = self.store.timestamp(self._last_active[key])
        self._write(so, {**status, "conditions": conds})

    def _scale_to_zero_or_idle(self, key: tuple[str, str], so: Obj, status: dict, conds: list[dict],
                               current: int) -> None:
        """Only once the last activity is older than cooldownPeriod (or, never active, once the object is older
        than initialCooldownPeriod): this is the only place cooldownPeriod acts."""
        spec, now = so.get("spec") or {}, self.env.now
        cooldown = spec.get("cooldownPeriod")
        cooldown = DEFAULT_COOLDOWN_PERIOD if cooldown is None else cooldown
        initial = spec.get("initialCooldownPeriod")
        initial = DEFAULT_INITIAL_COOLDOWN_PERIOD if initial is None else initial
        last = self._last_active.get(key)
        created = self._created(so)
        if (last is None and created + initial < now) or (last is not None and last + cooldown < now):
            idle = spec.get("idleReplicaCount")
            to = int(idle) if idle is not None else int(spec.get("minReplicaCount") or 0)
            self._scale(so, to)
            ref = spec.get("scaleTargetRef") or {}
            self.events.event(so, "Normal", "KEDAScaleTargetDeactivated",
                              f"Deactivated {status.get('scaleTargetKind')} {key[0]}/{ref.get('name')} from "
                              f"{current} to {to}", COMPONENT)
        else:
            _set(conds, "Active", "False", "ScalerCooldown", "Scaler cooling down because triggers are not active")

    def _created(self, so: Obj) -> float:
        """metadata.creationTimestamp on the simulated clock (whole seconds, as the API server stores it)."""
        from datetime import datetime

        def parse(ts: str) -> datetime:
            return datetime.fromisoformat(ts.replace("Z", "+00:00"))

        created = so["metadata"].get("creationTimestamp")
        return (parse(created) - parse(self.store.start_time)).total_seconds() if created else 0.0

    def _scale(self, so: Obj, replicas: int) -> None:
        ref = (so.get("spec") or {}).get("scaleTargetRef") or {}
        ns = so["metadata"].get("namespace") or "default"
        self.store.patch(ref.get("kind") or "Deployment", ns, ref.get("name", ""),
                         lambda d: d if (d.get("spec") or {}).get("replicas") == replicas else
                         {**d, "spec": {**d["spec"], "replicas": replicas}})

    def _write(self, so: Obj, status: dict) -> None:
        cur = self.store.get("ScaledObject", so["metadata"].get("namespace") or "default", so["metadata"]["name"])
        if cur is not None and cur.get("status") != status:
            self.store.update({**cur, "status": status})

    # -- metrics ------------------------------------------------------------------------------------
    def _value(self, ns: str, t: PrometheusTrigger) -> float:
        """ExecutePromQuery: a single-element vector's value; empty is 0 with ignoreNullValues (else an error);
        NaN/Inf likewise."""
        result = self.evaluator.query(t.query, self.env.now)
        if not isinstance(result, list):
            raise PromQLError(f"prometheus query {t.query} returned a scalar; KEDA reads data.result as a vector "
                              "(wrap it in vector(...))")
        if not result:
            if t.ignore_null:
                return 0.0
            raise ValueError("prometheus metrics 'prometheus' target may be lost, the result is empty")
        if len(result) > 1:
            raise ValueError(f"prometheus query {t.query} returned multiple elements")
        v = result[0][1]
        if math.isnan(v) or math.isinf(v):
            if t.ignore_null:
                return 0.0
            raise ValueError(f"prometheus query returns {v:f}")
        return v

    def _serve_external(self, ns: str, metric: str, selector: dict | None) -> list[float]:
        """KEDA's metrics server (GetMetricsAndActivity for the HPA): the trigger's query evaluated now."""
        so_name = ((selector or {}).get("matchLabels") or {}).get(OWNER_LABEL)
        if so_name is None:
            raise LookupError(metric)
        so = self.store.get("ScaledObject", ns, so_name)
        if so is None:
            raise ValueError(f'scaledobjects.keda.sh "{so_name}" not found')
        for i, trig in enumerate((so.get("spec") or {}).get("triggers") or []):
            t = parse_trigger(i, trig)
            if t.metric_name == metric:
                cached = self._cached.get((ns, so_name, metric))
                if t.cached and cached is not None:
                    return [cached]
                return [self._value(ns, t)]
        raise ValueError(f"no matching metrics found for {metric}")


def _cond(conds: list[dict], ctype: str) -> dict:
    return find_condition(conds, ctype) or {}


def _set(conds: list[dict], ctype: str, status: str, reason: str, message: str) -> None:
    """Conditions.Set*Condition: replace the condition of that type in place (KEDA keeps no transition time)."""
    conds[:] = set_condition(conds, {"type": ctype, "status": status, "reason": reason, "message": message})[0]
