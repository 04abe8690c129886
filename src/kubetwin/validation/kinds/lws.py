"""LeaderWorkerSet: what the LWS validating webhook refuses beyond the CRD's schema (kubernetes-sigs/lws
pkg/webhooks/leaderworkerset_webhook.go generalValidate, in its words), its pod templates as the pods get them,
and what the run does with what it does not model."""

from __future__ import annotations

import re

from kubetwin.api import fields
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.lws_defaults import lws_defaults
from kubetwin.validation.kinds.base import KindChecks

INT32_MAX = 2**31 - 1
SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
_RU = "spec.rolloutStrategy.rollingUpdateConfiguration"


def _scaled(value: object, total: int, round_up: bool) -> int | None:
    """intstr.GetScaledValueFromIntOrPercent; None for a value it refuses."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]+%", value):
        exact = int(value[:-1]) * total
        return -(-exact // 100) if round_up else exact // 100
    return None


def webhook(m: Manifest) -> list[Diagnostic]:
    """generalValidate: replicas, size, their product, maxUnavailable / maxSurge / partition, subGroupSize."""
    obj = lws_defaults(m.obj)
    spec = obj.get("spec") or {}
    lwt = spec.get("leaderWorkerTemplate") or {}
    replicas, size = spec.get("replicas", 1), lwt.get("size", 1)
    out: list[tuple[str, str]] = []
    if isinstance(replicas, int) and replicas < 0:
        out.append(("spec.replicas", "replicas must be equal or greater than 0"))
    if isinstance(replicas, int) and replicas > 1000000:
        out.append(("spec.replicas", "replicas must be equal or less than 1000000"))
    if isinstance(size, int) and size < 1:
        out.append(("spec.leaderWorkerTemplate.size", "size must be equal or greater than 1"))
    if isinstance(replicas, int) and isinstance(size, int) and replicas * size > INT32_MAX:
        out.append(("spec.replicas", f"the product of replicas and worker replicas must not exceed {INT32_MAX}"))
    ru = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    values = {}
    for name, up in (("maxUnavailable", False), ("maxSurge", True)):
        v = ru.get(name, 1 if name == "maxUnavailable" else 0)
        if isinstance(v, str) and not re.fullmatch(r"[0-9]+%", v):
            out.append((f"{_RU}.{name}", "a valid percent string must be a numeric string followed by an ending "
                        "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"))
        elif isinstance(v, int) and v < 0:
            out.append((f"{_RU}.{name}", "must be greater than or equal to 0"))
        elif isinstance(v, str) and int(v[:-1]) > 100:
            out.append((f"{_RU}.{name}", "must not be greater than 100%"))
        values[name] = _scaled(v, replicas if isinstance(replicas, int) else 0, up)
    if isinstance(ru.get("partition"), int) and ru["partition"] < 0:
        out.append((f"{_RU}.partition", "must be greater than or equal to 0"))
    if values["maxUnavailable"] == 0 and values["maxSurge"] == 0 and replicas != 0:
        out.append((f"{_RU}.maxUnavailable", "must not be 0 when `maxSurge` is 0"))
    sub = lwt.get("subGroupPolicy")
    path = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
    if isinstance(sub, dict) and isinstance(sub.get("subGroupSize"), int) and isinstance(size, int):
        sg = sub["subGroupSize"]
        if sg < 1:
            out.append((path, "subGroupSize must be equal or greater than 1"))
        else:
            if size % sg != 0 and (size - 1) % sg != 0:
                out.append((path, "size or size - 1 must be divisible by subGroupSize"))
            if size < sg:
                out.append((path, "subGroupSize cannot be larger than size"))
            if sub.get("subGroupPolicyType") == "LeaderExcluded" and (size - 1) % sg != 0:
                out.append((path, "size-1 must be divisible by subGroupSize when using LeaderExcluded"))
    elif sub is None and SUBGROUP_EXCLUSIVE in ((obj.get("metadata") or {}).get("annotations") or {}):
        out.append((f"metadata.annotations.{SUBGROUP_EXCLUSIVE}",
                    "cannot have subgroup-exclusive-topology without subGroupSize set"))
    return [Diagnostic(m.file, m.line_of(p), m.ref, p, f'admission webhook "vleaderworkerset.kb.io" denied the '
                       f"request: {_go_path(p)}: Invalid value: {_go_value(_value(obj, p))}: {msg}", "")
            for p, msg in out]


def _value(obj: dict, path: str) -> object:
    """The value at a field path (an annotation key has dots of its own)."""
    if path.startswith("metadata.annotations."):
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(path.removeprefix("metadata.annotations."))
    return fields.get_path(obj, path)


def _go_path(path: str) -> str:
    """The field path as the webhook writes it (its sub-group errors say "SubGroupPolicy")."""
    return path.replace(".subGroupPolicy.", ".SubGroupPolicy.")


def _go_value(value: object) -> str:
    """field.Invalid's value: a string quoted, a number as is."""
    return f'"{value}"' if isinstance(value, str) else str(value)


def pod_templates(m: Manifest) -> list[Diagnostic]:
    """The leader and worker templates' containers, as the group's pods get them from the API server."""
    out: list[Diagnostic] = []
    for name in ("leaderTemplate", "workerTemplate"):
        spec = fields.get_path(m.obj, f"spec.leaderWorkerTemplate.{name}.spec")
        if isinstance(spec, dict):
            out += fields.containers(m, f"spec.leaderWorkerTemplate.{name}.spec", spec)
    return out


def what_the_run_does(m: Manifest) -> list[Diagnostic]:
    """The parts of a LeaderWorkerSet the run does not model, said rather than dropped."""
    from kubetwin.serving.modelserver.recognize import inspect_model_server

    obj = lws_defaults(m.obj)
    spec = obj.get("spec") or {}
    out: list[str] = []
    lwt = spec.get("leaderWorkerTemplate") or {}
    if lwt.get("volumeClaimTemplates"):
        out.append("volumeClaimTemplates are not simulated: the group's pods get no claims from them")
    for name in ("leaderTemplate", "workerTemplate"):
        pspec = fields.get_path(obj, f"spec.leaderWorkerTemplate.{name}.spec")
        if isinstance(pspec, dict) and inspect_model_server(pspec, f"spec.leaderWorkerTemplate.{name}.spec"):
            out.append(f"its {name} runs a model server: a group's leader serves with the GPUs of the whole "
                       "group (size x its own, as vLLM over the group's Ray cluster), its pipeline stages' sends (and "
                       "a tensor-parallel group wider than one host) timed over the pool's network tier; the "
                       "workers run no engine of their own, and a worker that dies leaves the leader serving unless "
                       "the restart policy recreates the group (real vLLM loses its Ray worker and exits)")
            break
    return [Diagnostic(m.file, m.line, m.ref, "", f"LeaderWorkerSet: {msg}", "", "notice") for msg in out]


CHECKS = KindChecks("leaderworkerset.x-k8s.io", "LeaderWorkerSet", checks=(webhook, pod_templates),
                    when_clean=what_the_run_does)
