"""kubectl-style tables and describe output over replayed objects."""

from __future__ import annotations

import re
from datetime import datetime

from kubetwin.api import kinds
from kubetwin.api.conditions import is_condition_true
from kubetwin.api.units import format_duration


def _age(ts: str | None, now: datetime) -> str:
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
    if phase == "Running":  # a container waiting to restart: kubectl shows its reason (CrashLoopBackOff)
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
    return f"{n} ({_age(last, now)} ago)" if n and last else str(n)


def _container_state(title: str, state: dict | None) -> list[str]:
    """kubectl describe's State / Last State block (pkg/describe describeContainerState)."""
    state = state or {}
    rfc1123z = "%a, %d %b %Y %H:%M:%S %z"

    def when(ts: str | None) -> str:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).strftime(rfc1123z) if ts else ""

    if "running" in state:
        return [f"    {title:<16}Running", f"      Started:      {when(state['running'].get('startedAt'))}"]
    if "waiting" in state:
        w = state["waiting"]
        return [f"    {title:<16}Waiting"] + ([f"      Reason:       {w['reason']}"] if w.get("reason") else [])
    if "terminated" in state:
        t = state["terminated"]
        out = [f"    {title:<16}Terminated", f"      Reason:       {t.get('reason', '')}"]
        if t.get("message"):
            out.append(f"      Message:      {t['message']}")
        return out + [f"      Exit Code:    {t.get('exitCode', 0)}", f"      Started:      {when(t.get('startedAt'))}",
                      f"      Finished:     {when(t.get('finishedAt'))}"]
    return [f"    {title:<16}Waiting"] if title == "State:" else []


_STEP = re.compile(r"\w+(?:\[[^\]]*\])?")  # .a, .a[?(@.k=="v")]: dots inside brackets do not split
_FILTER = re.compile(r'^(\w+)\[\?\(@\.(\w+)=="([^"]*)"\)\]$')


def jsonpath(obj: dict, path: str) -> str:
    """The JSONPath subset printer columns use: .a.b and .a[?(@.k=="v")].b; missing values print empty."""
    if "||" in path:  # one column over both served versions' field names
        return next((v for v in (jsonpath(obj, p.strip()) for p in path.split("||")) if v), "")
    cur: object = obj
    for part in _STEP.findall(path):
        m = _FILTER.match(part)
        if m:
            items = cur.get(m.group(1)) if isinstance(cur, dict) else None
            cur = next((i for i in items or [] if isinstance(i, dict) and str(i.get(m.group(2))) == m.group(3)),
                       None)
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return ""
    return str(cur).lower() if isinstance(cur, bool) else str(cur)


def table(kind: str, objs: list[dict], now: datetime, wide: bool) -> list[list[str]]:
    rows: list[list[str]] = []
    crd_columns = kinds.REGISTRY.printer_columns(objs[0]) if objs else None
    if crd_columns:  # the CRD's table: NAME and its columns; priority > 0 only with -o wide
        cols = [c for c in crd_columns if wide or c.priority == 0]  # one version per kind, as the API server serves
        rows.append(["NAME"] + [c.name.upper() for c in cols])
        for o in objs:
            rows.append([o["metadata"]["name"]] + [_age(jsonpath(o, c.json_path) or None, now) if c.type == "date"
                                                   else jsonpath(o, c.json_path) for c in cols])
    elif kind == "Pod":
        rows.append(["NAME", "READY", "STATUS", "RESTARTS", "AGE"] + (["IP", "NODE", "NOMINATED NODE"] if wide else []))
        for p in objs:
            cs = (p.get("status") or {}).get("containerStatuses") or []
            n = len(p["spec"].get("containers") or [])
            ready = sum(1 for c in cs if c.get("ready"))
            row = [p["metadata"]["name"], f"{ready}/{n}", pod_status(p), pod_restarts(p, now), _age(p["metadata"].get(
                "creationTimestamp"), now)]
            if wide:
                st = p.get("status") or {}
                row += [st.get("podIP", "<none>"), p["spec"].get("nodeName") or "<none>",
                        st.get("nominatedNodeName") or "<none>"]
            rows.append(row)
    elif kind == "Node":
        rows.append(["NAME", "STATUS", "ROLES", "AGE", "VERSION"] + (["INSTANCE-TYPE", "GPUS"] if wide else []))
        for n in objs:  # a plain v1 Node may have no status, nodeInfo or labels: kubectl prints what is there
            st = n.get("status") or {}
            ready = is_condition_true(st.get("conditions"), "Ready")
            row = [n["metadata"]["name"], "Ready" if ready else "NotReady", "<none>",
                   _age(n["metadata"].get("creationTimestamp"), now),
                   (st.get("nodeInfo") or {}).get("kubeletVersion") or ""]
            if wide:
                row += [(n["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type", ""),
                        (st.get("allocatable") or {}).get("nvidia.com/gpu", "0")]
            rows.append(row)
    elif kind == "Job":
        rows.append(["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"])
        for j in objs:
            st = j.get("status") or {}
            status = next((t for t in ("Complete", "Failed", "Suspended")
                           if is_condition_true(st.get("conditions"), t)), "Running")
            comp = j["spec"].get("completions", 1)
            dur = "<none>"
            if st.get("startTime"):
                end = datetime.fromisoformat(st["completionTime"].replace("Z", "+00:00")) if st.get(
                    "completionTime") else now
                dur = format_duration((end - datetime.fromisoformat(st["startTime"].replace("Z", "+00:00")))
                                      .total_seconds())
            rows.append([j["metadata"]["name"], status, f"{st.get('succeeded', 0)}/{comp}", dur,
                         _age(j["metadata"].get("creationTimestamp"), now)])
    elif kind == "Deployment":
        rows.append(["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"])
        for d in objs:
            want, st = d["spec"].get("replicas", 1), d.get("status") or {}
            rows.append([d["metadata"]["name"], f"{st.get('readyReplicas', 0)}/{want}",
                         str(st.get("updatedReplicas", 0)), str(st.get("availableReplicas", 0)),
                         _age(d["metadata"].get("creationTimestamp"), now)])
    elif kind == "HorizontalPodAutoscaler":  # kubectl's printer (printHorizontalPodAutoscaler)
        rows.append(["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"])
        for h in objs:
            spec, st = h["spec"], h.get("status") or {}
            ref = spec.get("scaleTargetRef") or {}
            rows.append([h["metadata"]["name"], f"{ref.get('kind')}/{ref.get('name')}", hpa_targets(h),
                         str(spec.get("minReplicas", 1)), str(spec.get("maxReplicas")),
                         str(st.get("currentReplicas", 0)), _age(h["metadata"].get("creationTimestamp"), now)])
    elif kind == "ResourceClaim":  # kubectl's printer: pending | allocated | allocated,reserved (+ deleted)
        rows.append(["NAME", "STATE", "AGE"])
        for c in objs:
            st = c.get("status") or {}
            state = [s for s, on in (("allocated", st.get("allocation")), ("reserved", st.get("reservedFor")),
                                     ("deleted", c["metadata"].get("deletionTimestamp"))) if on]
            rows.append([c["metadata"]["name"], ",".join(state) or "pending",
                         _age(c["metadata"].get("creationTimestamp"), now)])
    elif kind == "ResourceSlice":
        rows.append(["NAME", "NODE", "DRIVER", "POOL", "AGE"])
        for sl in objs:
            spec = sl["spec"]
            rows.append([sl["metadata"]["name"], spec.get("nodeName") or "<none>", spec["driver"],
                         spec["pool"]["name"], _age(sl["metadata"].get("creationTimestamp"), now)])
    elif kind == "Event":
        rows.append(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"])
        for e in sorted(objs, key=lambda e: (e["lastTimestamp"], e["metadata"]["name"])):
            io = e["involvedObject"]
            rows.append([_age(e["lastTimestamp"], now), e["type"], e["reason"],
                         f"{io['kind'].lower()}/{io['name']}", e["message"]])
    else:
        rows.append(["NAME", "AGE"])
        rows += [[o["metadata"]["name"], _age(o["metadata"].get("creationTimestamp"), now)] for o in objs]
    return rows


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


def render_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _toleration(t: dict) -> str:
    """kubectl describe's toleration line (pkg/describe printTolerationsMultilineWithIndent): key[=value][:effect],
    op=Exists when it matches any value, and `for Ns` with tolerationSeconds."""
    text = str(t.get("key") or "") + (f"={t['value']}" if t.get("value") else "") + (
        f":{t['effect']}" if t.get("effect") else "")
    if t.get("operator") == "Exists" and not t.get("value"):
        text += " op=Exists" if t.get("key") or t.get("effect") else "op=Exists"
    if t.get("tolerationSeconds") is not None:
        text += f" for {t['tolerationSeconds']}s"
    return text


def describe(obj: dict, events: list[dict], now: datetime, pods: list[dict] | None = None) -> str:
    """kubectl describe; for a Node, `pods` are the pods bound to it (for Non-terminated Pods and Allocated)."""
    meta = obj["metadata"]
    lines = [f"Name:         {meta['name']}"]
    if meta.get("namespace"):
        lines.append(f"Namespace:    {meta['namespace']}")
    if obj["kind"] == "Pod":
        spec, st = obj["spec"], obj.get("status") or {}
        lines += [f"Priority:     {spec.get('priority', 0)}", f"Node:         {spec.get('nodeName') or '<none>'}",
                  f"Labels:       {_kv(meta.get('labels'))}", f"Annotations:  {_kv(meta.get('annotations'))}",
                  f"Status:       {st.get('phase', 'Pending')}"]
        lines += [f"{label + ':':<14}{st[key]}" for key, label in (("reason", "Reason"), ("message", "Message"))
                  if st.get(key)]  # kubectl describe: the pod's status reason and message (e.g. a node shutdown)
        if st.get("nominatedNodeName"):
            lines.append(f"NominatedNodeName:  {st['nominatedNodeName']}")
        lines.append("Containers:")
        for c in spec.get("containers") or []:
            res = c.get("resources") or {}
            lines.append(f"  {c['name']}:")
            lines.append(f"    Image:      {c.get('image', '')}")
            cst = next((x for x in st.get("containerStatuses") or [] if x.get("name") == c["name"]), None)
            if cst is not None:  # kubectl describe: State, Last State, Ready, Restart Count before Limits
                lines += _container_state("State:", cst.get("state"))
                lines += _container_state("Last State:", cst.get("lastState"))
                lines.append(f"    Ready:          {'True' if cst.get('ready') else 'False'}")
                lines.append(f"    Restart Count:  {cst.get('restartCount', 0)}")
            for section in ("limits", "requests"):
                if res.get(section):
                    lines.append(f"    {section.capitalize()}:")
                    lines += [f"      {k}:  {v}" for k, v in res[section].items()]
        lines.append("Conditions:\n  Type              Status")
        lines += [f"  {c['type']:<17} {c['status']}" for c in st.get("conditions") or []]
        lines.append(f"Node-Selectors:  {_kv(spec.get('nodeSelector'))}")
        tols = [_toleration(t) for t in spec.get("tolerations") or []]
        lines.append("Tolerations:     " + ("\n                 ".join(tols) if tols else "<none>"))
    elif obj["kind"] == "Node":
        lines.append(f"Labels:       {_kv(obj['metadata'].get('labels'), sep=chr(10) + ' ' * 14)}")
        taints = [f"{t.get('key', '')}={t.get('value', '')}:{t.get('effect', '')}"
                  for t in (obj.get("spec") or {}).get("taints") or []]
        lines.append("Taints:       " + ("\n              ".join(taints) if taints else "<none>"))
        for section in ("capacity", "allocatable"):
            lines.append(f"{section.capitalize()}:")
            lines += [f"  {k}:  {v}" for k, v in sorted(((obj.get("status") or {}).get(section) or {}).items())]
        lines += node_resources(obj, pods or [], now)
    else:
        import yaml

        body = {k: v for k, v in obj.items() if k not in ("metadata",)}
        lines.append(yaml.safe_dump(body, sort_keys=False).rstrip())
    lines.append("Events:")
    if not events:
        lines[-1] += "  <none>"
    else:
        rows = [["Type", "Reason", "Age", "From", "Message"], ["----", "------", "----", "----", "-------"]]
        for e in sorted(events, key=lambda e: (e["firstTimestamp"], e["metadata"]["name"])):
            age = _age(e["lastTimestamp"], now)
            if e.get("count", 1) > 1:
                age = f"{age} (x{e['count']} over {_age(e['firstTimestamp'], now)})"
            rows.append([e["type"], e["reason"], age, e["source"]["component"], e["message"]])
        lines += ["  " + r for r in render_table(rows).splitlines()]
    return "\n".join(lines)


def node_resources(node: dict, pods: list[dict], now: datetime) -> list[str]:
    """kubectl describe node's Non-terminated Pods and Allocated resources, each pod counted with
    component-helpers' PodRequests/PodLimits (kubectl/pkg/describe/describe.go describeNodeResource and
    getPodsTotalRequestsAndLimits; percentages of allocatable, truncated)."""
    from kubetwin.api.podresources import pod_limits, pod_requests, resource_value
    from kubetwin.kueue.api import format_amount

    st = node.get("status") or {}
    alloc = {k: resource_value(k, v) for k, v in (st.get("allocatable") or st.get("capacity") or {}).items()}
    running = sorted((p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")),
                     key=lambda p: (p["metadata"].get("namespace") or "", p["metadata"]["name"]))

    def pct(name: str, amounts: dict[str, int]) -> str:
        v = amounts.get(name, 0)
        frac = int(v / alloc[name] * 100) if alloc.get(name) else 0
        return f"{format_amount(name, v)} ({frac}%)"

    lines = [f"Non-terminated Pods:          ({len(running)} in total)"]
    rows = [["Namespace", "Name", "CPU Requests", "CPU Limits", "Memory Requests", "Memory Limits", "Age"],
            ["---------", "----", "------------", "----------", "---------------", "-------------", "---"]]
    totals: tuple[dict[str, int], dict[str, int]] = ({}, {})
    for p in running:
        req, lim = pod_requests(p), pod_limits(p)
        for total, amounts in zip(totals, (req, lim), strict=True):
            for k, v in amounts.items():
                total[k] = total.get(k, 0) + v
        rows.append([p["metadata"].get("namespace") or "", p["metadata"]["name"], pct("cpu", req), pct("cpu", lim),
                     pct("memory", req), pct("memory", lim), _age(p["metadata"].get("creationTimestamp"), now)])
    lines += ["  " + r for r in render_table(rows).splitlines()]
    lines.append("Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)")
    rows = [["Resource", "Requests", "Limits"], ["--------", "--------", "------"]]
    rows += [[r, pct(r, totals[0]), pct(r, totals[1])] for r in ("cpu", "memory", "ephemeral-storage")]
    rows += [[r, pct(r, totals[0]), pct(r, totals[1])] for r in sorted(alloc) if r.startswith("hugepages-")]
    standard = ("cpu", "memory", "ephemeral-storage", "pods")  # IsStandardContainerResourceName, and pods
    extended = sorted(r for r in alloc if r not in standard and not r.startswith("hugepages-"))
    rows += [[r, format_amount(r, totals[0].get(r, 0)), format_amount(r, totals[1].get(r, 0))] for r in extended]
    lines += ["  " + r for r in render_table(rows).splitlines()]
    return lines


def _kv(d: dict | None, sep: str = ", ") -> str:
    return sep.join(f"{k}={v}" for k, v in (d or {}).items()) or "<none>"
