"""kubectl get's tables over replayed objects: each kind's columns, as kubectl's printers (pkg/printers/internalversion)
and the CRDs' additionalPrinterColumns print them."""

from __future__ import annotations

import functools
from datetime import datetime

from kubetwin.api import kinds
from kubetwin.catalog.storage import DEFAULT_CLASS_ANNOTATION
from kubetwin.cli.jsonpath import first, go_text
from kubetwin.controllers.volumes import ACCESS_MODE_SHORT, claim_class
from kubetwin.k8s.conditions import is_condition_true
from kubetwin.k8s.names import GPU, INSTANCE_TYPE
from kubetwin.k8s.units import format_duration


@functools.lru_cache(maxsize=1 << 16)
def age(ts: str | None, now: datetime) -> str:
    """kubectl's AGE of a timestamp at `now`; remembered, as a table of 100,000 Events holds a few thousand
    distinct seconds (issue 32: `get events` at a 1,000,000-pod day's end)."""
    if not ts:
        return "<unknown>"
    t = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return format_duration(max(0.0, (now - t).total_seconds()))


def pod_status(p: dict) -> str:
    st = p.get("status") or {}
    phase = st.get("phase", "Pending")
    if phase == "Succeeded":
        return "Completed"
    if phase == "Pending" and (p.get("spec") or {}).get("schedulingGates"):
        return "SchedulingGated"  # kubectl's printer (pkg/printers/internalversion printPod)
    if phase == "Running" and p["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if phase == "Failed" and st.get("reason"):
        return st["reason"]  # e.g. Terminated after a node shutdown, as kubectl shows status.reason
    if phase == "Failed":  # kubectl's printPod: the last terminated container's reason (Error, OOMKilled)
        for cs in reversed(st.get("containerStatuses") or []):
            reason = ((cs.get("state") or {}).get("terminated") or {}).get("reason")
            if reason:
                return reason
    if phase in ("Running", "Pending"):  # a waiting container: kubectl shows its reason (CrashLoopBackOff,
        # ContainerCreating while the kubelet pulls images or waits for the pod's volumes)
        waiting = [((c.get("state") or {}).get("waiting") or {}).get("reason") for c in st.get("containerStatuses")
                   or []]
        return next((w for w in reversed(waiting) if w), phase)
    return phase


def pod_restarts(p: dict, now: datetime) -> str:
    """kubectl's RESTARTS: the containers' restart counts, and how long ago the last one exited
    (pkg/printers/internalversion printPod: "5 (3m40s ago)")."""
    cs = (p.get("status") or {}).get("containerStatuses") or []
    n = sum(int(c.get("restartCount") or 0) for c in cs)
    last = max((((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or "" for c in cs), default="")
    return f"{n} ({age(last, now)} ago)" if n and last else str(n)


def jsonpath(obj: dict, path: str) -> str:
    """A CRD printer column's value (the API server evaluates it with client-go's JSONPath, as `-o jsonpath`
    does: cli/jsonpath.py); missing values print empty; `a || b` reads the first path that has a value (one
    column over both served versions' field names, a twin addition)."""
    if "||" in path:
        return next((v for v in (jsonpath(obj, p.strip()) for p in path.split("||")) if v), "")
    value = first(obj, path)
    return "" if value is None else go_text(value)


def table(kind: str, objs: list[dict], now: datetime, wide: bool) -> list[list[str]]:
    rows: list[list[str]] = []
    crd_columns = kinds.REGISTRY.printer_columns(objs[0]) if objs else None
    if crd_columns:  # the CRD's table: NAME and its columns; priority > 0 only with -o wide
        cols = [c for c in crd_columns if wide or c.priority == 0]  # one version per kind, as the API server serves
        rows.append(["NAME"] + [c.name.upper() for c in cols])
        for o in objs:
            rows.append([o["metadata"]["name"]] + [age(jsonpath(o, c.json_path) or None, now) if c.type == "date"
                                                   else jsonpath(o, c.json_path) for c in cols])
    elif kind == "Pod":
        wide_cols = ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"] if wide else []
        rows.append(["NAME", "READY", "STATUS", "RESTARTS", "AGE", *wide_cols])
        for p in objs:
            cs = (p.get("status") or {}).get("containerStatuses") or []
            n = len(p["spec"].get("containers") or [])
            ready = sum(1 for c in cs if c.get("ready"))
            row = [p["metadata"]["name"], f"{ready}/{n}", pod_status(p), pod_restarts(p, now), age(p["metadata"].get(
                "creationTimestamp"), now)]
            if wide:
                st = p.get("status") or {}
                gates = p["spec"].get("readinessGates") or []
                true = {c.get("type") for c in st.get("conditions") or [] if c.get("status") == "True"}
                ready_gates = f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}" if gates \
                    else "<none>"  # printPod: true readiness-gate conditions of those the pod lists
                row += [st.get("podIP", "<none>"), p["spec"].get("nodeName") or "<none>",
                        st.get("nominatedNodeName") or "<none>", ready_gates]
            rows.append(row)
    elif kind == "Node":
        # -o wide: kubectl's columns (printNode, kubernetes pkg/printers/internalversion/printers.go), then the
        # twin's INSTANCE-TYPE and GPUS after them. The twin's nodes carry no status.addresses and no OS, kernel or
        # runtime in status.nodeInfo (adding them would change every run folder's node objects), so those cells
        # read as kubectl prints a node without them: <none> for an address, <unknown> for the rest.
        rows.append(["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
                    + (["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME",
                        "INSTANCE-TYPE", "GPUS"] if wide else []))
        for n in objs:  # a plain v1 Node may have no status, nodeInfo or labels: kubectl prints what is there
            st = n.get("status") or {}
            ready = is_condition_true(st.get("conditions"), "Ready")
            # printNode: the Ready condition, then SchedulingDisabled for a cordoned node (spec.unschedulable)
            status = "Ready" if ready else "NotReady"
            if (n.get("spec") or {}).get("unschedulable"):
                status += ",SchedulingDisabled"
            row = [n["metadata"]["name"], status, "<none>",
                   age(n["metadata"].get("creationTimestamp"), now),
                   (st.get("nodeInfo") or {}).get("kubeletVersion") or ""]
            if wide:
                info = st.get("nodeInfo") or {}
                addresses = st.get("addresses") or []
                row += [next((a.get("address") for a in addresses if a.get("type") == t), None) or "<none>"
                        for t in ("InternalIP", "ExternalIP")]
                row += [info.get(k) or "<unknown>" for k in ("osImage", "kernelVersion", "containerRuntimeVersion")]
                row += [(n["metadata"].get("labels") or {}).get(INSTANCE_TYPE, ""),
                        (st.get("allocatable") or {}).get(GPU, "0")]
            rows.append(row)
    elif kind == "Job":
        rows.append(["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"])
        for j in objs:
            st = j.get("status") or {}
            status = next((t for t in ("Complete", "Failed", "Suspended")
                           if is_condition_true(st.get("conditions"), t)), "Running")
            # printJob (kubernetes pkg/printers/internalversion/printers.go): a work queue (no completions) is
            # "succeeded/1", with " of <parallelism>" when it runs more than one pod at a time
            par, comp = j["spec"].get("parallelism") or 0, j["spec"].get("completions")
            dur = "<none>"
            if st.get("startTime"):
                end = datetime.fromisoformat(st["completionTime"].replace("Z", "+00:00")) if st.get(
                    "completionTime") else now
                dur = format_duration((end - datetime.fromisoformat(st["startTime"].replace("Z", "+00:00")))
                                      .total_seconds())
            done = st.get("succeeded", 0)
            shown = f"{done}/{comp}" if comp is not None else f"{done}/1 of {par}" if par > 1 else f"{done}/1"
            rows.append([j["metadata"]["name"], status, shown, dur,
                         age(j["metadata"].get("creationTimestamp"), now)])
    elif kind == "Deployment":
        rows.append(["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"])
        for d in objs:
            want, st = d["spec"].get("replicas", 1), d.get("status") or {}
            rows.append([d["metadata"]["name"], f"{st.get('readyReplicas', 0)}/{want}",
                         str(st.get("updatedReplicas", 0)), str(st.get("availableReplicas", 0)),
                         age(d["metadata"].get("creationTimestamp"), now)])
    elif kind == "ReplicaSet":  # kubectl's printer (printReplicaSet)
        rows.append(["NAME", "DESIRED", "CURRENT", "READY", "AGE"] + (["CONTAINERS", "IMAGES", "SELECTOR"] if wide
                                                                       else []))
        for r in objs:
            spec, st = r.get("spec") or {}, r.get("status") or {}
            row = [r["metadata"]["name"], str(spec.get("replicas", 1)), str(st.get("replicas", 0)),
                   str(st.get("readyReplicas", 0)), age(r["metadata"].get("creationTimestamp"), now)]
            if wide:
                cs = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
                sel = (spec.get("selector") or {}).get("matchLabels") or {}
                row += [",".join(c["name"] for c in cs), ",".join(c.get("image", "") for c in cs),
                        ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"]
            rows.append(row)
    elif kind == "HorizontalPodAutoscaler":  # kubectl's printer (printHorizontalPodAutoscaler)
        rows.append(["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"])
        for h in objs:
            spec, st = h["spec"], h.get("status") or {}
            ref = spec.get("scaleTargetRef") or {}
            rows.append([h["metadata"]["name"], f"{ref.get('kind')}/{ref.get('name')}", hpa_targets(h),
                         str(spec.get("minReplicas", 1)), str(spec.get("maxReplicas")),
                         str(st.get("currentReplicas", 0)), age(h["metadata"].get("creationTimestamp"), now)])
    elif kind == "ResourceClaim":  # kubectl's printer: pending | allocated | allocated,reserved (+ deleted)
        rows.append(["NAME", "STATE", "AGE"])
        for c in objs:
            st = c.get("status") or {}
            state = [s for s, on in (("allocated", st.get("allocation")), ("reserved", st.get("reservedFor")),
                                     ("deleted", c["metadata"].get("deletionTimestamp"))) if on]
            rows.append([c["metadata"]["name"], ",".join(state) or "pending",
                         age(c["metadata"].get("creationTimestamp"), now)])
    elif kind == "ResourceSlice":
        rows.append(["NAME", "NODE", "DRIVER", "POOL", "AGE"])
        for sl in objs:
            spec = sl["spec"]
            rows.append([sl["metadata"]["name"], spec.get("nodeName") or "<none>", spec["driver"],
                         spec["pool"]["name"], age(sl["metadata"].get("creationTimestamp"), now)])
    elif kind == "PersistentVolumeClaim":  # kubectl's printPersistentVolumeClaim
        rows.append(["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS",
                     "AGE"] + (["VOLUMEMODE"] if wide else []))
        for c in objs:
            spec, st = c.get("spec") or {}, c.get("status") or {}
            bound = bool(spec.get("volumeName"))  # capacity and modes are shown once the claim names its volume
            row = [c["metadata"]["name"], "Terminating" if c["metadata"].get("deletionTimestamp") else
                   st.get("phase", ""), spec.get("volumeName") or "",
                   (st.get("capacity") or {}).get("storage", "") if bound else "",
                   access_modes(st.get("accessModes")) if bound else "", claim_class(c),
                   spec.get("volumeAttributesClassName") or "<unset>", age(c["metadata"].get("creationTimestamp"), now)]
            rows.append(row + ([spec.get("volumeMode") or "<unset>"] if wide else []))
    elif kind == "PersistentVolume":  # kubectl's printPersistentVolume
        rows.append(["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
                     "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"] + (["VOLUMEMODE"] if wide else []))
        for v in objs:
            spec, st = v.get("spec") or {}, v.get("status") or {}
            ref = spec.get("claimRef") or {}
            row = [v["metadata"]["name"], (spec.get("capacity") or {}).get("storage", ""),
                   access_modes(spec.get("accessModes")), spec.get("persistentVolumeReclaimPolicy", ""),
                   "Terminating" if v["metadata"].get("deletionTimestamp") else st.get("phase", ""),
                   f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else "",
                   spec.get("storageClassName") or "", spec.get("volumeAttributesClassName") or "<unset>",
                   st.get("reason", ""), age(v["metadata"].get("creationTimestamp"), now)]
            rows.append(row + ([spec.get("volumeMode") or "<unset>"] if wide else []))
    elif kind == "StorageClass":  # kubectl's printStorageClass
        rows.append(["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE"])
        for c in objs:
            default = (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
            rows.append([c["metadata"]["name"] + (" (default)" if default else ""), c.get("provisioner", ""),
                         c.get("reclaimPolicy") or "Delete", c.get("volumeBindingMode") or "Immediate",
                         str(bool(c.get("allowVolumeExpansion"))).lower(),
                         age(c["metadata"].get("creationTimestamp"), now)])
    elif kind == "Event":
        rows.append(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"])
        for e in objs:  # `kubetwin get` orders them by lastTimestamp unless --sort-by says otherwise
            io = e["involvedObject"]
            rows.append([age(e["lastTimestamp"], now), e["type"], e["reason"],
                         f"{io['kind'].lower()}/{io['name']}", e["message"]])
    else:
        rows.append(["NAME", "AGE"])
        rows += [[o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"), now)] for o in objs]
    return rows


def access_modes(modes: list[str] | None) -> str:
    """GetAccessModesAsString: RWO, ROX, RWX, RWOP in that order, comma-separated."""
    have = set(modes or ())
    return ",".join(short for mode, short in ACCESS_MODE_SHORT.items() if mode in have)


def hpa_targets(h: dict) -> str:
    """kubectl's TARGETS column: current/target per metric, "(avg)" for AverageValue, <unknown> before a reading."""
    out = []
    current = (h.get("status") or {}).get("currentMetrics") or []
    for i, m in enumerate(h["spec"].get("metrics") or []):
        kind = m.get("type", "")
        body = m.get(kind[:1].lower() + kind[1:]) or {}
        target = body.get("target") or {}
        cur = (current[i].get(kind[:1].lower() + kind[1:]) or {}).get("current") or {} if i < len(current) else {}
        if "averageValue" in target:
            out.append(f"{cur.get('averageValue', '<unknown>')}/{target['averageValue']} (avg)")
        elif "value" in target:
            out.append(f"{cur.get('value', '<unknown>')}/{target['value']}")
        elif "averageUtilization" in target:
            have = cur.get("averageUtilization")
            out.append(f"{'<unknown>' if have is None else f'{have}%'}/{target['averageUtilization']}%")
    return ", ".join(out) or "<none>"


