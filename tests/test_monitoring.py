"""Monitoring objects select what the twin's Prometheus scrapes (issue 38 item 3; docs/monitoring.md).

Ported cases, cited by test name:
- prometheus/prometheus model/relabel/relabel_test.go@d15adb9 TestRelabel (the relabel engine every operator hands
  its rules to);
- GoogleCloudPlatform/prometheus-engine pkg/operator/apis/monitoring/v1/pod_config_test.go@2ffde4e
  (TestTopLevelControllerRelabel, TestLabelMappingRelabelConfigs, TestPodMonitoring_ScrapeConfig);
- kedacore/keda pkg/scalers/prometheus_scaler_test.go@8b4f083 testPromQueryResult (empty results and
  ignoreNullValues).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kubetwin.api import crd
from kubetwin.api.loader import load_text
from kubetwin.prometheus import relabel, targets
from kubetwin.prometheus.promql import Evaluator
from kubetwin.serving.dataplane.requestlog import RequestLog
from kubetwin.serving.observe.promsource import ServingMetricsSource
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate

SITE = targets.Site("test_cluster", "test_location", "test_project")


def rules(*specs: dict) -> list[relabel.Rule]:
    return relabel.compile_rules(specs)


# ------------------------------------------------------------------ relabel (prometheus relabel_test.go TestRelabel)
@pytest.mark.parametrize(("given", "specs", "want"), [
    ({"a": "foo", "b": "bar", "c": "baz"},
     [{"sourceLabels": ["a"], "regex": "f(.*)", "targetLabel": "d", "replacement": "ch${1}-ch${1}"}],
     {"a": "foo", "b": "bar", "c": "baz", "d": "choo-choo"}),
    ({"a": "foo", "b": "bar", "c": "baz"},
     [{"sourceLabels": ["a", "b"], "regex": "f(.*);(.*)r", "targetLabel": "a", "replacement": "b${1}${2}m"},
      {"sourceLabels": ["c", "a"], "regex": "(b).*b(.*)ba(.*)", "targetLabel": "d", "replacement": "$1$2$2$3"}],
     {"a": "boobam", "b": "bar", "c": "baz", "d": "boooom"}),
    ({"a": "foo"}, [{"sourceLabels": ["a"], "regex": ".*o.*", "action": "drop"},
                    {"sourceLabels": ["a"], "regex": "f(.*)", "targetLabel": "d", "replacement": "ch$1-ch$1"}], None),
    ({"a": "abc"}, [{"sourceLabels": ["a"], "regex": ".*(b).*", "targetLabel": "d"}], {"a": "abc", "d": "b"}),
    ({"a": "foo"}, [{"sourceLabels": ["a"], "regex": "f|o", "action": "drop"}], {"a": "foo"}),  # anchored
    ({"a": "foo"}, [{"sourceLabels": ["a"], "regex": "no-match", "action": "keep"}], None),
    ({"a": "boo"}, [{"sourceLabels": ["a"], "regex": "f", "targetLabel": "b", "replacement": "bar"}], {"a": "boo"}),
    ({"a": "foo", "f": "baz"},  # a blank replacement deletes the label
     [{"sourceLabels": ["a"], "regex": "(f).*", "targetLabel": "$1", "replacement": "$2"}], {"a": "foo"}),
    ({"a": "foo", "b": "bar", "c": "baz"}, [{"sourceLabels": ["c"], "targetLabel": "d", "action": "hashmod",
                                             "modulus": 1000}], {"a": "foo", "b": "bar", "c": "baz", "d": "976"}),
    ({"a": "foo\nbar"}, [{"sourceLabels": ["a"], "targetLabel": "b", "action": "hashmod", "modulus": 1000}],
     {"a": "foo\nbar", "b": "734"}),
    ({"a": "foo", "b1": "bar", "b2": "baz"}, [{"regex": "(b.*)", "replacement": "bar_${1}", "action": "labelmap"}],
     {"a": "foo", "b1": "bar", "b2": "baz", "bar_b1": "bar", "bar_b2": "baz"}),
    ({"a": "some-name-value"}, [{"sourceLabels": ["a"], "regex": "some-([^-]+)-([^,]+)", "replacement": "${2}",
                                 "targetLabel": "${1}"}], {"a": "some-name-value", "name": "value"}),
    ({"a": "some-name-0"}, [{"sourceLabels": ["a"], "regex": "some-([^-]+)-([^,]+)", "replacement": "${1}",
                             "targetLabel": "${3}"}], {"a": "some-name-0"}),  # an invalid target: no change
    ({"a": "foo", "b1": "bar", "b2": "baz"}, [{"regex": "(b.*)", "action": "labelkeep"}], {"b1": "bar", "b2": "baz"}),
    ({"a": "foo", "b1": "bar", "b2": "baz"}, [{"regex": "(b.*)", "action": "LabelDrop"}], {"a": "foo"}),
    ({"foo": "bAr123Foo"}, [{"sourceLabels": ["foo"], "action": "Uppercase", "targetLabel": "foo_uppercase"},
                            {"sourceLabels": ["foo"], "action": "Lowercase", "targetLabel": "foo_lowercase"}],
     {"foo": "bAr123Foo", "foo_uppercase": "BAR123FOO", "foo_lowercase": "bar123foo"}),
])
def test_relabel_as_prometheus_relabels(given, specs, want) -> None:
    assert relabel.apply_rules(given, rules(*specs)) == want


def test_metric_relabelling_renames_and_drops_series_by_name() -> None:
    rename = rules({"sourceLabels": ["__name__"], "regex": "vllm:(.*)", "targetLabel": "__name__",
                    "replacement": "vllm_$1"})
    assert relabel.process({"__name__": "vllm:num_requests_waiting", "pod": "p"}, rename) == {
        "__name__": "vllm_num_requests_waiting", "pod": "p"}
    drop = rules({"sourceLabels": ["__name__"], "regex": "vllm:.*_total", "action": "drop"})
    assert relabel.process({"__name__": "vllm:request_success_total"}, drop) is None
    assert relabel.process({"__name__": "vllm:num_requests_running"}, drop) == {"__name__": "vllm:num_requests_running"}
    # a rule that blanks __name__ leaves no series
    assert relabel.process({"__name__": "x"}, rules({"sourceLabels": ["nope"], "targetLabel": "__name__",
                                                     "regex": "(.*)"})) is None


def test_a_keep_rule_without_source_labels_matches_the_empty_value() -> None:
    """TestPodMonitoring_ScrapeConfig's last metric rule (keep, regex foo_.+, no sourceLabels) reads the empty
    string and keeps nothing: a rule as written there drops every series of the endpoint."""
    keep = rules({"action": "keep", "regex": "foo_.+", "modulus": 3})
    assert relabel.process({"__name__": "foo_bar"}, keep) is None


@pytest.mark.parametrize("spec", [{"action": "bogus"}, {"action": "replace"}, {"regex": "("},
                                  {"action": "hashmod", "targetLabel": "x"}])
def test_rules_prometheus_refuses(spec) -> None:
    with pytest.raises(relabel.RelabelError):
        relabel.Rule(spec)


# ----------------------------------------------------------------------------------------- target selection
def pod(name: str = "srv-7d9f8c6b5-abcde", ns: str = "default", labels: dict | None = None, port_name: str = "metrics",
        port: int = 8000, owner: tuple[str, str] | None = ("ReplicaSet", "srv-7d9f8c6b5"), phase: str = "Running",
        template_hash: bool = True) -> dict:
    lab = {"app": "srv", **({"pod-template-hash": "7d9f8c6b5"} if template_hash else {}), **(labels or {})}
    meta: dict = {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": lab}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "node-1", "containers": [{"name": "vllm", "ports": [
                {"name": port_name, "containerPort": port}] if port_name else [{"containerPort": port}]}]},
            "status": {"phase": phase, "podIP": "10.0.0.7"}}


def monitor(kind: str = "PodMonitoring", ns: str = "default", name: str = "vllm", **spec) -> dict:
    group = "monitoring.googleapis.com/v1" if kind in ("PodMonitoring", "ClusterPodMonitoring") \
        else "monitoring.coreos.com/v1"
    meta = {"name": name} if kind == "ClusterPodMonitoring" else {"name": name, "namespace": ns}
    body = {"selector": {"matchLabels": {"app": "srv"}}, **spec}
    if kind in ("PodMonitoring", "ClusterPodMonitoring", "ServiceMonitor") and "endpoints" not in body:
        body["endpoints"] = [{"port": "metrics", "interval": "15s"}]
    return crd.apply_defaults({"apiVersion": group, "kind": kind, "metadata": meta, "spec": body})


def target(mon: dict, p: dict, services: tuple = (), port: int = 8000) -> dict | None:
    (job,) = targets.jobs([mon])
    return job.target(p, port, SITE, services)


def test_podmonitoring_target_labels_are_gmps() -> None:
    """TestPodMonitoring_ScrapeConfig's relabel_configs: project_id, location, cluster, namespace, job = the
    object's name, instance = <pod>:<port name>; TestTopLevelControllerRelabel's Deployment case for the CRD's
    default metadata labels."""
    assert target(monitor(), pod()) == {
        "project_id": "test_project", "location": "test_location", "cluster": "test_cluster",
        "namespace": "default", "job": "vllm", "instance": "srv-7d9f8c6b5-abcde:metrics", "container": "vllm",
        "pod": "srv-7d9f8c6b5-abcde", "top_level_controller_name": "srv",
        "top_level_controller_type": "Deployment"}


@pytest.mark.parametrize(("owner", "template_hash", "want"), [
    (("Job", "test-cronjob-12345678"), False, ("test-cronjob", "CronJob")),
    (("DaemonSet", "test-daemonset"), False, ("test-daemonset", "DaemonSet")),
    (("ReplicaSet", "test-deployment-1234567890"), True, ("test-deployment", "Deployment")),
    (("Job", "test-job"), False, ("test-job", "Job")),
    (("ReplicaSet", "test-replicaset"), False, ("test-replicaset", "ReplicaSet")),  # no pod-template-hash label
])
def test_top_level_controller_labels(owner, template_hash, want) -> None:
    """pod_config_test.go TestTopLevelControllerRelabel."""
    got = target(monitor(), pod(owner=owner, template_hash=template_hash))
    assert got is not None
    assert (got["top_level_controller_name"], got["top_level_controller_type"]) == want


def test_a_port_given_by_number_is_scraped_undeclared_and_drops_the_container_label() -> None:
    mon = monitor(endpoints=[{"port": 8000, "interval": "30s"}])
    got = target(mon, pod(port_name=""))
    assert got is not None and got["instance"] == "srv-7d9f8c6b5-abcde:8000" and "container" not in got
    assert target(monitor(endpoints=[{"port": 9090, "interval": "30s"}]), pod()) is None  # not vLLM's port


def test_podmonitoring_keeps_its_namespace_clusterpodmonitoring_any() -> None:
    other = pod(ns="serving")
    assert target(monitor(), other) is None
    got = target(monitor("ClusterPodMonitoring"), other)
    assert got is not None and got["namespace"] == "serving" and got["job"] == "vllm"


def test_selector_port_name_and_finished_pods() -> None:
    assert target(monitor(selector={"matchLabels": {"app": "other"}}), pod()) is None
    assert target(monitor(selector={"matchExpressions": [{"key": "app", "operator": "In",
                                                          "values": ["srv", "x"]}]}), pod()) is not None
    assert target(monitor(endpoints=[{"port": "http", "interval": "15s"}]), pod()) is None  # no port named http
    assert target(monitor(endpoints=[{"port": "met.*", "interval": "15s"}]), pod()) is not None  # a regex
    assert target(monitor(), pod(phase="Succeeded")) is None  # filterRunning defaults to true
    assert target(monitor(filterRunning=False), pod(phase="Succeeded")) is not None


def test_from_pod_labels_and_metadata_choice() -> None:
    mon = monitor(targetLabels={"metadata": ["pod"], "fromPod": [{"from": "app", "to": "application"}]})
    got = target(mon, pod())
    assert got is not None and got["application"] == "srv" and "container" not in got
    assert "top_level_controller_name" not in got and got["namespace"] == "default"  # always, for a PodMonitoring


@pytest.mark.parametrize(("mappings", "refused"), [
    ([{"from": "from", "to": "to"}], False),
    ([{"from": "from-instance", "to": "instance"}], True),
    ([{"from": "from", "to": "to"}, {"from": "from-instance", "to": "instance"}], True),
    ([{"from": "from"}], False),
])
def test_label_mappings_onto_protected_labels_void_the_podmonitoring(mappings, refused) -> None:
    """pod_config_test.go TestLabelMappingRelabelConfigs: the operator cannot build the config, so nothing of
    the object is scraped."""
    mon = monitor(targetLabels={"fromPod": mappings})
    assert (targets.gmp_config_error(mon) is not None) == refused
    assert (targets.jobs([mon]) == []) == refused


@pytest.mark.parametrize(("rule", "refused"), [
    ({"action": "labeldrop", "regex": "cluster"}, True),
    ({"action": "labeldrop", "regex": "pod"}, False),
    ({"action": "labelkeep", "regex": "(.*)"}, False),
    ({"action": "labelkeep", "regex": "pod|model_name"}, True),
    ({"action": "labelmap", "regex": "(.*)"}, True),
    ({"action": "replace", "sourceLabels": ["a"], "targetLabel": "job"}, True),
    ({"action": "drop", "sourceLabels": ["__name__"], "regex": "vllm:.*_total"}, False),
])
def test_metric_relabelling_that_touches_protected_labels(rule, refused) -> None:
    """convertRelabelingRule (pod_config.go): protected labels project_id, location, cluster, namespace, job,
    instance and __address__."""
    mon = monitor(endpoints=[{"port": "metrics", "interval": "15s", "metricRelabeling": [rule]}])
    assert (targets.gmp_config_error(mon) is not None) == refused


def test_podmonitor_namespace_selector_and_labels() -> None:
    pm = monitor("PodMonitor", ns="monitoring", podMetricsEndpoints=[{"port": "metrics"}])
    assert target(pm, pod()) is None  # its own namespace only
    pm_any = monitor("PodMonitor", ns="monitoring", namespaceSelector={"any": True},
                     podMetricsEndpoints=[{"port": "metrics"}])
    got = target(pm_any, pod())
    assert got == {"namespace": "default", "container": "vllm", "pod": "srv-7d9f8c6b5-abcde",
                   "job": "monitoring/vllm", "endpoint": "metrics", "instance": "10.0.0.7:8000"}
    names = monitor("PodMonitor", ns="monitoring", namespaceSelector={"matchNames": ["default"]},
                    podMetricsEndpoints=[{"portNumber": 8000, "interval": "1m"}])
    (job,) = targets.jobs([names])
    assert job.interval == 60 and target(names, pod()) is not None
    (default,) = targets.jobs([monitor("PodMonitor", podMetricsEndpoints=[{"port": "metrics"}])])
    assert default.interval == targets.OPERATOR_INTERVAL


def test_servicemonitor_follows_the_services_selector_and_ports() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "srv-svc", "namespace": "default",
                                                               "labels": {"team": "llm"}},
           "spec": {"selector": {"app": "srv"}, "ports": [{"name": "web", "port": 80, "targetPort": "metrics"}]}}
    sm = monitor("ServiceMonitor", selector={"matchLabels": {"team": "llm"}}, endpoints=[{"port": "web"}])
    got = target(sm, pod(), (svc,))
    assert got is not None and got["job"] == "srv-svc" and got["service"] == "srv-svc" and got["endpoint"] == "web"
    assert target(sm, pod()) is None  # no Service, no endpoints
    other = {**svc, "spec": {**svc["spec"], "selector": {"app": "other"}}}
    assert target(sm, pod(), (other,)) is None
    wrong_port = monitor("ServiceMonitor", selector={"matchLabels": {"team": "llm"}}, endpoints=[{"port": "grpc"}])
    assert target(wrong_port, pod(), (svc,)) is None


# -------------------------------------------------------------------------------------------- the scrapes
def _endpoint(name: str, waiting: int) -> SimpleNamespace:
    engine = SimpleNamespace(advance=lambda t: None, num_waiting=waiting, num_running=1, kv_usage=0.5,
                             block_size=16, num_gpu_blocks=1000, max_loras=0, finished=0, prompt_tokens_total=0,
                             generation_tokens_total=0, prefix_cache_queries=0, prefix_cache_hits=0,
                             num_preemptions=0)
    return SimpleNamespace(engine=engine, args=SimpleNamespace(port=8000, enable_lora=False), namespace="default",
                           name=name, served_names=["m"])


def source_world(*monitors: dict, at: float = 0.0) -> tuple[Environment, Store, ServingMetricsSource]:
    """Two Ready model servers (pods a, b) and the monitoring objects, created at `at`."""
    env = Environment()
    store = Store(env)
    for name in ("a", "b"):
        store.create(pod(name=name))
    plane = SimpleNamespace(endpoints={"a": _endpoint("a", 3), "b": _endpoint("b", 4)}, pools={}, log=RequestLog(),
                            store=store)
    src = ServingMetricsSource(plane, env, monitors=True, site=SITE)  # type: ignore[arg-type]
    for m in monitors:
        env.at(at, lambda m=m: store.create(m))
    return env, store, src


def test_nothing_is_scraped_until_a_monitoring_object_selects_the_servers() -> None:
    env, store, src = source_world(monitor(), at=100)
    env.run(200)
    q = Evaluator(src)
    assert q.query("sum(vllm:num_requests_waiting)", 90) == []  # KEDA reads this as 0 (ignoreNullValues)
    assert q.query("sum(vllm:num_requests_waiting)", 150) == [({}, 7.0)]
    ((labels, value),) = q.query('vllm:num_requests_waiting{pod="a"}', 150)
    assert value == 3 and labels["job"] == "vllm" and labels["cluster"] == "test_cluster"
    assert labels["instance"] == "a:metrics" and labels["model_name"] == "m"


def test_the_interval_sets_the_samples_and_a_deleted_monitor_goes_stale() -> None:
    env, store, src = source_world(monitor(endpoints=[{"port": "metrics", "interval": "1m"}]))
    env.at(300, lambda: store.delete("PodMonitoring", "default", "vllm"))
    env.run(400)
    samples = src.series("vllm:num_requests_waiting", 0, 299)
    assert [t for t, _ in samples[0][1]] == [0, 60, 120, 180, 240]
    q = Evaluator(src)
    assert q.query("count(vllm:num_requests_waiting)", 290) == [({}, 2.0)]
    assert q.query("count(vllm:num_requests_waiting)", 301) == []  # stale at once, not after the 5 m lookback


def test_metric_relabelling_renames_at_scrape_time() -> None:
    mon = monitor(endpoints=[{"port": "metrics", "interval": "15s", "metricRelabeling": [
        {"sourceLabels": ["__name__"], "regex": "vllm:num_requests_waiting", "targetLabel": "__name__",
         "replacement": "queue_depth"},
        {"sourceLabels": ["__name__"], "regex": "vllm:.*", "action": "drop"}]}])
    env, store, src = source_world(mon)
    env.run(60)
    q = Evaluator(src)
    assert q.query("sum(queue_depth)", 45) == [({}, 7.0)]
    assert q.query("sum(vllm:num_requests_waiting)", 45) == []
    assert q.query("count(vllm:num_requests_running)", 45) == []


def test_two_jobs_scrape_the_same_pod_twice() -> None:
    env, store, src = source_world(monitor(), monitor("ClusterPodMonitoring", name="all"))
    env.run(30)
    assert Evaluator(src).query("count by (job) (vllm:num_requests_waiting)", 20) == [
        ({"job": "all"}, 2.0), ({"job": "vllm"}, 2.0)]


# ---------------------------------------------------------------------------------- KEDA on an empty result
@pytest.mark.parametrize(("ignore", "want"), [("true", 0.0), ("false", None)])
def test_keda_reads_an_unscraped_series_as_0_or_an_error(ignore, want) -> None:
    """prometheus_scaler_test.go testPromQueryResult "no values" / "no values but shouldn't ignore"."""
    from kubetwin.autoscaler.keda import KedaController
    from kubetwin.store.events import EventRecorder

    env, store, src = source_world()
    keda = KedaController(store, env, EventRecorder(store), src)
    env.run(30)
    trig = SimpleNamespace(query="sum(vllm:num_requests_waiting)", ignore_null=ignore == "true")
    if want is None:
        with pytest.raises(ValueError, match="the result is empty"):
            keda._value("default", trig)  # type: ignore[arg-type]
    else:
        assert keda._value("default", trig) == want  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- validate
EXAMPLE = open("examples/keda-podmonitoring.yaml").read()  # noqa: SIM115


def _notices(text: str) -> list[str]:
    return [d.render() for d in validate(load_text(text, "f.yaml")) if d.severity != "error"]


def test_validate_names_the_query_nobody_scrapes() -> None:
    assert _notices(EXAMPLE) == []
    wrong = EXAMPLE.replace("""  selector:
    matchLabels: {app: vllm-llama3}
  endpoints:""", """  selector:
    matchLabels: {app: vllm}
  endpoints:""")
    assert wrong != EXAMPLE
    (notice,) = _notices(wrong)
    assert "vllm:num_requests_running, vllm:num_requests_waiting, which nothing scrapes" in notice
    assert "no PodMonitoring, ClusterPodMonitoring, PodMonitor or ServiceMonitor selects" in notice
    wrong_port = EXAMPLE.replace("  - port: metrics\n    interval: 15s", "  - port: http\n    interval: 15s")
    assert wrong_port != EXAMPLE and len(_notices(wrong_port)) == 1


def test_validate_follows_renames() -> None:
    renamed = EXAMPLE.replace("    interval: 15s\n", """    interval: 15s
    metricRelabeling:
    - {sourceLabels: [__name__], regex: "vllm:(.*)", targetLabel: __name__, replacement: "vllm_$1"}
""")
    found = _notices(renamed)
    assert len(found) == 1 and "leave no series of that name" in found[0], found
    fixed = renamed.replace("vllm:num_requests_running{", "vllm_num_requests_running{").replace(
        "vllm:num_requests_waiting{", "vllm_num_requests_waiting{")
    assert _notices(fixed) == []  # the new names are known (no "not exported" notice either)


def test_validate_warns_of_a_podmonitoring_the_operator_refuses() -> None:
    bad = EXAMPLE.replace("    interval: 15s\n", "    interval: 15s\n    metricRelabeling: "
                          "[{action: labeldrop, regex: cluster}]\n")
    found = [d for d in validate(load_text(bad, "f.yaml")) if d.severity == "warning"]
    assert len(found) == 1 and "would drop at least one of the protected labels" in found[0].message


def test_monitoring_objects_are_checked_against_their_crds() -> None:
    text = """apiVersion: monitoring.googleapis.com/v1
kind: PodMonitoring
metadata: {name: m, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  endpoints: [{port: metrics}]
---
apiVersion: monitoring.googleapis.com/v1
kind: PodMonitoring
metadata: {name: p, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  endpoints: [{port: metrics, interval: 30s}, {port: web, interval: 30s, proxyUrl: "proxy-host"}]
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: s, namespace: default}
spec:
  selector: {}
  endpoints: [{port: web, metricRelabelings: [{action: Bogus}]}]
"""
    errors = [(d.field, d.message) for d in validate(load_text(text, "f.yaml")) if d.severity == "error"]
    assert ("spec.endpoints[0].interval", "Required value") in errors, errors  # GMP v1 requires it
    # the CRD's rule isURL(self) && !self.matches('@') (Kubernetes' URLs CEL library: url.ParseRequestURI)
    assert any(f == "spec.endpoints[1].proxyUrl" for f, _ in errors), errors
    assert any(f == "spec.endpoints[0].metricRelabelings[0].action" and 'Unsupported value: "Bogus"' in e
               for f, e in errors), errors


# ------------------------------------------------------------------------------------------ the example, run
def test_the_example_scales_only_once_the_podmonitoring_selects_the_servers() -> None:
    """examples/keda-podmonitoring.yaml (docs/monitoring.md): before 90m nothing scrapes vLLM, KEDA reads 0 and the
    Deployment stays at 1 replica while requests queue; the PodMonitoring applied at 90m feeds the query and KEDA
    scales out."""
    from kubetwin.runner import run

    result = run(["examples/keda-podmonitoring.yaml"], duration="2h")
    replicas = [(t, o["spec"].get("replicas")) for t, _, _, o in result.history
                if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-llama3"]
    assert {r for t, r in replicas if t < 5400} == {1}
    assert max(r for t, r in replicas if t >= 5400) >= 2
    first = min(t for t, r in replicas if r >= 2)
    assert 5400 < first < 5400 + 120  # a scrape (15 s), a KEDA poll (15 s), the HPA's sync (15 s)
    active = [(t, c["status"]) for t, _, _, o in result.history if o["kind"] == "ScaledObject"
              for c in (o.get("status") or {}).get("conditions") or [] if c["type"] == "Active"]
    assert {s for t, s in active if 0 < t < 5400} <= {"False", "Unknown"}


def test_a_keda_rule_on_dcgm_gpu_utilization_scales_the_servers() -> None:
    """GKE's managed DCGM collection: every GPU pod's dcgm-exporter series, model servers' too, are in the twin's
    Prometheus for a KEDA query (scraped with or without monitoring objects); metrics.prom lists them once."""
    from kubetwin.runner import run

    text = EXAMPLE[:EXAMPLE.index("# What makes the rule work")] + EXAMPLE[EXAMPLE.index(
        "apiVersion: kubetwin.io/v1alpha1\nkind: RequestTrace"):]
    query = text[text.index("      query: >-"):text.index("      threshold:")]
    text = text.replace(query, '      query: avg(DCGM_FI_DEV_GPU_UTIL{namespace="default",container="vllm"})\n')
    text = text.replace('threshold: "24"', 'threshold: "50"').replace(
        "  - type: prometheus\n", "  - type: prometheus\n    metricType: Value\n")
    assert "DCGM_FI_DEV_GPU_UTIL" in text and "kind: PodMonitoring" not in text
    assert [d for d in validate(load_text(text, "f.yaml")) if d.severity != "error"] == []
    result = run(manifests=load_text(text, "f.yaml"), duration="40m")
    replicas = [o["spec"].get("replicas") for _, _, _, o in result.history if o["kind"] == "Deployment"]
    assert max(replicas) >= 2  # a busy GPU (kernel running ~100 % of the time) over a 50 % target
    prom = (result.metrics_text or b"").decode()
    servers = {ln.split('pod="')[1].split('"')[0] for ln in prom.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")}
    assert len([ln for ln in prom.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")]) == len(servers) >= 2


def test_a_kind_of_the_other_monitoring_group_is_refused_with_where_it_is_served() -> None:
    text = ("apiVersion: monitoring.googleapis.com/v1\nkind: PodMonitor\nmetadata: {name: x, namespace: default}\n"
            "spec: {selector: {}}\n")
    (d,) = validate(load_text(text, "f.yaml"))
    assert d.severity == "error" and d.message == 'no matches for kind "PodMonitor" in version ' \
        '"monitoring.googleapis.com/v1"'
    assert "monitoring.coreos.com/v1" in d.hint
