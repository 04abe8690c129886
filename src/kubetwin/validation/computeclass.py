"""What `kubetwin validate` says about GKE ComputeClasses beyond the CRD's own checks (api/crd.py runs those).

- Warnings in the words of GKE's ComputeClass Health condition (GoogleCloudPlatform/cluster-autoscaler
  pkg/computeclass/status/validator/conditions/conditions_constants.go): a pool labelled for a class without the
  class's taint ("Crd taint is missing for the nodepool %v."), with another value ("Crd taint value doesn't match
  Crd name for the nodepool %v."), a class's pool that matches no rule ("Nodepool %v doesn't match any priority rule
  and Crd is configured to not scale up in that case" under DoNotScaleUp, else "Nodepool %v has an Crd label but
  doesn't match any priority rule."), a class with node pool auto-creation off and no matching autoscaling pool
  ("Crd with NAP disabled should have at least one matching nodepool with autoscaling enabled."), a `nodepools`
  rule naming a pool that is not there or does not autoscale ("Nodepool %v specified by name has autoscaling
  disabled or doesn't exist in the cluster.").
- A warning for a workload selecting a class the scenario does not define (its pods stay Pending: no pool carries
  the label) and for a pool labelled with such a class.
- Notices for the fields the twin does not model (autoscaler/computeclass.py module doc).
"""

from __future__ import annotations

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.autoscaler.computeclass import KIND, misconfigurations
from kubetwin.k8s.names import COMPUTE_CLASS

WARNING, NOTICE = "warning", "notice"

# priority fields the twin reads; the others get a notice (autoscaler/computeclass.py)
MODELLED_PRIORITY = {"machineFamily", "machineType", "spot", "minCores", "minMemoryGb", "gpu", "tpu", "flexStart",
                     "reservations", "placement", "location", "nodepools", "nodeLabels", "taints", "priorityScore",
                     "maxRunDurationSeconds", "capacityCheckWaitTimeSeconds"}
UNMODELLED_SPEC = {
    "nodePoolConfig": "node pool configuration matching (image type, service account ...) is not modelled",
    "nodePoolGroup": "node pool groups are not modelled",
    "autopilot": "Autopilot-managed nodes are not modelled",
    "minimumCapacity": "minimum capacity (pre-provisioned nodes) is not modelled",
    "allocationStrategyDefaults": "allocation strategies are not modelled",
}


def _note(m: Manifest, fld: str, message: str, fix: str = "", severity: str = NOTICE) -> Diagnostic:
    return Diagnostic(m.file, m.line_of(fld), m.ref, fld, message, fix, severity)


def _class_selected(m: Manifest) -> list[tuple[str, str]]:
    """(field path, class name) of each pod template of a workload that selects a class by node selector."""
    out = []
    for t in kinds.pod_templates(m.obj):
        name = (t.spec.get("nodeSelector") or {}).get(COMPUTE_CLASS) if isinstance(t.spec, dict) else None
        if name:
            out.append((t.at("spec") + ".nodeSelector", str(name)))
    return out


def diagnostics(clean: list[Manifest]) -> list[Diagnostic]:
    classes = {m.obj["metadata"]["name"]: m for m in clean if m.kind == KIND
               and str(m.obj.get("apiVersion", "")).startswith("cloud.google.com/")}
    pools = [m for m in clean if m.kind == "NodePool" and isinstance(m.obj.get("spec"), dict)]
    out: list[Diagnostic] = []
    for m in classes.values():
        out += _unmodelled(m)
    for p in pools:
        out += _pool(p, classes)
    scenario = next((m.obj for m in clean if m.kind == "Scenario"), None) or {}
    default_on = bool(((scenario.get("spec") or {}).get("clusterAutoscaler") or {}).get("defaultComputeClass"))
    for name, m in classes.items():
        out += _class_pools(m, name, pools, default_on)
    for m in clean:
        if m.kind in (KIND, "NodePool"):
            continue
        for fld, name in _class_selected(m):
            if name not in classes:
                out.append(_note(m, fld, f"selects ComputeClass {name!r}, which the scenario does not define: no "
                                 "node pool carries its label, so its pods stay Pending",
                                 f"add a ComputeClass named {name} (cloud.google.com/v1) and label its node pools "
                                 f"{COMPUTE_CLASS}: {name}", WARNING))
    return out


def _unmodelled(m: Manifest) -> list[Diagnostic]:
    spec = m.obj.get("spec") or {}
    out = []
    for key, why in UNMODELLED_SPEC.items():
        if key in spec:
            out.append(_note(m, f"spec.{key}", f"{why}: the field is stored and has no effect on the run"))
    if "ensureAllDaemonSetPodsRunning" in (spec.get("activeMigration") or {}):
        out.append(_note(m, "spec.activeMigration.ensureAllDaemonSetPodsRunning", "migration for DaemonSet pods is "
                         "not modelled: the field has no effect on the run"))
    for key in sorted(set(spec.get("priorityDefaults") or {}) - {"location"}):
        out.append(_note(m, f"spec.priorityDefaults.{key}", f"priorityDefaults.{key} is not modelled: the field "
                         "has no effect on the run"))
    for i, p in enumerate(spec.get("priorities") or []):
        at = f"spec.priorities[{i}]"
        for key in sorted(set(p) - MODELLED_PRIORITY):
            out.append(_note(m, f"{at}.{key}", f"{key} is not modelled: the rule matches pools without regard "
                             "to it"))
        if "capacityCheckWaitTimeSeconds" in p and not (p.get("flexStart") or {}).get("enabled"):
            # the CRD allows it only with flex-start or a multi-host TPU: the latter's wait is not modelled
            out.append(_note(m, f"{at}.capacityCheckWaitTimeSeconds", "GKE waits that long for a multi-host TPU "
                             "slice's capacity; the twin models the wait for flex-start only, so this rule's "
                             "scale-ups fail at once when Compute Engine has no capacity"))
    return out


def _pool(p: Manifest, classes: dict[str, Manifest]) -> list[Diagnostic]:
    name = (p.obj["spec"].get("labels") or {}).get(COMPUTE_CLASS)
    if not name or name in classes:
        return []
    return [_note(p, f"spec.labels.{COMPUTE_CLASS}", f"labelled for ComputeClass {name!r}, which the scenario does "
                  "not define: the autoscaler treats the pool as a pool of no class",
                  f"add the ComputeClass {name}, or fix the label", WARNING)]


FIXES = {
    "TaintMissing": "add the taint {{key: {key}, value: {name}, effect: NoSchedule}} (gcloud --node-taints="
                    "{key}={name}:NoSchedule), so that only the class's pods land on the pool",
    "TaintValueNotMatching": "make the taint {{key: {key}, value: {name}, effect: NoSchedule}}",
    "NoRuleMatching": "add a rule that matches {pool}, or remove its {key} label",
    "NodepoolWillNeverScaleUp": "add a rule that matches {pool}, or remove its {key} label",
    "NapDisabledAndNoMatchingNodegroups": "label an autoscaling node pool {key}: {name} (and taint it) that one of "
                                          "the rules matches",
    "NodePoolNotExist": "name an existing NodePool with autoscaling",
}


def _class_pools(m: Manifest, name: str, pools: list[Manifest], default_on: bool) -> list[Diagnostic]:
    """GKE's Health-condition findings (autoscaler/computeclass.misconfigurations), each at its object's line."""
    by_name = {p.obj["metadata"]["name"]: p for p in pools}
    out = []
    for f in misconfigurations(m.obj, [p.obj for p in pools], default_on):
        at = by_name[f.pool] if f.pool and f.field == "spec.taints" else m
        fix = FIXES.get(f.reason, "").format(key=COMPUTE_CLASS, name=name, pool=f.pool)
        out.append(_note(at, f.field, f.message, fix, WARNING))
    return out
