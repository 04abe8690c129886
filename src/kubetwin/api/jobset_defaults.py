"""JobSet defaulting as the API server applies it on create: the JobSet mutating webhook's Default
(kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go) plus the CRD's schema defaults for the same fields.

It is API-level defaulting (like Kubernetes' SetDefaults_*), so validation (api.crd runs it before the schema and
CEL rules) and the JobSet controller's admission step use this one copy.
"""

from __future__ import annotations

from typing import Any

COMPLETION_MODE = "Indexed"  # a replicated Job's completionMode unless it sets one (jobset_webhook.go Default)


def jobset_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """The JobSet webhook's Default plus the CRD defaults (replicas 1, groupName default, Recreate)."""
    spec = dict(obj.get("spec") or {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    net = {"enableDNSHostnames": True, "publishNotReadyAddresses": True, **(spec.get("network") or {})}
    spec["network"] = net
    if spec.get("failurePolicy") is not None:
        fp = {"restartStrategy": "Recreate", **spec["failurePolicy"]}
        if fp.get("rules"):
            fp["rules"] = [{**r, "name": r.get("name") or f"failurePolicyRule{i}"} for i, r in enumerate(fp["rules"])]
        spec["failurePolicy"] = fp
    rjobs = []
    for rj in spec.get("replicatedJobs") or []:
        tmpl = dict(rj.get("template") or {})
        jspec = {"completionMode": COMPLETION_MODE, **(tmpl.get("spec") or {})}
        ptmpl = dict(jspec.get("template") or {})
        ptmpl["spec"] = {"restartPolicy": "OnFailure", **(ptmpl.get("spec") or {})}
        jspec["template"] = ptmpl
        rjobs.append({"groupName": "default", "replicas": 1, **rj, "template": {**tmpl, "spec": jspec}})
    spec["replicatedJobs"] = rjobs
    return {**obj, "spec": spec}
