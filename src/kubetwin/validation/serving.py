"""Serving objects checked beyond their schemas: what KEDA and the HPA's API validation reject, queries over metrics
nobody exports, model-server command lines as vLLM's, TGI's or tritonserver's argument parser reads them, and a
Triton server's model repository (config.pbtxt, model.json) read from the ConfigMaps it mounts."""

from __future__ import annotations

from collections.abc import Collection

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.k8s.names import GKE_GPU_PARTITION_SIZE, GPU


def _path_to_dotted(path: str) -> str:
    return path.replace("[", ".").replace("]", "")


def scaled_object(m: Manifest) -> list[Diagnostic]:
    from kubetwin.autoscaler import keda

    return [Diagnostic(m.file, m.line_of(_path_to_dotted(path)), m.ref, path, msg,
                       "see https://keda.sh/docs/latest/reference/scaledobject-spec/ and the scaler's page")
            for path, msg in keda.scaled_object_errors(m.obj)]


def trigger_queries(manifests: list[Manifest]) -> list[Diagnostic]:
    """Every ScaledObject's prometheus queries: PromQL that does not parse, and metrics nobody exports -- the
    model servers' and the gateway's, the GPU pods' DCGM_FI_* (GKE's managed DCGM collection, workloads.dcgm),
    and the names the scenario's monitoring objects' relabelling creates (validation.monitoring.renamed)."""
    from kubetwin.validation.monitoring import renamed
    from kubetwin.workloads.dcgm import FIELDS

    extra: set[str] | None = None
    out = []
    for m in manifests:
        if m.kind != "ScaledObject" or not isinstance(m.obj.get("spec"), dict):
            continue
        for i, trig in enumerate(m.obj["spec"].get("triggers") or []):
            meta = trig.get("metadata") if isinstance(trig, dict) else None
            query = str(meta.get("query") or "") if isinstance(meta, dict) else ""
            if isinstance(trig, dict) and trig.get("type") == "prometheus" and query:
                extra = renamed(manifests) | set(FIELDS) if extra is None else extra  # GPU pods' DCGM series
                out += unknown_metrics(m, f"spec.triggers[{i}].metadata.query", query, extra)
    return out


def unknown_metrics(m: Manifest, path: str, query: str, also: Collection[str] = ()) -> list[Diagnostic]:
    """A query over a metric no model server or gateway exports (nor a monitoring object's relabelling, `also`)
    returns nothing; KEDA reads that as 0 (ignoreNullValues defaults to true) and the target never scales."""
    from kubetwin.serving.observe.promsource import KNOWN

    try:
        names = metric_names(query, strict=True) or set()
    except ValueError as err:
        return [Diagnostic(m.file, m.line_of(_path_to_dotted(path)), m.ref, path, f"invalid PromQL: {err}",
                           "fix the query; it is parsed as Prometheus parses it")]
    out = []
    for name in sorted(names):
        if name and name not in KNOWN and name not in also and not name.startswith("kube_"):
            guess = next((k for k in KNOWN if k.replace(":", "_") == name), None)
            hint = (f"vLLM exports {guess} (with a colon); use sum({guess})" if guess else
                    f"the twin's model servers and gateway export: {', '.join(sorted(KNOWN))}")
            out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(path)), m.ref, path,
                                  f"metric {name!r} is not exported by any model server or the gateway: the query "
                                  "returns no series, KEDA reads it as 0 and the target never scales on it", hint,
                                  "notice"))
    return out


def metric_names(query: str, strict: bool = False) -> set[str] | None:
    """The metric names a PromQL query selects (parsed by promql-parser); None when it does not parse (ValueError
    with the parser's message when strict)."""
    import promql_parser as pp

    try:
        expr = pp.parse(query)
    except Exception as err:  # promql-parser raises plain exceptions with the parser's message
        if strict:
            raise ValueError(str(err)) from None
        return None
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, pp.VectorSelector):
            names.add(node.name or "")
            return
        for attr in ("expr", "lhs", "rhs", "param", "vector_selector"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for child in getattr(node, "args", None) or []:
            walk(child)

    walk(expr)
    return names


def horizontal_pod_autoscaler(m: Manifest) -> list[Diagnostic]:
    from kubetwin.autoscaler import hpa

    out = [Diagnostic(m.file, m.line_of(_path_to_dotted(path)), m.ref, path, msg, "")
           for path, msg in hpa.hpa_field_errors(m.obj)]
    return out or _resource_metric_notice(m)


def _resource_metric_notice(m: Manifest) -> list[Diagnostic]:
    """An autoscaling/v2 HPA scaling on cpu or memory — written, or the API server's default when `metrics` is empty
    (SetDefaults_HorizontalPodAutoscaler: CPU at 80 % utilization, api/defaults.py) — reads the resource metrics
    API, which GKE serves from metrics-server; the twin runs none, so such a metric reports FailedGetResourceMetric
    and the HPA does not scale on it."""
    from kubetwin.api import defaults

    if str(m.obj.get("apiVersion")) != "autoscaling/v2":
        return []
    spec = defaults.apply(m.obj).get("spec") or {}
    kinds_used = sorted({str(x.get("type")) for x in spec.get("metrics") or []
                         if isinstance(x, dict) and x.get("type") in ("Resource", "ContainerResource")})
    if not kinds_used:
        return []
    field = "spec.metrics" if (m.obj.get("spec") or {}).get("metrics") else "spec"
    said = "its default metric (no spec.metrics: CPU at 80 % utilization, as the API server defaults it)" \
        if field == "spec" else f"its {' and '.join(kinds_used)} metrics"
    return [Diagnostic(m.file, m.line_of(field), m.ref, field, f"the twin runs no metrics-server (GKE runs one): "
                       f"{said} report FailedGetResourceMetric and the HPA does not scale on them",
                       "scale on a Pods, Object or External metric the twin serves (vLLM's series through the custom "
                       "metrics API, or KEDA)", "notice")]


def server_templates(obj: dict) -> list[kinds.PodTemplateRef]:
    """The pod templates whose pods a model server would run in (a PodTemplate's pods are not created from it)."""
    return [] if obj.get("kind") == "PodTemplate" else kinds.pod_templates(obj)


def model_servers(m: Manifest) -> list[Diagnostic]:
    """A vLLM or TGI container's command line as the server's argument parser reads it, and its model checked
    against the twin's model table (a model the twin cannot size serves no requests in a run)."""
    from kubetwin.serving.modelserver.modelspec import closest_models, lookup_server_model
    from kubetwin.serving.modelserver.recognize import inspect_model_server

    out: list[Diagnostic] = []
    for ref in server_templates(m.obj):
        path, spec = ref.at("spec"), ref.spec
        found = inspect_model_server(spec, path)
        if found is None:
            continue
        ci, args, problems = found
        out += [Diagnostic(m.file, m.line_of(_path_to_dotted(p.field)), m.ref, p.field, p.message, p.hint,
                           p.severity) for p in problems]
        model = lookup_server_model(args.model, args.served_model_name) if args is not None else None
        if args is not None and model is not None:
            from kubetwin.serving.modelserver.recognize import gpu_count
            from kubetwin.serving.modelserver.sizing import parallel_problems

            ctr = spec["containers"][ci]
            if not (ctr.get("resources") or {}).get("limits", {}).get(GPU) and not (
                    ctr.get("resources") or {}).get("requests", {}).get(GPU) and (
                    ctr.get("resources") or {}).get("claims"):
                continue  # GPUs given through DRA ResourceClaims: the run checks the allocated devices at start
            visible = gpu_count(ctr)
            from kubetwin.serving.modelserver.sizing import allows_long_max_model_len, context_length_error

            env = {str(e.get("name")): str(e.get("value", "")) for e in ctr.get("env") or [] if isinstance(e, dict)}
            too_long = context_length_error(args, model, allows_long_max_model_len(env))
            if too_long:  # vLLM exits at start: the run's pod would crash-loop with these words
                field = args.flag_fields.get("max_model_len", f"{path}.containers[{ci}]")
                out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(field)), m.ref, field, too_long,
                                      f"lower --max-model-len to at most {model.max_position_embeddings}"))
            for dest, message, severity in parallel_problems(args, model, visible):
                field = args.flag_fields.get(dest, f"{path}.containers[{ci}]")
                hint = (f"set the container's nvidia.com/gpu to tensor x pipeline parallel size, or choose sizes "
                        f"that divide the model's {model.num_attention_heads} attention heads"
                        if severity == "error" else "")
                out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(field)), m.ref, field, message, hint,
                                      severity))
        if args is not None and model is None:
            near = closest_models(args.model)
            field = f"{path}.containers[{ci}]"
            out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(field)), m.ref, field,
                                  f"model {args.model!r} is not in the twin's model table: its pods start but serve "
                                  "no requests in a run", f"use one of {', '.join(near)}" if near else "", "notice"))
    return out


def request_trace_file(m: Manifest) -> list[Diagnostic]:
    """A generated RequestTrace needs the token counts its generator draws (`generator.missing_fields`, the rule
    the run applies). A RequestTrace's spec.path must name a file, resolved as the run resolves it (relative to the
    manifest's folder): `validate` says so rather than passing a scenario the run then refuses. Its existence and
    its first record are checked here (`arrays.check_format`: a CSV's header is spec.format's, in the loader's
    words; a trace can be gigabytes); its rows are read, and reported by line, when the run loads it."""
    from pathlib import Path

    from kubetwin.api.twin import RequestTrace
    from kubetwin.serving.traces.arrays import TraceError, check_format
    from kubetwin.serving.traces.generator import missing_fields

    gen = RequestTrace.model_validate(m.obj).spec.generator  # already validated by the twin's model
    if gen is not None:
        return [Diagnostic(m.file, m.line_of(e.field), m.ref, e.field, e.message, e.hint) for e in missing_fields(gen)]
    path = (m.obj.get("spec") or {}).get("path")
    if not isinstance(path, str) or not path or m.file.startswith("<"):
        return []
    full = Path(m.file).resolve().parent / path
    if full.is_file():
        try:
            check_format(str((m.obj.get("spec") or {}).get("format")), full.resolve())  # the path the run reads
        except TraceError as exc:
            return [Diagnostic(m.file, m.line_of(exc.field), m.ref, exc.field, exc.message, exc.hint)]
        except (OSError, UnicodeDecodeError) as exc:  # a file the run could not read either
            return [Diagnostic(m.file, m.line_of("spec.path"), m.ref, "spec.path", f"cannot read the trace: {exc}",
                               "check spec.path and the file's permissions")]
        return []
    return [Diagnostic(m.file, m.line_of("spec.path"), m.ref, "spec.path", f"trace file not found: {full}",
                       "check spec.path; it is resolved relative to the folder of the manifest that declares the "
                       "RequestTrace")]


ROUTER = "kubetwin.io/router"  # serving.dataplane.plane.ROUTER: the pool's routing preset
POOL_KINDS = ("InferencePool", "Service")


def _at(obj: object, path: str) -> object:
    """The value at a dotted path, None where any step is not a mapping (a malformed object is the schema
    checks' to report, not a traceback here)."""
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _str(obj: object, path: str, default: str = "") -> str:
    v = _at(obj, path)
    return v if isinstance(v, str) and v else default


CUSTOM_METRICS, EXTERNAL_METRICS = "custom.metrics.k8s.io", "external.metrics.k8s.io"


def metrics_adapters(manifests: list[Manifest]) -> list[Diagnostic]:
    """An HPA (autoscaling/v2) on a Pods or Object metric reads it from the custom metrics API, an External one
    from the external metrics API; a cluster serves them only through an adapter registered as an APIService
    (prometheus-adapter, the Custom Metrics Stackdriver Adapter, KEDA's metrics server). Without one the HPA
    controller reports FailedGetPodsMetric / FailedGetExternalMetric and never scales (horizontal.go). The twin
    answers Pods and Object metrics from its own Prometheus as if an adapter served them, and external metrics only
    through KEDA's ScaledObjects (autoscaler/hpa_replicas.py): a notice names each metric where that differs from
    what the manifests install."""
    services: dict[str, str] = {}  # API group -> the APIService that serves it
    for m in manifests:
        spec = m.obj.get("spec")
        if m.kind == "APIService" and isinstance(spec, dict) and spec.get("group"):
            services.setdefault(str(spec["group"]), str((m.obj.get("metadata") or {}).get("name")))
    from kubetwin.serving import install

    keda = any(m.kind == "ScaledObject" for m in manifests)
    prometheus = install.wanted(manifests)  # runner.wire gives the HPA the serving data plane's series
    out: list[Diagnostic] = []
    for m in manifests:
        if m.kind != "HorizontalPodAutoscaler" or not isinstance(m.obj.get("spec"), dict):
            continue
        for i, metric in enumerate(m.obj["spec"].get("metrics") or []):
            mtype = metric.get("type") if isinstance(metric, dict) else None
            source = metric.get(str(mtype).lower() if mtype != "Pods" else "pods") if mtype else None
            name = ((source or {}).get("metric") or {}).get("name") if isinstance(source, dict) else None
            field = f"spec.metrics[{i}]"
            if mtype in ("Pods", "Object") and CUSTOM_METRICS not in services:
                failed = f"FailedGet{mtype}Metric"
                twin = ("the twin reads the metric from its own Prometheus (the serving data plane's series) as if "
                        f"an adapter served it; a cluster without one reports {failed} and never scales"
                        if prometheus else "the scenario serves no LLM traffic, so the twin's Prometheus has no "
                        f"series either: the HPA reports {failed} and never scales, as on a cluster without one")
                message = (f"{mtype} metric {name} is read from the custom metrics API ({CUSTOM_METRICS}), which "
                           f"no adapter in the manifests serves (no APIService for it): {twin}")
                out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, message,
                                      "install an adapter (prometheus-adapter or the Custom Metrics Stackdriver "
                                      "Adapter) in the cluster, with rules that expose this metric", "notice"))
            elif mtype == "External" and not keda:
                served = services.get(EXTERNAL_METRICS)
                why = (f"the adapter behind APIService {served} is not simulated" if served else
                       "no adapter in the manifests serves it (no APIService for it)")
                message = (f"External metric {name} is read from the external metrics API ({EXTERNAL_METRICS}): "
                           f"{why}; the twin serves external metrics only through KEDA, so in the run the HPA "
                           "reports FailedGetExternalMetric and never scales")
                out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, message,
                                      "scale on this metric with a KEDA ScaledObject (its trigger serves the "
                                      "metric), or use a Pods/Object metric from the twin's Prometheus", "notice"))
    return out


def scenario(manifests: list[Manifest]) -> list[Diagnostic]:
    """Checks across a scenario's serving objects: each pool's router preset, and workloads behind a pool that
    RequestTraces send to which run no model server the twin simulates (their pods never join the pool)."""
    from kubetwin.serving.router.presets import unknown_router

    out: list[Diagnostic] = []
    for m in manifests:
        if m.kind in POOL_KINDS:
            annotations = _at(m.obj, "metadata.annotations")
            preset = annotations.get(ROUTER) if isinstance(annotations, dict) else None
            why = unknown_router(preset) if isinstance(preset, str) else None
            if why:
                field = f"metadata.annotations.{ROUTER}"
                out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, why,
                                      "use one of the presets (docs/serving.md, Routing), or remove the annotation "
                                      "for the pool's default (epp for an InferencePool, round-robin for a Service)"))
    from kubetwin.validation import monitoring

    return (out + _unsimulated_servers(manifests) + _servers_on_mig(manifests) + metrics_adapters(manifests)
            + trigger_queries(manifests) + monitoring.diagnostics(manifests) + triton_servers(manifests))


def triton_servers(manifests: list[Manifest]) -> list[Diagnostic]:
    """A tritonserver container's model repository as the server loads it from the ConfigMaps it mounts: config.pbtxt
    and model.json errors at their line in the ConfigMap (the server exits: --exit-on-error), notices for what the
    twin does instead, the model checked against the twin's table, and a readinessProbe Triton would answer 404."""
    from kubetwin.k8s.labels import matches
    from kubetwin.serving.dataplane.pools import pool_selector
    from kubetwin.serving.modelserver.modelspec import closest_models, lookup_server_model
    from kubetwin.serving.modelserver.recognize import gpu_count, inspect_model_server, server_kind
    from kubetwin.serving.modelserver.server_args import ArgProblem
    from kubetwin.serving.modelserver.sizing import allows_long_max_model_len, context_length_error, parallel_problems
    from kubetwin.serving.modelserver.triton_args import epp_reads_metrics, parse_file_field, probe_refused

    maps: dict[tuple[str, str], Manifest] = {}
    for m in manifests:
        if m.kind == "ConfigMap" and isinstance(m.obj.get("data"), dict):
            maps[(_str(m.obj, "metadata.namespace", "default"), _str(m.obj, "metadata.name"))] = m
    out: list[Diagnostic] = []
    for m in manifests:
        ns = _str(m.obj, "metadata.namespace", "default")
        for ref in server_templates(m.obj):
            path, spec = ref.at("spec"), ref.spec
            if server_kind(spec) != "triton":
                continue
            bare = inspect_model_server(spec, path)
            said = {(p.field, p.message) for p in (bare[2] if bare else [])}  # model_servers reported these

            def lookup(name: str, ns: str = ns) -> dict[str, str] | None:
                cm = maps.get((ns, name))
                return {str(k): str(v) for k, v in cm.obj["data"].items()} if cm is not None else None

            found = inspect_model_server(spec, path, lookup)
            if found is None:
                continue
            ci, args, problems = found
            ctr = spec["containers"][ci]
            model = lookup_server_model(args.model, args.served_model_name) if args is not None else None
            if args is not None and model is not None:
                # the engine's own start-up refusals (vLLM's words for the vLLM backend), at the model.json line
                env = {str(e.get("name")): str(e.get("value", "")) for e in ctr.get("env") or []
                       if isinstance(e, dict)}
                too_long = context_length_error(args, model, allows_long_max_model_len(env))
                if too_long:
                    problems.append(ArgProblem(args.flag_fields.get("max_model_len", f"{path}.containers[{ci}]"),
                                               too_long, f"lower max_model_len to at most "
                                               f"{model.max_position_embeddings}"))
                for dest, message, severity in parallel_problems(args, model, gpu_count(ctr)):
                    problems.append(ArgProblem(args.flag_fields.get(dest, f"{path}.containers[{ci}]"), message,
                                               "give the container tensor x pipeline parallel GPUs" if
                                               severity == "error" else "", severity))
            for p in problems:
                if (p.field, p.message) in said:
                    continue
                where = parse_file_field(p.field)
                if where is not None and (ns, where[0]) in maps:
                    cm = maps[(ns, where[0])]
                    field = f"data.{where[1]}"
                    out.append(Diagnostic(cm.file, cm.line_of(field) + where[2], cm.ref, field,
                                          f"{p.message} (used by {m.ref} container {ci})", p.hint, p.severity))
                else:
                    out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(p.field)), m.ref, p.field, p.message,
                                          p.hint, p.severity))
            if args is not None and model is None:
                near = closest_models(args.model)
                field = f"{path}.containers[{ci}]"
                out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(field)), m.ref, field,
                                      f"model {args.model!r} is not in the twin's model table: its pods start but "
                                      "serve no requests in a run", f"use one of {', '.join(near)}" if near else "",
                                      "notice"))
            raw = ref.metadata.get("labels")
            labels: dict = raw if isinstance(raw, dict) else {}
            if args is not None and not epp_reads_metrics(args, labels):
                for pool in (p for p in manifests if p.kind == "InferencePool"
                             and _str(p.obj, "metadata.namespace", "default") == ns):
                    selector = pool_selector(pool.obj)
                    if selector and matches({"matchLabels": selector}, labels):
                        field = f"{path}.containers[{ci}]"
                        what = ("Triton's vLLM backend exports no queue or KV-cache gauge" if
                                args.triton is not None and args.triton.backend == "vllm" else
                                "without the label inference.networking.k8s.io/engine-type: triton-tensorrt-llm the "
                                "endpoint picker asks this pod for vLLM's metric names")
                        out.append(Diagnostic(
                            m.file, m.line_of(_path_to_dotted(field)), m.ref, field,
                            f"{pool.ref}'s endpoint picker reads vllm:num_requests_waiting and "
                            f"vllm:kv_cache_usage_perc from its pods; {what}, so the picker holds these pods' metrics "
                            "stale: saturated to the saturation detector (sheddable requests dropped), zero queue and "
                            "KV to the scorers (only prefix affinity and chance pick among them)",
                            "serve with the TensorRT-LLM backend and label the pods "
                            "inference.networking.k8s.io/engine-type: triton-tensorrt-llm, or route through a "
                            "Service", "notice"))
            refused = probe_refused(ctr)
            if refused is not None:
                field = f"{path}.containers[{ci}].readinessProbe.httpGet.path"
                out.append(Diagnostic(m.file, m.line_of(_path_to_dotted(field)), m.ref, field,
                                      f"Triton answers GET {refused} with 404 (its HTTP endpoint serves the KServe "
                                      "v2 paths): the readiness probe fails and the pods never turn Ready",
                                      "probe /v2/health/ready on the HTTP port (8000 unless --http-port says "
                                      "otherwise)", "warning"))
    return out


def mig_partitions(manifests: list[Manifest], node_selector: object) -> set[tuple[str, str]]:
    """(accelerator, MIG profile) of the nodes a pod template's nodeSelector can land on, when each of them is a
    MIG partition: the selector's own cloud.google.com/gke-gpu-partition-size, or every GPU NodePool of the
    scenario it selects being partitioned (GKE gpuPartitionSize). Empty when a whole GPU is possible. The same
    reading of the pools as training's (devices/container.on_pools over validation/accelerators.pool_node_labels)."""
    from kubetwin.devices import container
    from kubetwin.validation.accelerators import pool_node_labels

    sel = node_selector if isinstance(node_selector, dict) else {}
    found = container.on_pools(pool_node_labels(manifests), sel, 1, 0)
    if not found or any(got.kind != "mig" for got in found):
        return set()
    return {(got.devices[0].accelerator, got.devices[0].partition) for got in found}


def _servers_on_mig(manifests: list[Manifest]) -> list[Diagnostic]:
    """A warning for a model server whose parallel layout needs more devices than one CUDA process enumerates on
    the MIG instances its pods can only land on (devices/container.py: one MIG instance per process), in the
    server's own start-up error words (serving/modelserver/sizing.parallel_problems)."""
    from kubetwin.devices import container, mig
    from kubetwin.serving.modelserver.modelspec import lookup_server_model
    from kubetwin.serving.modelserver.recognize import gpu_count, inspect_model_server
    from kubetwin.serving.modelserver.sizing import parallel_problems

    out: list[Diagnostic] = []
    for m in manifests:
        for ref in server_templates(m.obj):
            path, spec = ref.at("spec"), ref.spec
            found = inspect_model_server(spec, path)
            if found is None or found[1] is None:
                continue
            ci, args, _ = found
            assert args is not None
            model = lookup_server_model(args.model, args.served_model_name)
            allocated = gpu_count(spec["containers"][ci])
            if model is None or allocated < 2:
                continue
            for accel, size in sorted(mig_partitions(manifests, spec.get("nodeSelector"))):
                try:
                    got = container.for_counts({container.GPU_LABEL: accel, GKE_GPU_PARTITION_SIZE:
                                                size}, allocated, 0)
                except (mig.MigError, KeyError):  # an unknown profile is nodepool validation's error
                    continue
                if not got.devices or got.visible >= allocated:
                    continue
                whole = {msg for _, msg, sev in parallel_problems(args, model, allocated) if sev == "error"}
                for dest, message, severity in parallel_problems(args, model, got.visible, allocated):
                    if severity != "error" or message in whole:
                        continue
                    field = args.flag_fields.get(dest, f"{path}.containers[{ci}]")
                    out.append(Diagnostic(
                        m.file, m.line_of(_path_to_dotted(field)), m.ref, field,
                        f"its pods land on {accel} MIG instances ({size}); a CUDA process enumerates one MIG "
                        f"instance however many the container gets (NVIDIA MIG user guide), so the server exits at "
                        f"start: {message}", "run one replica per MIG instance (tensor-parallel size 1, "
                        "nvidia.com/gpu: 1), or use whole GPUs for tensor parallelism", "warning"))
                break
    return out


def _unsimulated_servers(manifests: list[Manifest]) -> list[Diagnostic]:
    from kubetwin.k8s.labels import matches
    from kubetwin.serving.modelserver.recognize import inspect_model_server

    targets = set()
    for m in manifests:
        if m.kind == "RequestTrace":
            ns = _str(m.obj, "spec.target.namespace", _str(m.obj, "metadata.namespace", "default"))
            targets.add((_str(m.obj, "spec.target.kind", "InferencePool"), ns, _str(m.obj, "spec.target.name")))
    pools = []
    for m in manifests:
        key = (m.kind, _str(m.obj, "metadata.namespace", "default"), _str(m.obj, "metadata.name"))
        if m.kind in POOL_KINDS and key in targets:
            labels = _at(m.obj, "spec.selector.matchLabels" if m.kind == "InferencePool" else "spec.selector")
            if isinstance(labels, dict) and labels and all(isinstance(v, str) for v in labels.values()):
                pools.append((f"{key[0]}/{key[1]}/{key[2]}", key[1], labels, m.kind == "InferencePool"))
    out: list[Diagnostic] = []
    for m, ref in ((w, ref) for w in (manifests if pools else []) for ref in server_templates(w.obj)):
        ns = _str(m.obj, "metadata.namespace", "default")
        path, spec, labels = ref.at("spec"), ref.spec, ref.metadata.get("labels")
        if not isinstance(labels, dict) or inspect_model_server(spec, path) is not None:
            continue
        for pool_ref, pool_ns, selector, holds in pools:
            if pool_ns != ns or not matches({"matchLabels": selector}, labels):
                continue
            containers = spec.get("containers")
            c = next((c for c in containers if isinstance(c, dict)), {}) if isinstance(containers, list) else {}
            field = f"{path}.containers[0]"
            then = ("held by the pool's flow control until kubetwin.io/request-ttl (default 10m)" if holds
                    else "at once (Envoy's \"no healthy upstream\")")
            out.append(Diagnostic(
                m.file, m.line_of(_path_to_dotted(field)), m.ref, field,
                f"container {c.get('name', '')!r} ({c.get('image', '')}) is not a model server kubetwin simulates; "
                f"requests to it through {pool_ref} are answered 503, {then}: its pods run but never join the pool",
                "kubetwin models vLLM (vllm serve, vllm/vllm-openai) and TGI (text-generation-launcher); run one of "
                "them to see the pool serve", "notice"))
    return out


MAX_REQUESTS = 100_000_000  # twin limit: a RequestTrace generator's expected requests in one run (columnar arrays)
MAX_KNOTS = 10_000_000  # twin limit: diurnal grid points / on-off periods of one generator


def request_budget(manifests: list[Manifest]) -> list[Diagnostic]:
    """RequestTrace generators whose expected arrivals, diurnal grid or on-off periods over the run
    (serving.traces.generator.size_estimate) would not fit in memory; across objects: the Scenario's duration is the
    generators' default."""
    from pydantic import ValidationError

    from kubetwin.api.twin import RequestTrace, ScenarioSpec
    from kubetwin.k8s.units import parse_duration
    from kubetwin.serving.traces.generator import size_estimate

    horizon = 86400.0
    for m in manifests:
        if m.kind == "Scenario" and isinstance(m.obj.get("spec"), dict):
            try:
                horizon = parse_duration(ScenarioSpec.model_validate(m.obj["spec"]).duration)
            except (ValidationError, ValueError):
                return []  # reported on the Scenario
    out: list[Diagnostic] = []
    for m in manifests:
        if m.kind != "RequestTrace":
            continue
        try:
            gen = RequestTrace.model_validate(m.obj).spec.generator
        except (ValidationError, ValueError):
            continue
        if gen is None:
            continue
        duration = parse_duration(gen.duration) if gen.duration else horizon
        expected, knots, peak = size_estimate(gen, duration)
        field, what = (("spec.generator.rate", f"{expected:.3g} requests (rate {peak:g}/s over {duration:g} s)")
                       if expected > MAX_REQUESTS else ("spec.generator", f"{knots:.3g} rate knots")
                       if knots > MAX_KNOTS else ("", ""))
        if field:
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, f"Invalid value: the generator makes "
                                  f"{what}: the twin holds at most {MAX_REQUESTS:,} requests and {MAX_KNOTS:,} rate "
                                  "knots per trace (a twin limit)", "lower the rate or the generator's duration"))
    return out
