"""`kubetwin get` and `kubetwin describe` over a run folder, with kubectl's arguments, output and messages.

kubectl's behaviour followed here (kubernetes/kubectl@dee3483a pkg/cmd/get/get.go Run and printGeneric):
TYPE[,TYPE] [NAME...] or TYPE/NAME...; `all` is the "all" category's kinds the twin has; tables per kind, with the
names kind-prefixed (`pod/x`, `job.batch/y`) when several kinds are printed and a blank line between kinds;
"No resources found in NS namespace." on stderr when nothing printed; NotFound errors after what was found, exit 1;
with -o json|yaml|name|jsonpath|custom-columns one List of everything (one object when a single name was asked).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kubetwin.api import kinds
from kubetwin.api.errors import KubetwinError
from kubetwin.cli.output import (
    KubectlError,
    Output,
    RememberingTable,
    custom_columns,
    field_matches,
    field_selector,
    label_selector,
    name_of,
    parse_output,
    sort_objects,
    table_text,
)
from kubetwin.sim.gcpause import no_cyclic_gc

__all__ = ["ALL_CATEGORY", "GetOptions", "describe_objects", "get_objects"]

# The kinds of kubectl's "all" category that the twin has, in the order discovery lists them (core, apps,
# autoscaling, batch; kubectl get all on v1.34). ReplicationController and CronJob are not in the twin.
ALL_CATEGORY = ("pods", "services", "daemonsets.apps", "deployments.apps", "replicasets.apps", "statefulsets.apps",
                "horizontalpodautoscalers.autoscaling", "jobs.batch")


@dataclass
class GetOptions:
    """The flags of `kubetwin get` (kubectl's names)."""

    namespace: str = "default"
    all_namespaces: bool = False
    output: str | None = None
    selector: str | None = None
    field_selector: str | None = None
    sort_by: str | None = None
    no_headers: bool = False
    show_labels: bool = False
    at: str | None = None
    label_columns: list[str] = field(default_factory=list)  # -L: one column per label key
    watch: bool = False  # -w: the state at --at, then every change to the end of the run
    watch_only: bool = False  # --watch-only: only the changes
    output_watch_events: bool = False  # --output-watch-events: an EVENT column (ADDED / MODIFIED / DELETED)


@dataclass
class _Request:
    info: kinds.KindInfo
    names: list[str] = field(default_factory=list)  # empty: every object of the kind


def _resolve(resource: str) -> kinds.KindInfo:
    info = kinds.REGISTRY.resolve(resource)
    if info is None:
        raise KubectlError(f'the server doesn\'t have a resource type "{resource}"')
    return info


def _requests(args: list[str], cmd: str) -> tuple[list[_Request], bool]:
    """kubectl's ResourceTypeOrNameArgs: the kinds and names asked, and whether one object was named (the
    "single item implied" that prints it without a List around it)."""
    if not args:
        raise KubectlError(f'You must specify the type of resource to {cmd}. Use "kubetwin api-resources" for a '
                           "complete list of supported resources.\n\nerror: Required resource not specified.",
                           prefix="")
    if any("/" in a for a in args):
        reqs: list[_Request] = []
        for a in args:
            kind, sep, name = a.partition("/")
            if not sep or not kind or not name:
                raise KubectlError("there is no need to specify a resource type as a separate argument when passing "
                                   f"arguments in resource/name form (e.g. 'kubetwin {cmd} resource/<resource_name>' "
                                   f"instead of 'kubetwin {cmd} resource resource/<resource_name>'")
            info = _resolve(kind)
            if reqs and reqs[-1].info == info:
                reqs[-1].names.append(name)
            else:
                reqs.append(_Request(info, [name]))
        return reqs, len(args) == 1
    types = [t for t in args[0].split(",") if t]
    expanded = [t2 for t in types for t2 in (ALL_CATEGORY if t == "all" else (t,))]
    reqs = []
    for t in expanded:
        info = _resolve(t)
        if not any(r.info == info for r in reqs):
            reqs.append(_Request(info, list(args[1:])))
    return reqs, len(args) == 2 and len(types) == 1 and types[0] != "all"


def _not_found(info: kinds.KindInfo, name: str) -> str:
    """apierrors.NewNotFound's text as kubectl prints it: the resource's plural.group."""
    res = f"{info.plural}.{info.group}" if info.group else info.plural
    return f'Error from server (NotFound): {res} "{name}" not found'


def _now(meta: dict, t: float) -> datetime:
    return datetime.fromisoformat(meta["startTime"].replace("Z", "+00:00")) + timedelta(seconds=t)


def _labels_text(obj: dict) -> str:
    """labels.FormatLabels: k=v sorted by key, comma-separated; <none> without labels."""
    labels = obj["metadata"].get("labels") or {}
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels)) or "<none>"


def get_objects(run_dir: Path, args: list[str], opts: GetOptions, out: Callable[[str], None],
                err: Callable[[str], None]) -> int:
    """Print what `kubectl get ARGS` prints for the run's state; the exit code."""
    from kubetwin.cli.printers import table
    from kubetwin.k8s.labels import matches
    from kubetwin.report.rundir import state_at

    fmt = parse_output(opts.output)
    if opts.show_labels and not fmt.human:
        raise KubectlError(f"--show-labels option cannot be used with {fmt.format} printer")
    reqs, single = _requests(args, "get")
    if opts.all_namespaces and any(r.names for r in reqs):
        raise KubectlError("a resource cannot be retrieved by name across all namespaces")
    labels = label_selector(opts.selector) if opts.selector else None
    fields = {r.info.kind: field_selector(opts.field_selector, r.info, opts.selector or "")
              for r in reqs} if opts.field_selector else {}
    named = {r.info.kind: [f'"name":"{n}"'.encode() for n in r.names] for r in reqs} if all(r.names for r in reqs) \
        else None  # every request names its objects: only lines holding one of the names are parsed
    objs, t, meta = state_at(run_dir, opts.at, {r.info.kind for r in reqs}, named)
    now = _now(meta, t)
    errors: list[str] = []
    groups: list[tuple[kinds.KindInfo, list[dict]]] = []
    for r in reqs:
        ns = None if opts.all_namespaces or not r.info.namespaced else opts.namespace
        scope = "" if not r.info.namespaced else opts.namespace
        if r.names:
            found = []
            for n in r.names:
                o = objs.get((r.info.kind, scope, n))
                if o is None or not _same_kind(o, r.info):
                    errors.append(_not_found(r.info, n))
                else:
                    found.append(o)
        else:
            one_group = len(kinds.REGISTRY.by_kind(r.info.kind)) < 2
            keys = [key for key in objs if key[0] == r.info.kind and (ns is None or key[1] == ns)]
            if r.info.kind != "Event" or opts.sort_by:  # Events: sorted once below, by time, name, namespace
                keys.sort()
            found = [objs[key] for key in keys if one_group or _same_kind(objs[key], r.info)]
        if labels is not None or fields.get(r.info.kind):
            found = [o for o in found if (labels is None or matches(labels, o["metadata"].get("labels")))
                     and field_matches(o, fields.get(r.info.kind, []))]
        if opts.sort_by:
            found = sort_objects(found, opts.sort_by)
        elif r.info.kind == "Event":  # the twin's event table reads in time order, as `--sort-by .lastTimestamp`
            found.sort(key=lambda e: (e.get("lastTimestamp") or "", e["metadata"]["name"],
                                      e["metadata"].get("namespace") or ""))
        groups.append((r.info, found))

    if opts.watch or opts.watch_only:
        return _watch(run_dir, reqs, groups, opts, fmt, t, meta, labels, fields, errors, out, err)
    if not fmt.human:
        items = [o for _, found in groups for o in found]
        if single and errors:
            for e in errors:
                err(e)
            return 1
        _print_generic(fmt, items, single and len(items) == 1, opts.no_headers, out)
    else:
        with_kind = len([g for g in groups if g[1]]) > 1  # multipleGVKsRequested
        written = False
        for info, found in groups:
            if not found:
                continue
            rows = table(info.kind, found, now, fmt.format == "wide")
            rows = _decorate(rows, info, found, with_kind, opts)
            if written and not opts.no_headers:
                out("\n")
            if rows:
                out(table_text(rows) + "\n")
                written = True
        if not written and not errors:
            namespaced = not opts.all_namespaces and all(r.info.namespaced for r in reqs)
            err(f"No resources found in {opts.namespace} namespace." if namespaced else "No resources found")
    for e in errors:
        err(e)
    return 1 if errors else 0


def _same_kind(obj: dict, info: kinds.KindInfo) -> bool:
    """Two groups may define one kind name (InferencePool): keep the objects of the group asked for."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return group == info.group or len(kinds.REGISTRY.by_kind(info.kind)) < 2


def _decorate(rows: list[list[str]], info: kinds.KindInfo, objs: list[dict], with_kind: bool,
              opts: GetOptions) -> list[list[str]]:
    """The table printer's options: kind-prefixed names, NAMESPACE first with -A, LABELS last, no header row."""
    head, body = rows[0], [list(r) for r in rows[1:]]
    if with_kind and "NAME" in head:
        i = head.index("NAME")
        prefix = f"{info.kind.lower()}.{info.group}" if info.group else info.kind.lower()
        for r in body:
            r[i] = f"{prefix}/{r[i]}"
    if opts.all_namespaces and info.namespaced:
        head = ["NAMESPACE", *head]
        body = [[o["metadata"].get("namespace") or "", *r] for o, r in zip(objs, body, strict=True)]
    if opts.label_columns:  # formatLabelHeaders: the key's last path segment, upper-cased; "" without the label
        head = [*head, *(key.split("/")[-1].upper() for key in opts.label_columns)]
        body = [[*r, *((o["metadata"].get("labels") or {}).get(key, "") for key in opts.label_columns)]
                for o, r in zip(objs, body, strict=True)]
    if opts.show_labels:  # LABELS is always the last column
        head = [*head, "LABELS"]
        body = [[*r, _labels_text(o)] for o, r in zip(objs, body, strict=True)]
    return body if opts.no_headers else [head, *body]


_EVENT_TYPES = {"ADDED": "ADDED   ", "MODIFIED": "MODIFIED", "DELETED": "DELETED "}  # kubectl's formatEventType


def _watch(run_dir: Path, reqs: list[_Request], groups: list[tuple[kinds.KindInfo, list[dict]]], opts: GetOptions,
           fmt: Output, t: float, meta: dict, labels: Any, fields: dict[str, Any], errors: list[str],
           out: Callable[[str], None], err: Callable[[str], None]) -> int:
    """`kubectl get -w` over simulated time: the objects at --at as a table (not with --watch-only), then a row
    for every change after it, to the end of the run, each printed as it comes, aligned as kubectl's tab writer
    remembers its widths (RememberingTable); a deleted object's row is its last state. Other formats print each
    changed object whole."""
    from kubetwin.cli.printers import table
    from kubetwin.k8s.labels import matches
    from kubetwin.report.rundir import changes_after

    for e in errors:
        err(e)
    by_kind = {r.info.kind: r for r in reqs}
    with_kind = len(reqs) > 1
    event_col = opts.output_watch_events and fmt.human

    def rows_of(info: kinds.KindInfo, objs: list[dict], now: datetime, etype: str | None, header: bool
                ) -> list[list[str]]:
        rows = _decorate(table(info.kind, objs, now, fmt.format == "wide"), info, objs, with_kind,
                         replace(opts, no_headers=not header))
        if event_col:
            rows = [["EVENT", *r] if header and i == 0 else [_EVENT_TYPES.get(etype or "", etype or ""), *r]
                    for i, r in enumerate(rows)]
        return rows

    header_done = False
    tabwriter = RememberingTable()
    if not opts.watch_only:
        for info, found in groups:
            if not found:
                continue
            if fmt.human:
                rows = rows_of(info, found, _now(meta, t), "ADDED", not opts.no_headers and not header_done)
                out(tabwriter.text(rows) + "\n")
                header_done = True
            else:
                for o in found:
                    _print_generic(fmt, [o], True, True, out)
    for when, etype, obj in changes_after(run_dir, t, set(by_kind)):
        r = by_kind[obj["kind"]]
        scope = obj["metadata"].get("namespace") or ""
        if r.info.namespaced and not opts.all_namespaces and scope != opts.namespace:
            continue
        if r.names and obj["metadata"]["name"] not in r.names or not _same_kind(obj, r.info):
            continue
        if labels is not None and not matches(labels, obj["metadata"].get("labels")):
            continue
        if fields.get(r.info.kind) and not field_matches(obj, fields[r.info.kind]):
            continue
        if fmt.human:
            rows = rows_of(r.info, [obj], _now(meta, when), etype, not opts.no_headers and not header_done)
            out(tabwriter.text(rows) + "\n")
            header_done = True
        else:
            _print_generic(fmt, [obj], True, True, out)
    return 1 if errors else 0


def _print_generic(fmt: Output, items: list[dict], single: bool, no_headers: bool,
                   out: Callable[[str], None]) -> None:
    """printGeneric: one object when one was named, else a v1 List of everything found."""
    from kubetwin.cli.jsonpath import Template, go_json

    doc = items[0] if single else {"apiVersion": "v1", "items": items, "kind": "List",
                                   "metadata": {"resourceVersion": ""}}
    if fmt.format == "json":
        out(go_json(doc, indent=4) + "\n")
    elif fmt.format == "yaml":
        import yaml

        out(yaml.safe_dump(doc, sort_keys=True))
    elif fmt.format == "name":
        out("".join(name_of(o) + "\n" for o in items))
    elif fmt.format in ("jsonpath", "jsonpath-as-json"):
        out(Template(fmt.arg).render(doc, as_json=fmt.format == "jsonpath-as-json"))
    elif fmt.format == "custom-columns":
        out(custom_columns(fmt.arg, items, no_headers))


def _describe_needles(reqs: list[_Request]) -> dict[str, list[bytes]] | None:
    """What a line must hold to matter to `describe` when every request names its objects: the object's name (a
    prefix: describe TYPE PREFIX matches by prefix), its Events (involvedObject.name), and what is related to it
    (a Node's Pods by spec.nodeName, a PVC's Pods by claimName, a Deployment's ReplicaSets by owner name); None
    when a request names none (all of a kind)."""
    if not all(r.names for r in reqs):
        return None
    needles: dict[str, list[bytes]] = {"Event": [], "Pod": [], "ReplicaSet": []}
    related = {"Node": ("Pod", '"nodeName":"{}"'), "PersistentVolumeClaim": ("Pod", '"claimName":"{}"'),
               "Deployment": ("ReplicaSet", '"name":"{}"')}
    for r in reqs:
        for n in r.names:
            prefix = f'"name":"{n}'.encode()
            needles.setdefault(r.info.kind, []).append(prefix)
            needles["Event"].append(prefix)
            if r.info.kind in related:
                kind, field = related[r.info.kind]
                needles[kind].append(field.format(n).encode())
    return needles


def describe_objects(run_dir: Path, args: list[str], namespace: str, at: str | None, selector: str | None,
                     out: Callable[[str], None], err: Callable[[str], None]) -> int:
    """Print `kubectl describe ARGS`: each object's description, a blank line between them (describe.go)."""
    from kubetwin.cli.describe import describe
    from kubetwin.k8s.labels import matches
    from kubetwin.report.rundir import state_at

    reqs, _ = _requests(args, "describe")
    labels = label_selector(selector) if selector else None
    objs, t, meta = state_at(run_dir, at, {r.info.kind for r in reqs} | {"Event", "Pod", "ReplicaSet"},
                             _describe_needles(reqs))
    now = _now(meta, t)
    errors: list[str] = []
    found: list[dict] = []
    for r in reqs:
        scope = "" if not r.info.namespaced else namespace
        if r.names:
            for n in r.names:  # kubectl describe TYPE PREFIX also matches names that start with it
                o = objs.get((r.info.kind, scope, n))
                hits = [o] if o is not None else [v for (k, ns, name), v in sorted(objs.items())
                                                  if k == r.info.kind and ns == scope and name.startswith(n)]
                if not hits:
                    errors.append(_not_found(r.info, n))
                found += hits
        else:
            found += [o for (k, ns, _), o in sorted(objs.items()) if k == r.info.kind and ns == scope
                      and (labels is None or matches(labels, o["metadata"].get("labels")))]
    texts = []
    for o in found:
        kind, name = o["kind"], o["metadata"]["name"]
        ns = o["metadata"].get("namespace") or ""
        events = [e for (k, _, _), e in objs.items() if k == "Event" and e["involvedObject"]["kind"] == kind
                  and e["involvedObject"]["name"] == name and (e["involvedObject"].get("namespace") or "") == ns]
        related = []
        if kind == "Node":
            related = [p for (k, _, _), p in objs.items() if k == "Pod" and (p.get("spec") or {}).get("nodeName")
                       == name]
        elif kind == "PersistentVolumeClaim":  # getPodsForPVC: the namespace's pods whose volumes name it
            related = [p for (k, pns, _), p in objs.items() if k == "Pod" and pns == ns and any(
                (v.get("persistentVolumeClaim") or {}).get("claimName") == name
                for v in (p.get("spec") or {}).get("volumes") or ())]
        elif kind == "Deployment":
            related = [rs for (k, rns, _), rs in objs.items() if k == "ReplicaSet" and rns == ns and any(
                ref.get("kind") == "Deployment" and ref.get("name") == name
                for ref in rs["metadata"].get("ownerReferences") or [])]
        texts.append(describe(o, events, now, related).rstrip("\n") + "\n")
    out("\n\n".join(texts))
    if not found and not errors:
        err(f"No resources found in {namespace} namespace.")
    for e in errors:
        err(e)
    return 1 if errors else 0


def run(fn: Callable[..., int], *args: object) -> int:
    """Run a command body, printing kubectl's error lines; the exit code.

    The cyclic GC is paused while it runs: what it reads back are JSON trees (no cycles to find), and each
    collection rescans all of them (issue 32: `get events -A` at a 1,000,000-pod day's end holds 150,000 Events,
    and collections took a third of its time); once the body returns they are freed by their reference counts."""
    with no_cyclic_gc():
        return _run(fn, *args)


def _run(fn: Callable[..., int], *args: object) -> int:
    def out(text: str) -> None:
        sys.stdout.write(text)

    def err(line: str) -> None:
        sys.stdout.flush()
        sys.stderr.write(line + "\n")

    try:
        return fn(*args, out, err)
    except KubectlError as exc:
        err(exc.line)
        return 1
    except KubetwinError as exc:
        for d in exc.diagnostics:
            err(d.render())
        return 1
