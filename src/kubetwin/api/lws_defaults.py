"""LeaderWorkerSet defaulting as the API server applies it on create: the LWS mutating webhook's Default
(kubernetes-sigs/lws pkg/webhooks/leaderworkerset_webhook.go) on top of the CRD's schema defaults (replicas 1, size
1, startupPolicy LeaderCreated, restartPolicy RecreateGroupOnPodRestart, subGroupPolicyType LeaderWorker:
config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml, which api.crd applies).

API-level defaulting like jobset_defaults: validation (api.crd runs it before the schema) and the LWS controller's
admission step use this one copy.
"""

from __future__ import annotations

from typing import Any

RECREATE_GROUP = "RecreateGroupOnPodRestart"


def lws_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """Default: restartPolicy RecreateGroupOnPodRestart ("Default", deprecated, becomes None), a RollingUpdate
    rollout with maxUnavailable 1, maxSurge 0, partition 0, and networkConfig.subdomainPolicy Shared."""
    spec = dict(obj.get("spec") or {})
    tmpl = dict(spec.get("leaderWorkerTemplate") or {})
    policy = tmpl.get("restartPolicy") or RECREATE_GROUP
    tmpl["restartPolicy"] = "None" if policy == "Default" else policy
    spec["leaderWorkerTemplate"] = tmpl
    rollout = {"type": "RollingUpdate", **(spec.get("rolloutStrategy") or {})}
    if rollout["type"] == "RollingUpdate" and rollout.get("rollingUpdateConfiguration") is None:
        rollout["rollingUpdateConfiguration"] = {"maxUnavailable": 1, "maxSurge": 0, "partition": 0}
    spec["rolloutStrategy"] = rollout
    net = dict(spec.get("networkConfig") or {})
    if net.get("subdomainPolicy") is None:
        net["subdomainPolicy"] = "Shared"
    spec["networkConfig"] = net
    return {**obj, "spec": spec}
