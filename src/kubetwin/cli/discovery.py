"""`kubetwin version` and `kubetwin api-resources`: what the twin is and which API it serves, as kubectl prints
its own `version` and `api-resources` (kubernetes/kubectl@dee3483a pkg/cmd/version, pkg/cmd/apiresources:
columns NAME SHORTNAMES APIVERSION NAMESPACED KIND [VERBS CATEGORIES], sorted by group then name, `-o name` as
resource.group)."""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.api import kinds
from kubetwin.cli.output import KubectlError, parse_output, table_text

__all__ = ["UPSTREAM", "api_resources", "version"]

# The upstream projects whose behaviour and API the twin models, and the version or snapshot each comes from
# (api/crds/README.md for the CRDs; validation/validate.py K8S_VERSION for the built-in schemas).
# (key in -o json, name printed, version: the release or main@commit of the snapshot, with its API versions)
UPSTREAM: tuple[tuple[str, str, str], ...] = (
    ("kueue", "Kueue", "main@ff69552e (kueue.x-k8s.io/v1beta2)"),  # kubernetes-sigs/kueue
    ("jobset", "JobSet", "main@08dfbdfd (jobset.x-k8s.io/v1alpha2)"),  # kubernetes-sigs/jobset
    ("clusterAutoscaler", "Cluster Autoscaler", "main@55c37cd5 (autoscaling.x-k8s.io/v1)"),  # kubernetes/autoscaler
    ("gatewayAPIInferenceExtension", "Gateway API Inference Extension",  # kubernetes-sigs/gateway-api-inference-ext.
     "v1.6.0 (inference.networking.k8s.io/v1), v0.5.x (inference.networking.x-k8s.io/v1alpha2)"),
    ("keda", "KEDA", "charts@1b607d94 (keda.sh/v1alpha1)"),  # kedacore/charts
)

# Verbs discovery lists for a resource the API server stores (kubectl api-resources -o wide on v1.34; Events have
# the same). The run folder is read-only, but these are the verbs the modelled API serves.
_VERBS = "create,delete,deletecollection,get,list,patch,update,watch"
_ALL = {("", "Pod"), ("", "Service"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
        ("apps", "DaemonSet"), ("batch", "Job"), ("autoscaling", "HorizontalPodAutoscaler")}  # category "all"


def _versions() -> dict[str, object]:
    import kubetwin
    from kubetwin.autoscaler.nodepool import NODE_VERSION
    from kubetwin.validation.validate import K8S_VERSION

    return {"kubetwinVersion": kubetwin.__version__,
            "kubernetesVersion": {"gitVersion": f"v{K8S_VERSION}", "kubeletVersion": NODE_VERSION},
            "upstream": {key: v for key, _, v in UPSTREAM}}


def version(output: str | None, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    """`kubetwin version [-o json|yaml]`: kubetwin's version and the Kubernetes, Kueue, ... versions it models."""
    fmt = parse_output(output, ("json", "yaml"))
    doc = _versions()
    if fmt.format == "json":
        from kubetwin.cli.jsonpath import go_json

        out(go_json(doc, indent=2) + "\n")
        return 0
    if fmt.format == "yaml":
        import yaml

        out(yaml.safe_dump(doc, sort_keys=True))
        return 0
    k8s = doc["kubernetesVersion"]
    assert isinstance(k8s, dict)
    lines = [f"kubetwin Version: {doc['kubetwinVersion']}",
             f"Kubernetes Version: {k8s['gitVersion']} (nodes report kubelet {k8s['kubeletVersion']})"]
    lines += [f"{name} Version: {v}" for _, name, v in UPSTREAM]
    out("\n".join(lines) + "\n")
    return 0


def _resources() -> list[kinds.KindInfo]:
    return sorted(kinds.REGISTRY, key=lambda i: (i.group, i.plural))


def api_resources(output: str | None, namespaced: str | None, api_group: str | None, sort_by: str | None,
                  no_headers: bool, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    """`kubetwin api-resources`: every kind in api/kinds.py's registry as discovery would list it."""
    fmt = parse_output(output, ("json", "yaml", "name", "wide"))
    if namespaced not in (None, "true", "false"):
        raise KubectlError(f'invalid argument "{namespaced}" for "--namespaced" flag: strconv.ParseBool: parsing '
                           f'"{namespaced}": invalid syntax')
    if sort_by not in (None, "", "name", "kind"):
        raise KubectlError("--sort-by accepts only name or kind")
    infos = [i for i in _resources() if (namespaced is None or i.namespaced == (namespaced == "true"))
             and (api_group is None or i.group == api_group)]
    if sort_by:
        infos.sort(key=lambda i: (i.plural if sort_by == "name" else i.kind, i.plural))

    def gv(i: kinds.KindInfo) -> str:
        return f"{i.group}/{i.versions[0]}" if i.group else i.versions[0]

    def categories(i: kinds.KindInfo) -> str:
        return "all" if (i.group, i.kind) in _ALL else ""

    if fmt.format == "name":
        out("".join(f"{i.plural}.{i.group}\n" if i.group else f"{i.plural}\n" for i in infos))
        return 0
    if fmt.format in ("json", "yaml"):
        doc = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "", "resources": [
            {"name": i.plural, "singularName": i.singular, "namespaced": i.namespaced, "group": i.group,
             "version": i.versions[0], "kind": i.kind, "verbs": _VERBS.split(","),
             **({"shortNames": list(i.short_names)} if i.short_names else {}),
             **({"categories": [categories(i)]} if categories(i) else {})} for i in infos]}
        if fmt.format == "json":
            from kubetwin.cli.jsonpath import go_json

            out(go_json(doc, indent=4) + "\n")
        else:
            import yaml

            out(yaml.safe_dump(doc, sort_keys=True))
        return 0
    wide = fmt.format == "wide"
    head = ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"] + (["VERBS", "CATEGORIES"] if wide else [])
    rows = [] if no_headers else [head]
    for i in infos:
        row = [i.plural, ",".join(i.short_names), gv(i), "true" if i.namespaced else "false", i.kind]
        rows.append(row + ([_VERBS, categories(i)] if wide else []))
    out(table_text(rows) + "\n" if rows else "")
    return 0
