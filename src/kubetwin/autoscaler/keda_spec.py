"""A ScaledObject's spec as KEDA reads and validates it, apart from running it: the prometheus trigger parsed as
NewPrometheusScaler parses its metadata (pkg/scalers/prometheus_scaler.go, KEDA's own error texts) and the replica
bounds check (apis/keda/v1alpha1 CheckReplicaCountBoundsAreValid). Shared by the operator loop in `keda` and by
`kubetwin validate` (`scaled_object_errors`), which needs no controller."""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.store.store import Obj

DEFAULT_MAX_REPLICAS = 100  # scaledobject_types.go defaultHPAMaxReplicas
# Prometheus trigger metadata the scaler reads (prometheusMetadata `keda` tags); required ones first.
PROMETHEUS_REQUIRED = ("serverAddress", "query", "threshold")
UTILIZATION_ERROR = ("'Utilization' metric type is unsupported for external metrics, allowed values are 'Value' or "
                     "'AverageValue'")  # pkg/scalers/scaler.go ErrScalerUnsupportedUtilizationMetricType


@dataclass(frozen=True)
class PrometheusTrigger:
    """One prometheus trigger, parsed as the scaler parses it."""

    index: int
    name: str
    query: str
    threshold: float
    activation: float
    metric_type: str
    ignore_null: bool
    cached: bool

    @property
    def metric_name(self) -> str:
        """GenerateMetricNameWithIndex(triggerIndex, "prometheus")."""
        return f"s{self.index}-prometheus"


def _go_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None


def parse_trigger(index: int, trig: dict) -> PrometheusTrigger:
    """NewPrometheusScaler: metric type, then TypedConfig over the metadata. Raises ValueError with KEDA's text."""
    ttype = trig.get("type")
    if ttype != "prometheus":
        raise ValueError(f"no scaler found for type: {ttype}")  # scale_handler.go buildScaler default case
    mtype = trig.get("metricType") or "AverageValue"
    if mtype == "Utilization":
        raise ValueError(f"error getting scaler metric type: {UTILIZATION_ERROR}")
    meta = trig.get("metadata") or {}
    errors = [f'missing required parameter "{k}" in [triggerMetadata]' for k in PROMETHEUS_REQUIRED
              if not str(meta.get(k) or "")]
    values: dict[str, float | bool] = {}
    for k, default in (("threshold", None), ("activationThreshold", 0.0)):
        if str(meta.get(k) or ""):
            try:
                values[k] = _go_float(str(meta[k]))
            except ValueError as e:
                errors.append(f'unable to set param "{k}" value "{meta[k]}": {e}')
        elif default is not None:
            values[k] = default
    ignore = str(meta.get("ignoreNullValues", "true"))
    if ignore.lower() in ("1", "t", "true"):
        values["ignore"] = True
    elif ignore.lower() in ("0", "f", "false"):
        values["ignore"] = False
    else:
        errors.append(f'unable to set param "ignoreNullValues" value "{ignore}": strconv.ParseBool: parsing '
                      f'"{ignore}": invalid syntax')
    if errors:  # kerrors.NewAggregate: one error as is, several as "[a, b]"
        msg = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise ValueError(f"error parsing prometheus metadata: {msg}")
    return PrometheusTrigger(index, trig.get("name") or "", str(meta["query"]), float(values["threshold"]),
                             float(values["activationThreshold"]), mtype, bool(values["ignore"]),
                             bool(trig.get("useCachedMetrics")))


def scaled_object_errors(so: Obj) -> list[tuple[str, str]]:
    """What KEDA reports about a ScaledObject beyond the CRD schema, as (field path, KEDA's message): the replica
    bounds (v1alpha1.CheckReplicaCountBoundsAreValid) and each trigger's scaler metadata. For `kubetwin validate`."""
    spec = so.get("spec") or {}
    out = []
    bounds = bounds_error(spec)
    if bounds:
        out.append(("spec", bounds))
    for i, trig in enumerate(spec.get("triggers") or []):
        try:
            parse_trigger(i, trig)
        except ValueError as e:
            out.append((f"spec.triggers[{i}]", str(e)))
    return out


def bounds_error(spec: dict) -> str:
    lo = 0
    if spec.get("minReplicaCount") is not None:
        lo = max(1, int(spec["minReplicaCount"]))  # GetHPAMinReplicas
    hi = int(spec.get("maxReplicaCount", DEFAULT_MAX_REPLICAS))
    if lo > hi:
        return f"MinReplicaCount={lo} must be less than MaxReplicaCount={hi}"
    idle = spec.get("idleReplicaCount")
    if idle is not None and idle >= lo:
        return f"IdleReplicaCount={idle} must be less than MinReplicaCount={lo}"
    return ""
