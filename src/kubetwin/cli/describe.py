"""kubectl describe over replayed objects, in the layouts of kubectl's describers (kubernetes/kubectl@dee3483a
pkg/describe/describe.go): describePod (the fields the twin has), describeNode, describeJob, describeDeployment,
and for every other kind, custom resources included (Workload, ResourceClaim, ClusterQueue, ...), the generic
describer: Name, Namespace, Labels, Annotations, then the object's fields as indented `Key:  value` lines, then
Events. Text is written with tabs and aligned by Go's tabwriter as kubectl's tabbedString does (minwidth 0,
padding 2)."""

from __future__ import annotations

import re
from datetime import datetime

from kubetwin.cli.output import tabwrite
from kubetwin.cli.printers import access_modes, age, claim_class

__all__ = ["describe", "describe_pod"]

RFC1123Z = "%a, %d %b %Y %H:%M:%S %z"
GO_ZERO_TIME = "Mon, 01 Jan 0001 00:00:00 +0000"  # time.Time{}.Format(time.RFC1123Z)


def _when(ts: str | None) -> str:
    if not ts:
        return GO_ZERO_TIME
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).strftime(RFC1123Z)


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


def describe_pod(obj: dict, events: list[dict], now: datetime) -> str:
    """kubectl describe pod (pkg/describe describePod's fields the twin has)."""
    meta = obj["metadata"]
    lines = [f"Name:         {meta['name']}"]
    if meta.get("namespace"):
        lines.append(f"Namespace:    {meta['namespace']}")
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
                lines.append(tabwrite("\n".join(f"      {k}:\t{v}" for k, v in res[section].items()), 0, 2))
    # describePod writes "%v \t%v \n" per condition: the cell keeps a space before the tab, and one after the status
    lines.append("Conditions:")
    lines.append(tabwrite("\n".join(["  Type\tStatus"] + [f"  {c['type']} \t{c['status']} "
                                                           for c in st.get("conditions") or []]), 0, 2))
    lines.append(f"Node-Selectors:  {_kv(spec.get('nodeSelector'))}")
    tols = [_toleration(t) for t in spec.get("tolerations") or []]
    lines.append("Tolerations:     " + ("\n                 ".join(tols) if tols else "<none>"))
    lines.append(tabwrite("\n".join(_events(events, now)), 0, 2))
    return "\n".join(lines)


def _events(events: list[dict], now: datetime) -> list[str]:
    """DescribeEvents: `Events:\t<none>`, or a Type/Reason/Age/From/Message table sorted by first timestamp."""
    if not events:
        return ["Events:\t<none>"]
    lines = ["Events:", "  Type\tReason\tAge\tFrom\tMessage", "  ----\t------\t----\t----\t-------"]
    for e in sorted(events, key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"])):
        since = age(e.get("firstTimestamp"), now)
        if int(e.get("count") or 1) > 1:
            since = f"{age(e.get('lastTimestamp'), now)} (x{e['count']} over {since})"
        source = (e.get("source") or {}).get("component") or e.get("reportingController") or ""
        message = str(e.get("message") or "").strip()
        path = (e.get("involvedObject") or {}).get("fieldPath")
        lines.append(f"  {e.get('type', '')}\t{e.get('reason', '')}\t{since}\t{source}\t"
                     f"{f'{path}: ' if path else ''}{message}")
    return lines


def _multiline(title: str, items: list[str]) -> list[str]:
    """printLabelsMultiline and friends: the first item after the title's tab, the others after a bare tab."""
    if not items:
        return [f"{title}:\t<none>"]
    return [f"{title}:\t{items[0]}"] + [f"\t{i}" for i in items[1:]]


def _labels(title: str, labels: dict | None) -> list[str]:
    return _multiline(title, [f"{k}={v}" for k, v in sorted((labels or {}).items())])


_MAX_ANNOTATION = 140  # describe.go maxAnnotationLen


def _annotations(title: str, annotations: dict | None) -> list[str]:
    """printAnnotationsMultiline: `key: value`, long or multi-line values below their key, shortened."""
    keys = sorted(annotations or {})
    if not keys:
        return [f"{title}:\t<none>"]
    lines: list[str] = []
    for i, k in enumerate(keys):
        lead = f"{title}:\t" if i == 0 else "\t"
        value = str(annotations[k]).removesuffix("\n")  # type: ignore[index]
        if len(value) + len(k) + 2 > _MAX_ANNOTATION or "\n" in value:
            lines.append(f"{lead}{k}:")
            for s in value.split("\n"):
                short = s[:_MAX_ANNOTATION - 2] + "..." if len(s) > _MAX_ANNOTATION - 2 else s
                lines.append(f"\t  {short}")
        else:
            lines.append(f"{lead}{k}: {value}")
    return lines


def _taints(taints: list[dict] | None) -> list[str]:
    """printNodeTaintsMultiline: key=value:effect sorted by effect then key."""
    ts = sorted(taints or [], key=lambda t: f"{t.get('effect', '')},{t.get('key', '')}")
    return _multiline("Taints", [f"{t.get('key', '')}" + (f"={t['value']}" if t.get("value") else "")
                                 + f":{t.get('effect', '')}" for t in ts])


def selector_string(sel: dict | None) -> str:
    """metav1.LabelSelectorAsSelector(sel).String(): k=v, k!=v, k in (a,b), k notin (a), k, !k; sorted by key."""
    if not sel:
        return "<none>" if sel is None else ""
    reqs: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], sorted(e.get("values") or [])
        text = {"In": f"{k} in ({','.join(vals)})", "NotIn": f"{k} notin ({','.join(vals)})", "Exists": k,
                "DoesNotExist": f"!{k}"}.get(op, k)
        reqs.append((k, text))
    return ",".join(t for _, t in sorted(reqs))


def _controller(obj: dict) -> str:
    ref = next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    return f"{ref['kind']}/{ref['name']}" if ref else ""


def _resources(res: dict | None, indent: str) -> list[str]:
    """describeResources: Limits then Requests, resource names sorted."""
    out: list[str] = []
    for section in ("limits", "requests"):
        amounts = (res or {}).get(section) or {}
        if amounts:
            out.append(f"{indent}{section.capitalize()}:")
            out += [f"{indent}  {k}:\t{amounts[k]}" for k in sorted(amounts)]
    return out


def _pod_template(template: dict | None) -> list[str]:
    """DescribePodTemplate for a Job's or Deployment's template (containers without status)."""
    lines = ["Pod Template:"]
    if not template:
        return lines + ["  <unset>"]
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    lines += _labels("  Labels", meta.get("labels"))
    if meta.get("annotations"):
        lines += _annotations("  Annotations", meta["annotations"])
    if spec.get("serviceAccountName"):
        lines.append(f"  Service Account:\t{spec['serviceAccountName']}")
    for label, key in (("Init Containers", "initContainers"), ("Containers", "containers")):
        containers = spec.get(key) or []
        if key == "initContainers" and not containers:
            continue
        lines.append(f"  {label}:" + ("" if containers else " <none>"))
        for c in containers:
            ports = ", ".join(f"{p.get('containerPort')}/{p.get('protocol', 'TCP')}" + (
                f" ({p['name']})" if p.get("name") else "") for p in c.get("ports") or [])
            host = ", ".join(f"{p.get('hostPort', 0)}/{p.get('protocol', 'TCP')}" + (
                f" ({p['name']})" if p.get("name") else "") for p in c.get("ports") or [])
            lines += [f"   {c['name']}:", f"    Image:\t{c.get('image', '')}",
                      f"    {'Ports' if ',' in ports else 'Port'}:\t{ports or '<none>'}",
                      f"    {'Host Ports' if ',' in host else 'Host Port'}:\t{host or '<none>'}"]
            for title, key2 in (("Command", "command"), ("Args", "args")):
                if c.get(key2):
                    lines.append(f"    {title}:")
                    lines += [f"      {s}" for arg in c[key2] for s in str(arg).split("\n")]
            lines += _resources(c.get("resources"), "    ")
            env = c.get("env") or []
            lines.append("    Environment:" + ("" if env else "\t<none>"))
            lines += [f"      {e['name']}:\t{e.get('value', '')}" for e in env]
            mounts = sorted(c.get("volumeMounts") or [], key=lambda m: m.get("mountPath", ""))
            lines.append("    Mounts:" + ("" if mounts else "\t<none>"))
            lines += [f"      {m.get('mountPath')} from {m.get('name')} ({'ro' if m.get('readOnly') else 'rw'})"
                      for m in mounts]
    volumes = spec.get("volumes") or []
    lines.append("  Volumes:" + ("" if volumes else "\t<none>"))
    lines += [f"   {v['name']}:" for v in volumes]
    if spec.get("priorityClassName"):
        lines.append(f"  Priority Class Name:\t{spec['priorityClassName']}")
    lines += _labels("  Node-Selectors", spec.get("nodeSelector"))
    tols = sorted(spec.get("tolerations") or [], key=lambda t: t.get("key") or "")
    lines += _multiline("  Tolerations", [_toleration(t) for t in tols])
    return lines


def describe_node(node: dict, events: list[dict], now: datetime, pods: list[dict]) -> list[str]:
    """describeNode: identity, Conditions, Addresses, Capacity/Allocatable, System Info, the pods on it."""
    meta, spec, st = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    roles = sorted({k.removeprefix("node-role.kubernetes.io/") for k in meta.get("labels") or {}
                    if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
                   | {v for k, v in (meta.get("labels") or {}).items() if k == "kubernetes.io/role" and v})
    lines = [f"Name:\t{meta['name']}", f"Roles:\t{','.join(roles) or '<none>'}"]
    lines += _labels("Labels", meta.get("labels")) + _annotations("Annotations", meta.get("annotations"))
    lines.append(f"CreationTimestamp:\t{_when(meta.get('creationTimestamp'))}")
    lines += _taints(spec.get("taints"))
    lines.append(f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}")
    if st.get("conditions"):
        lines += ["Conditions:", "  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage",
                  "  ----\t------\t-----------------\t------------------\t------\t-------"]
        lines += [f"  {c.get('type')} \t{c.get('status')} \t{_when(c.get('lastHeartbeatTime'))} \t"
                  f"{_when(c.get('lastTransitionTime'))} \t{c.get('reason', '')} \t{c.get('message', '')}"
                  for c in st["conditions"]]
    lines.append("Addresses:")
    lines += [f"  {a.get('type')}:\t{a.get('address')}" for a in st.get("addresses") or []]
    for title, key in (("Capacity", "capacity"), ("Allocatable", "allocatable")):
        if st.get(key):
            lines.append(f"{title}:")
            lines += [f"  {k}:\t{v}" for k, v in sorted(st[key].items())]
    info = st.get("nodeInfo") or {}
    lines.append("System Info:")
    lines += [f"  {title}:\t{info.get(key, '')}" for title, key in (
        ("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
        ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"), ("Operating System", "operatingSystem"),
        ("Architecture", "architecture"), ("Container Runtime Version", "containerRuntimeVersion"),
        ("Kubelet Version", "kubeletVersion"))]
    if spec.get("podCIDR"):
        lines.append(f"PodCIDR:\t{spec['podCIDR']}")
    if spec.get("podCIDRs"):
        lines.append(f"PodCIDRs:\t{','.join(spec['podCIDRs'])}")
    if spec.get("providerID"):
        lines.append(f"ProviderID:\t{spec['providerID']}")
    return lines + node_resources(node, pods, now) + _events(events, now)


def node_resources(node: dict, pods: list[dict], now: datetime) -> list[str]:
    """describeNodeResource: Non-terminated Pods and Allocated resources, each pod counted with component-helpers'
    PodRequests/PodLimits (getPodsTotalRequestsAndLimits); percentages of allocatable, truncated."""
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

    lines = [f"Non-terminated Pods:\t({len(running)} in total)",
             "  Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge",
             "  ---------\t----\t\t------------\t----------\t---------------\t-------------\t---"]
    totals: tuple[dict[str, int], dict[str, int]] = ({}, {})
    for p in running:
        req, lim = pod_requests(p), pod_limits(p)
        for total, amounts in zip(totals, (req, lim), strict=True):
            for k, v in amounts.items():
                total[k] = total.get(k, 0) + v
        lines.append(f"  {p['metadata'].get('namespace') or ''}\t{p['metadata']['name']}\t\t{pct('cpu', req)}\t"
                     f"{pct('cpu', lim)}\t{pct('memory', req)}\t{pct('memory', lim)}\t"
                     f"{age(p['metadata'].get('creationTimestamp'), now)}")
    lines += ["Allocated resources:", "  (Total limits may be over 100 percent, i.e., overcommitted.)",
              "  Resource\tRequests\tLimits", "  --------\t--------\t------"]
    lines += [f"  {r}\t{pct(r, totals[0])}\t{pct(r, totals[1])}" for r in ("cpu", "memory", "ephemeral-storage")]
    lines += [f"  {r}\t{pct(r, totals[0])}\t{pct(r, totals[1])}" for r in sorted(alloc) if r.startswith("hugepages-")]
    standard = ("cpu", "memory", "ephemeral-storage", "pods")  # IsStandardContainerResourceName, and pods
    lines += [f"  {r}\t{format_amount(r, totals[0].get(r, 0))}\t{format_amount(r, totals[1].get(r, 0))}"
              for r in sorted(alloc) if r not in standard and not r.startswith("hugepages-")]
    return lines


def describe_job(job: dict, events: list[dict], now: datetime) -> list[str]:
    """describeJob."""
    meta, spec, st = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    lines = [f"Name:\t{meta['name']}", f"Namespace:\t{meta.get('namespace', '')}",
             f"Selector:\t{selector_string(spec.get('selector')) if spec.get('selector') else ''}"]
    lines += _labels("Labels", meta.get("labels")) + _annotations("Annotations", meta.get("annotations"))
    if _controller(job):
        lines.append(f"Controlled By:\t{_controller(job)}")
    if spec.get("parallelism") is not None:
        lines.append(f"Parallelism:\t{spec['parallelism']}")
    lines.append(f"Completions:\t{spec['completions'] if spec.get('completions') is not None else '<unset>'}")
    if spec.get("completionMode"):
        lines.append(f"Completion Mode:\t{spec['completionMode']}")
    if spec.get("suspend") is not None:
        lines.append(f"Suspend:\t{'true' if spec['suspend'] else 'false'}")
    if spec.get("backoffLimit") is not None:
        lines.append(f"Backoff Limit:\t{spec['backoffLimit']}")
    if spec.get("ttlSecondsAfterFinished") is not None:
        lines.append(f"TTL Seconds After Finished:\t{spec['ttlSecondsAfterFinished']}")
    if st.get("startTime"):
        lines.append(f"Start Time:\t{_when(st['startTime'])}")
    if st.get("completionTime"):
        lines.append(f"Completed At:\t{_when(st['completionTime'])}")
    if st.get("startTime") and st.get("completionTime"):
        from kubetwin.k8s.units import format_duration

        took = (datetime.fromisoformat(st["completionTime"].replace("Z", "+00:00"))
                - datetime.fromisoformat(st["startTime"].replace("Z", "+00:00"))).total_seconds()
        lines.append(f"Duration:\t{format_duration(took)}")
    if spec.get("activeDeadlineSeconds") is not None:
        lines.append(f"Active Deadline Seconds:\t{spec['activeDeadlineSeconds']}s")
    counts = f"{st.get('active', 0)} Active" + (f" ({st['ready']} Ready)" if st.get("ready") is not None else "")
    lines.append(f"Pods Statuses:\t{counts} / {st.get('succeeded', 0)} Succeeded / {st.get('failed', 0)} Failed")
    if spec.get("completionMode") == "Indexed":
        lines.append(f"Completed Indexes:\t{st.get('completedIndexes') or '<none>'}")
    return lines + _pod_template(spec.get("template")) + _events(events, now)


def describe_deployment(d: dict, events: list[dict], now: datetime, replica_sets: list[dict]) -> list[str]:
    """describeDeployment; `replica_sets` are those the Deployment controls (the newest is the NewReplicaSet)."""
    meta, spec, st = d["metadata"], d.get("spec") or {}, d.get("status") or {}
    strategy = spec.get("strategy") or {}
    lines = [f"Name:\t{meta['name']}", f"Namespace:\t{meta.get('namespace', '')}",
             f"CreationTimestamp:\t{_when(meta.get('creationTimestamp'))}"]
    lines += _labels("Labels", meta.get("labels")) + _annotations("Annotations", meta.get("annotations"))
    lines.append(f"Selector:\t{selector_string(spec.get('selector'))}")
    lines.append(f"Replicas:\t{spec.get('replicas', 1)} desired | {st.get('updatedReplicas', 0)} updated | "
                 f"{st.get('replicas', 0)} total | {st.get('availableReplicas', 0)} available | "
                 f"{st.get('unavailableReplicas', 0)} unavailable")
    kind = strategy.get("type", "RollingUpdate")  # the API server's defaults (apps/v1 SetDefaults_Deployment)
    lines += [f"StrategyType:\t{kind}", f"MinReadySeconds:\t{spec.get('minReadySeconds', 0)}"]
    if kind == "RollingUpdate":
        ru = strategy.get("rollingUpdate") or {}
        lines.append(f"RollingUpdateStrategy:\t{ru.get('maxUnavailable', '25%')} max unavailable, "
                     f"{ru.get('maxSurge', '25%')} max surge")
    lines += _pod_template(spec.get("template"))
    if st.get("conditions"):
        lines += ["Conditions:", "  Type\tStatus\tReason", "  ----\t------\t------"]
        lines += [f"  {c.get('type')} \t{c.get('status')}\t{c.get('reason', '')}" for c in st["conditions"]]
    if replica_sets:
        rs = sorted(replica_sets, key=lambda r: (r["metadata"].get("creationTimestamp") or "", r["metadata"]["name"]))

        def show(items: list[dict]) -> str:
            return ", ".join(f"{r['metadata']['name']} ({(r.get('status') or {}).get('replicas', 0)}/"
                             f"{(r.get('spec') or {}).get('replicas', 1)} replicas created)" for r in items) or "<none>"

        lines += [f"OldReplicaSets:\t{show(rs[:-1])}", f"NewReplicaSet:\t{show(rs[-1:])}"]
    return lines + _events(events, now)


def smart_label(field: str) -> str:
    """smartLabelFor: a camelCase field name as Title Case words, API/URL/UID/GUID upper-cased; names with other
    characters than letters and '-' unchanged."""
    if any(not (c.isalpha() or c == "-") for c in field):
        return field
    parts = re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z]*|[a-z]+|-", field)
    words = []
    for p in parts:
        if p.upper() in ("API", "URL", "UID", "GUID"):
            words.append(p.upper())
        elif p.lower() == p:
            words.append(p[:1].upper() + p[1:])
        else:
            words.append(p)
    return " ".join(words)


_GENERIC_SKIP = {".metadata.managedFields", ".metadata.name", ".metadata.namespace", ".metadata.labels",
                 ".metadata.annotations"}


def _content(content: dict, level: int, prefix: str) -> list[str]:
    """printUnstructuredContent: fields sorted, maps and lists nested one level (two spaces) deeper."""
    from kubetwin.cli.jsonpath import go_sprint

    pad = "  " * level
    lines: list[str] = []
    for key in sorted(content):
        value, path = content[key], f"{prefix}.{key}"
        if path in _GENERIC_SKIP:
            continue
        if isinstance(value, dict):
            lines.append(f"{pad}{smart_label(key)}:")
            lines += _content(value, level + 1, path)
        elif isinstance(value, list):
            lines.append(f"{pad}{smart_label(key)}:")
            for item in value:
                if isinstance(item, dict):
                    lines += _content(item, level + 1, path)
                else:
                    lines.append(f"{pad}  {go_sprint(item)}")
        else:
            lines.append(f"{pad}{smart_label(key)}:\t{go_sprint(value)}")
    return lines


def describe_pvc(pvc: dict, events: list[dict], now: datetime, pods: list[dict]) -> list[str]:
    """describePersistentVolumeClaim; `pods` are the pods of its namespace whose volumes name it (Used By)."""
    meta, spec, st = pvc["metadata"], pvc.get("spec") or {}, pvc.get("status") or {}
    status = st.get("phase", "")
    if meta.get("deletionTimestamp"):  # "Terminating (lasts 5m)"
        status = f"Terminating (lasts {age(meta['deletionTimestamp'], now)})"
    lines = [f"Name:\t{meta['name']}", f"Namespace:\t{meta.get('namespace', '')}",
             f"StorageClass:\t{claim_class(pvc)}", f"Status:\t{status}", f"Volume:\t{spec.get('volumeName') or ''}"]
    lines += _labels("Labels", meta.get("labels")) + _annotations("Annotations", meta.get("annotations"))
    lines.append(f"Finalizers:\t[{' '.join(meta.get('finalizers') or [])}]")
    bound = bool(spec.get("volumeName"))
    lines.append(f"Capacity:\t{(st.get('capacity') or {}).get('storage', '') if bound else ''}")
    lines.append(f"Access Modes:\t{access_modes(st.get('accessModes')) if bound else ''}")
    if spec.get("volumeMode"):
        lines.append(f"VolumeMode:\t{spec['volumeMode']}")
    source = spec.get("dataSourceRef") or spec.get("dataSource")
    if source:
        lines += ["DataSource:", f"  APIGroup:\t{source.get('apiGroup') or ''}" if source.get("apiGroup") else "",
                  f"  Kind:\t{source.get('kind', '')}", f"  Name:\t{source.get('name', '')}"]
        lines = [line for line in lines if line]
    lines += _multiline("Used By", [p["metadata"]["name"] for p in sorted(pods, key=lambda p: p["metadata"]["name"])])
    return lines + _events(events, now)


def describe_generic(obj: dict, events: list[dict], now: datetime) -> list[str]:
    """genericDescriber (what kubectl prints for custom resources and kinds without a describer)."""
    meta = obj["metadata"]
    lines = [f"Name:\t{meta['name']}", f"Namespace:\t{meta.get('namespace', '')}"]
    lines += _labels("Labels", meta.get("labels")) + _annotations("Annotations", meta.get("annotations"))
    return lines + _content(obj, 0, "") + _events(events, now)


def describe(obj: dict, events: list[dict], now: datetime, related: list[dict] | None = None) -> str:
    """kubectl describe of one object; `related` are a Node's pods, a Deployment's ReplicaSets or the pods that use
    a PersistentVolumeClaim."""
    kind = obj.get("kind")
    if kind == "Pod":
        return describe_pod(obj, events, now)
    if kind == "Node":
        lines = describe_node(obj, events, now, related or [])
    elif kind == "Job":
        lines = describe_job(obj, events, now)
    elif kind == "Deployment":
        lines = describe_deployment(obj, events, now, related or [])
    elif kind == "PersistentVolumeClaim":
        lines = describe_pvc(obj, events, now, related or [])
    else:
        lines = describe_generic(obj, events, now)
    return tabwrite("\n".join(lines), 0, 2)


def _kv(d: dict | None, sep: str = ", ") -> str:
    return sep.join(f"{k}={v}" for k, v in (d or {}).items()) or "<none>"
