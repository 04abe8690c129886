"""Inputs the real API server refuses are refused by validate (and so by run) first, in the API server's words
(issue 31 item 5), and user text printed through rich stays literal (item 6)."""

from __future__ import annotations

import pytest

from kubetwin.api.loader import load_text
from kubetwin.validation.validate import validate


def _one(api_version: str, kind: str, extra: str = "spec: {}\n") -> list:
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\n{extra}"
    return validate(load_text(text, "f.yaml"))


# (apiVersion, the typo, the kind kubectl would have found): custom groups the twin ships CRDs for, custom groups
# it knows without a CRD, and built-in groups (kubectl's RESTMapper answers the same for each).
TYPOS = [
    ("kueue.x-k8s.io/v1beta1", "ClusterQueu", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueeu", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavour", "ResourceFlavor"),
    ("jobset.x-k8s.io/v1alpha2", "JobSett", "JobSet"),
    ("batch/v1", "Jbo", "Job"),
    ("batch/v1", "CronJobs", "CronJob"),
    ("apps/v1", "Deploymnet", "Deployment"),
    ("resource.k8s.io/v1", "DeviceClas", "DeviceClass"),
    ("resource.k8s.io/v1", "ResourceClaimTemplates", "ResourceClaimTemplate"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModl", "InferenceModel"),
    ("inference.networking.k8s.io/v1", "InferencePoo", "InferencePool"),
    ("keda.sh/v1alpha1", "ScaledObjekt", "ScaledObject"),
    ("keda.sh/v1alpha1", "ScaledJobs", "ScaledJob"),
    ("autoscaling.x-k8s.io/v1", "ProvisioningRequests", "ProvisioningRequest"),
    ("gateway.networking.k8s.io/v1", "HTTPRoutes", "HTTPRoute"),
    ("v1", "ConfigMp", "ConfigMap"),
]


@pytest.mark.parametrize(("api_version", "kind", "meant"), TYPOS)
def test_a_kind_its_group_does_not_have_is_refused_with_a_did_you_mean(api_version, kind, meant) -> None:
    diags = _one(api_version, kind)
    assert [d.severity for d in diags] == ["error"], [d.render() for d in diags]
    d = diags[0]
    assert d.field == "kind"
    assert d.message == f'no matches for kind "{kind}" in version "{api_version}"'
    assert f"did you mean {meant}?" in d.hint


@pytest.mark.parametrize(("api_version", "kind", "hint"), [
    # a known kind in a version its group does not serve: the hint names the served version
    ("leaderworkerset.x-k8s.io/v1alpha1", "LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1"),
    ("keda.sh/v1", "TriggerAuthentication", "keda.sh/v1alpha1"),
    ("batch/v2", "Job", "batch/v1"),
    ("apps/v1beta1", "Deployment", "apps/v1"),
    ("kueue.x-k8s.io/v1beta9", "ClusterQueue", "kueue.x-k8s.io/v1beta2"),
    ("jobset.x-k8s.io/v1", "JobSet", "jobset.x-k8s.io/v1alpha2"),
    # a kind in the wrong group: the hint names the group that has it
    ("v1", "Deployment", "apiVersion: apps/v1"),
    ("apps/v1", "Job", "apiVersion: batch/v1"),
    ("kueue.x-k8s.io/v1beta1", "JobSet", "apiVersion: jobset.x-k8s.io/v1alpha2"),
    ("batch/v1", "ClusterQueue", "apiVersion: kueue.x-k8s.io/v1beta2"),
    ("v1", "PriorityClass", "apiVersion: scheduling.k8s.io/v1"),
])
def test_a_known_kind_where_it_is_not_served_is_refused_naming_where_it_is(api_version, kind, hint) -> None:
    [d] = _one(api_version, kind)
    assert d.severity == "error" and d.message == f'no matches for kind "{kind}" in version "{api_version}"'
    assert hint in d.hint, d.hint


@pytest.mark.parametrize(("api_version", "kind"), [
    ("kueue.x-k8s.io/v1beta1", "MultiKueueCluster"), ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ("gateway.networking.k8s.io/v1", "Gateway"), ("inference.networking.x-k8s.io/v1alpha1", "InferencePoolImport"),
])
def test_real_kinds_the_twin_does_not_simulate_stay_notices(api_version, kind) -> None:
    [d] = _one(api_version, kind)
    assert d.severity == "notice" and "not simulated" in d.message


def test_a_kind_in_an_unknown_group_is_a_notice_naming_what_the_run_does() -> None:
    """Issue 31 item 5: unknown kinds in unknown groups stay notices (the cluster may have their CRD; the twin
    cannot know): stored as given, no effect on the run."""
    [d] = _one("example.com/v1", "Widget")
    assert d.severity == "notice", d.render()
    assert "Widget" in d.message and "example.com/v1" in d.message and "no effect on the run" in d.message


def test_a_kind_of_an_unknown_group_is_not_run_even_when_its_name_is_a_built_in_kind() -> None:
    """`example.com/v1` `Job` passes validate with the notice and the run creates nothing for it: the twin keys
    objects by kind, so storing it would run a batch/v1 Job nobody asked for."""
    from kubetwin.runner import run

    text = ("apiVersion: example.com/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
            "      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n---\n"
            "apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec: {duration: 5m}\n")
    diags = validate(load_text(text, "f.yaml"))
    assert [d.severity for d in diags] == ["notice"], [d.render() for d in diags]
    r = run(manifests=load_text(text, "f.yaml"))
    assert not [o for _, _, _, o in r.history if o["kind"] == "Job"]


@pytest.mark.parametrize(("api_version", "kind"), [
    ("vl", "Pod"),  # a core-group version typo
    ("app/v1", "Deployment"),  # a group without a dot is no CRD group: only built-in groups have none
    ("batch/v1", "Job/x"),  # not a kind name
])
def test_malformed_or_dotless_groups_stay_errors(api_version, kind) -> None:
    diags = _one(api_version, kind)
    assert [d.severity for d in diags] == ["error"], [d.render() for d in diags]


# Real kinds of groups GKE AI/ML manifests use that the twin ships no CRD for: stored with a notice (never refused),
# and a typo in those groups is refused with the closest kind, as for the groups the twin simulates.
REAL_UNSIMULATED = [  # LeaderWorkerSet left this list: its CRD ships (tests/test_lws.py); so did PodMonitoring,
    # ClusterPodMonitoring, PodMonitor and ServiceMonitor (tests/test_monitoring.py)
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("monitoring.googleapis.com/v1", "Rules"),
    ("cloud.google.com/v1", "BackendConfig"),  # ComputeClass left this list: its CRD ships (test_computeclass_crd)
    ("networking.gke.io/v1", "ManagedCertificate"),
    ("networking.gke.io/v1", "HealthCheckPolicy"),
    ("networking.gke.io/v1", "GCPBackendPolicy"),
    ("networking.gke.io/v1", "GCPGatewayPolicy"),
    ("networking.gke.io/v1beta1", "FrontendConfig"),
    ("autoscaling.x-k8s.io/v1alpha1", "CapacityBuffer"),
]


@pytest.mark.parametrize(("api_version", "kind"), REAL_UNSIMULATED)
def test_real_kinds_of_gke_and_ecosystem_groups_are_notices(api_version, kind) -> None:
    diags = _one(api_version, kind)
    assert [d.severity for d in diags] == ["notice"], [d.render() for d in diags]
    assert "not simulated" in diags[0].message


@pytest.mark.parametrize(("api_version", "kind", "meant"), [
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSett", "LeaderWorkerSet"),
    ("monitoring.coreos.com/v1", "ServiceMonitr", "ServiceMonitor"),
    ("monitoring.googleapis.com/v1", "PodMonitorin", "PodMonitoring"),
    ("cloud.google.com/v1", "ComputeClas", "ComputeClass"),
    ("networking.gke.io/v1", "Netwrk", "Network"),
    ("networking.gke.io/v1", "ManagedCertificat", "ManagedCertificate"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClas", "WorkloadPriorityClass"),
    ("resource.k8s.io/v1beta1", "ResourceClaimTemplte", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1beta2", "ResourceSlices", "ResourceSlice"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferencePol", "InferencePool"),
    ("apps/v1", "StatefullSet", "StatefulSet"),
    ("batch/v1", "Cronjob", "CronJob"),
])
def test_typos_in_every_known_group_are_refused(api_version, kind, meant) -> None:
    diags = _one(api_version, kind)
    assert [d.severity for d in diags] == ["error"], [d.render() for d in diags]
    assert diags[0].message == f'no matches for kind "{kind}" in version "{api_version}"'
    assert f"did you mean {meant}?" in diags[0].hint


# --- rich prints user text literally (issue 31 item 6: `file:100:` printed as an emoji) ---

HOSTILE_KEY = "[bold]x:100:"
POD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  '" + HOSTILE_KEY + "': 1\n"
       "  containers: [{name: c, image: i}]\n")


def test_validate_prints_a_diagnostic_with_emoji_codes_and_markup_literally(tmp_path) -> None:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    f = tmp_path / "pod.yaml"
    f.write_text(POD)
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 1
    assert f'unknown field "spec.{HOSTILE_KEY}"' in res.output, res.output
    assert "💯" not in res.output


@pytest.mark.parametrize("name", ["a:100:.yaml", "b[bold]c.yaml", "d:thumbs_up:[/]e.yaml"])
def test_a_refusal_naming_a_file_prints_the_name_as_written(tmp_path, name) -> None:
    """cli.output.fail (every command's refusal) and the summary's paths: no emoji, no markup, no swallowed
    brackets."""
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    res = CliRunner().invoke(app, ["validate", str(tmp_path / name)])
    assert res.exit_code == 1 and name in res.output, res.output


def test_every_cli_console_prints_text_as_given() -> None:
    """One place makes the CLI's consoles (cli.output.console): markup and emoji codes off, so a name, a path or
    a message is never read as rich syntax; the cli modules build no Console of their own."""
    import io
    import re
    from pathlib import Path

    import kubetwin.cli as cli
    from kubetwin.cli.output import console

    buf = io.StringIO()
    c = console(file=buf)
    c.print("file:100: [bold]x[/bold] [red]")
    assert buf.getvalue() == "file:100: [bold]x[/bold] [red]\n"
    offenders = [p.name for p in Path(cli.__file__).parent.glob("*.py")
                 if re.search(r"\bConsole\(", p.read_text()) and p.name != "output.py"]
    assert offenders == []


# --- get/describe/explain --at past the end of the run (item 5) ---

META = {"startTime": "2026-01-01T00:00:00Z", "duration": 6 * 3600.0}


@pytest.mark.parametrize("at", ["7h", "6h1s", "2026-01-01T06:00:01Z", "2026-01-02T00:00:00+00:00"])
def test_at_past_the_end_of_the_run_is_an_error(at) -> None:
    from kubetwin.api.errors import KubetwinError
    from kubetwin.report.rundir import seconds_at

    with pytest.raises(KubetwinError) as exc:
        seconds_at(META, at)
    [d] = exc.value.diagnostics
    assert d.file == "--at" and "the run ended at 6h (2026-01-01T06:00:00Z)" in d.message
    assert "--at 6h" in d.hint


@pytest.mark.parametrize(("at", "seconds"), [("6h", 21600.0), ("2026-01-01T06:00:00Z", 21600.0), ("0s", 0.0)])
def test_at_within_the_run_is_read(at, seconds) -> None:
    from kubetwin.report.rundir import seconds_at

    assert seconds_at(META, at) == seconds


def test_get_describe_explain_refuse_a_time_after_the_run(tmp_path) -> None:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app
    from kubetwin.runner import run

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    run(objects=[pod], out=tmp_path / "r", duration="1h")
    for args in (["get", "pods"], ["describe", "pod", "p"], ["explain", "pod", "p"]):
        res = CliRunner().invoke(app, [*args, "--run", str(tmp_path / "r"), "--at", "2h"])
        assert res.exit_code == 1 and "the run ended at 1h" in res.output, (args, res.output)


# --- objects in a Namespace that does not exist (item 5) ---

def _ns_doc(kind: str, ns: str) -> str:
    bodies = {
        "Pod": "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c, image: i}]}\n",
        "Job": ("apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n"
                "      containers: [{name: c, image: i}]\n"),
        "ConfigMap": "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
        "LocalQueue": "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nspec: {clusterQueue: cq}\n",
        "PersistentVolumeClaim": ("apiVersion: v1\nkind: PersistentVolumeClaim\nspec: {accessModes: [ReadWriteOnce], "
                                  "resources: {requests: {storage: 1Gi}}}\n"),
    }
    return bodies[kind] + f"metadata: {{name: x, namespace: {ns}}}\n"


NAMESPACED = ["Pod", "Job", "ConfigMap", "LocalQueue", "PersistentVolumeClaim"]


@pytest.mark.parametrize("kind", NAMESPACED)
def test_an_object_in_a_namespace_that_does_not_exist_is_refused(kind) -> None:
    diags = validate(load_text(_ns_doc(kind, "ml"), "f.yaml"))
    errs = [d for d in diags if d.severity == "error"]
    assert [(d.field, d.message) for d in errs] == [("metadata.namespace", 'namespaces "ml" not found')], \
        [d.render() for d in diags]
    assert "kind: Namespace" in errs[0].hint and "createMissingNamespaces" in errs[0].hint


@pytest.mark.parametrize("kind", NAMESPACED)
def test_a_namespace_object_in_the_manifests_makes_it_exist(kind) -> None:
    ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\n"
    for text in (ns + _ns_doc(kind, "ml"), _ns_doc(kind, "ml") + "---\n" + ns):  # in any order, as kubectl apply -f
        assert not [d for d in validate(load_text(text, "f.yaml")) if d.severity == "error"]


@pytest.mark.parametrize("ns", ["default", "kube-system", "kube-public", "kube-node-lease", "gmp-system",
                                "gmp-public"])
def test_the_namespaces_every_gke_cluster_has_need_no_object(ns) -> None:
    assert not [d for d in validate(load_text(_ns_doc("ConfigMap", ns), "f.yaml")) if d.severity == "error"]


def test_cluster_scoped_objects_have_no_namespace_to_check() -> None:
    text = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 10\n"
    assert validate(load_text(text, "f.yaml")) == []


def test_create_missing_namespaces_creates_them_with_a_notice(tmp_path) -> None:
    from kubetwin.runner import run

    scenario = ("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
                "spec: {duration: 10m, createMissingNamespaces: true}\n---\n")
    text = scenario + _ns_doc("Pod", "ml") + "---\n" + _ns_doc("ConfigMap", "team-a")
    diags = validate(load_text(text, "f.yaml"))
    assert [d.severity for d in diags] == ["notice"], [d.render() for d in diags]
    assert "creates the missing namespaces ml, team-a" in diags[0].message
    f = tmp_path / "s.yaml"
    f.write_text(text)
    result = run([f], out=tmp_path / "r")
    created = [o["metadata"]["name"] for _, _, _, o in result.history if o["kind"] == "Namespace"]
    assert created == ["default", "kube-system", "ml", "team-a"]
    assert any("creates the missing namespaces ml, team-a" in n for n in result.summary["notices"])


def test_run_and_its_python_api_refuse_a_missing_namespace() -> None:
    from kubetwin.api.errors import KubetwinError
    from kubetwin.runner import run

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "research"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    with pytest.raises(KubetwinError, match='namespaces "research" not found'):
        run(objects=[pod], duration="10m")
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}}
    run(objects=[ns, pod], duration="10m")


def test_a_builtin_namespace_an_object_uses_exists_in_the_run() -> None:
    from kubetwin.runner import run

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-public"}}
    result = run(objects=[cm], duration="10m")
    names = [o["metadata"]["name"] for _, _, _, o in result.history if o["kind"] == "Namespace"]
    assert names == ["default", "kube-system", "kube-public"]


# --- a queue-name label naming no LocalQueue (item 5) ---

def _kueue_objects(lq_ns: str = "default") -> list[dict]:
    from kueue_builders import make_cq, make_flavor, make_lq

    return [make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="8").obj(),
            make_lq("main", lq_ns).cluster_queue("cq").obj()]


def _queued(kind: str, queue: str, ns: str = "default") -> dict:
    from k8s_builders import make_job, make_pod

    if kind == "Job":
        return make_job("train", ns).queue(queue).obj()
    if kind == "Pod":
        return make_pod("solo", ns).label("kueue.x-k8s.io/queue-name", queue).obj()
    job = make_job("w").obj()
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job["spec"]}}]}}


def _validate_objects(objs: list[dict]) -> list:
    from kubetwin.api.loader import Manifest

    return validate([Manifest(o, "f.yaml", 0) for o in objs])


@pytest.mark.parametrize("kind", ["Job", "JobSet", "Pod"])
def test_a_queue_name_naming_no_local_queue_is_a_warning(kind) -> None:
    diags = [d for d in _validate_objects([*_kueue_objects(), _queued(kind, "mian")]) if d.severity != "notice"]
    assert [(d.severity, d.field) for d in diags] == [("warning", 'metadata.labels["kueue.x-k8s.io/queue-name"]')], \
        [d.render() for d in diags]
    assert "LocalQueue mian doesn't exist" in diags[0].message and "default" in diags[0].message
    assert "main" in diags[0].hint  # the closest LocalQueue of the namespace


@pytest.mark.parametrize("kind", ["Job", "JobSet", "Pod"])
def test_a_local_queue_in_another_namespace_does_not_count(kind) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    diags = _validate_objects([ns, *_kueue_objects("team"), _queued(kind, "main")])
    assert [d.severity for d in diags if d.severity != "notice"] == ["warning"]
    ok = _validate_objects([ns, *_kueue_objects("team"), _queued(kind, "main", "team")])
    assert [d.render() for d in ok if d.severity != "notice"] == []


@pytest.mark.parametrize("kind", ["Job", "JobSet", "Pod"])
def test_a_local_queue_naming_no_cluster_queue_is_a_warning(kind) -> None:
    """Kueue's LocalQueue reconciler sets Active False, ClusterQueueDoesNotExist, "Can't submit new workloads to
    clusterQueue" (kueue pkg/controller/core/localqueue_controller.go); the jobs queued there never start."""
    from kueue_builders import make_lq

    objs = [*_kueue_objects(), make_lq("typo", "default").cluster_queue("cqq").obj(), _queued(kind, "typo")]
    diags = [d for d in _validate_objects(objs) if d.severity != "notice"]
    assert [(d.severity, d.obj, d.field) for d in diags] == [("warning", "LocalQueue/default/typo",
                                                              "spec.clusterQueue")], [d.render() for d in diags]
    assert "ClusterQueue cqq does not exist" in diags[0].message and "ClusterQueueDoesNotExist" in diags[0].message
    assert "did you mean cq?" in diags[0].hint
    assert [d for d in _validate_objects([*_kueue_objects(), _queued(kind, "main")]) if d.severity != "notice"] == []


def test_the_headline_counts_workloads_that_waited_on_a_missing_local_queue() -> None:
    from k8s_builders import make_job, make_pool, make_scenario

    from kubetwin.report.headline import headline_rows
    from kubetwin.runner import run

    objs = [make_scenario("1h").obj(), make_pool("cpu", "e2-standard-16", 1).obj(), *_kueue_objects(),
            make_job("a").queue("mian").obj(), make_job("b").queue("mian").obj(), make_job("c").queue("main").obj()]
    result = run(objects=objs)
    assert result.summary["kueue_missing_local_queues"] == {"default/mian": 2}
    rows = dict(headline_rows(result.summary))
    assert rows["Kueue missing LocalQueue"] == "2 Workloads waited on a LocalQueue that does not exist (default/mian)"


def test_no_missing_local_queue_no_new_summary_key() -> None:
    from k8s_builders import make_job, make_pool, make_scenario

    from kubetwin.runner import run

    objs = [make_scenario("1h").obj(), make_pool("cpu", "e2-standard-16", 1).obj(), *_kueue_objects(),
            make_job("c").queue("main").obj()]
    assert "kueue_missing_local_queues" not in run(objects=objs).summary


# --- an HPA on a custom metric with no metrics adapter in the manifests (item 6) ---

PODS_METRIC = {"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_waiting"},
                                        "target": {"type": "AverageValue", "averageValue": "5"}}}
OBJECT_METRIC = {"type": "Object", "object": {
    "metric": {"name": "requests_per_second"}, "target": {"type": "Value", "value": "100"},
    "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "svc"}}}
EXTERNAL_METRIC = {"type": "External", "external": {
    "metric": {"name": "pubsub.googleapis.com|subscription|num_undelivered_messages"},
    "target": {"type": "AverageValue", "averageValue": "10"}}}


def _api_service(group: str) -> dict:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"v1beta1.{group}"},
            "spec": {"group": group, "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                     "service": {"name": "adapter", "namespace": "default"}}}


def _hpa(metric: dict) -> dict:
    from autoscaling_builders import horizontal_pod_autoscaler

    return horizontal_pod_autoscaler("hpa", "model").metrics([metric]).obj()


@pytest.mark.parametrize(("metric", "api", "name"), [
    (PODS_METRIC, "custom.metrics.k8s.io", "vllm:num_requests_waiting"),
    (OBJECT_METRIC, "custom.metrics.k8s.io", "requests_per_second"),
    (EXTERNAL_METRIC, "external.metrics.k8s.io", "pubsub.googleapis.com|subscription|num_undelivered_messages"),
])
def test_an_hpa_on_a_custom_metric_without_an_adapter_is_a_notice(metric, api, name) -> None:
    diags = [d for d in _validate_objects([_hpa(metric)]) if "adapter" in d.message]
    assert [(d.severity, d.obj, d.field) for d in diags] == [
        ("notice", "HorizontalPodAutoscaler/default/hpa", "spec.metrics[0]")], [d.render() for d in diags]
    assert name in diags[0].message and api in diags[0].message
    with_adapter = [d for d in _validate_objects([_hpa(metric), _api_service(api)]) if "adapter" in d.message]
    if api == "custom.metrics.k8s.io":  # the twin's Prometheus stands in for the cluster's adapter
        assert with_adapter == []
    else:  # the twin serves external metrics only through KEDA: the adapter is named as not simulated
        assert [d.severity for d in with_adapter] == ["notice"]
        assert "v1beta1.external.metrics.k8s.io" in with_adapter[0].message
        assert "FailedGetExternalMetric" in with_adapter[0].message


def test_resource_metrics_and_keda_need_no_adapter_notice() -> None:
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                      "averageUtilization": 60}}}
    assert not [d for d in _validate_objects([_hpa(cpu)]) if "adapter" in d.message]


def test_the_adapter_notice_is_repeated_in_the_run_summary() -> None:
    from k8s_builders import make_scenario

    from kubetwin.runner import run

    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "model", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "m"}}, "template": {
                  "metadata": {"labels": {"app": "m"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    result = run(objects=[make_scenario("10m").obj(), deploy, _hpa(PODS_METRIC)])
    assert any("custom.metrics.k8s.io" in n and "hpa" in n for n in result.summary["notices"])


def test_with_a_serving_data_plane_the_notice_names_the_twins_prometheus() -> None:
    from serving_builders import service, trace

    diags = [d for d in _validate_objects([service().obj(), trace().obj(), _hpa(PODS_METRIC)])
             if "adapter" in d.message]
    assert len(diags) == 1 and "reads the metric from its own Prometheus" in diags[0].message
    assert "FailedGetPodsMetric" in diags[0].message


def test_a_sweeps_base_scenario_in_a_missing_namespace_is_refused(tmp_path) -> None:
    import yaml

    from kubetwin.api.loader import load_paths

    (tmp_path / "base.yaml").write_text(_ns_doc("Pod", "ml"))
    f = tmp_path / "sweep.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Sweep", "metadata": {"name": "s"},
                                 "spec": {"scenario": ["base.yaml"], "axes": [
                                     {"name": "img", "object": "Pod/x", "path": "spec.containers[0].image",
                                      "values": ["a", "b"]}], "metrics": ["cost"]}}))
    errors = [d.message for d in validate(load_paths([f])) if d.severity == "error"]
    assert errors == ["the base scenario is invalid", 'namespaces "ml" not found']


@pytest.mark.parametrize(("ns_at", "obj_at", "refused"), [("30m", None, True), ("30m", "10m", True),
                                                          ("30m", "30m", False), ("10m", "1h", False),
                                                          (None, "5m", False)])
def test_an_object_created_before_its_namespace_is_refused(ns_at, obj_at, refused) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    if ns_at:
        ns["metadata"]["annotations"] = {"kubetwin.io/create-at": ns_at}
    if obj_at:
        pod["metadata"]["annotations"] = {"kubetwin.io/create-at": obj_at}
    errors = [d for d in _validate_objects([ns, pod]) if d.severity == "error"]
    if refused:
        assert [d.message for d in errors] == ['namespaces "ml" not found']
        assert f"the Namespace ml is created at {ns_at}" in errors[0].hint
    else:
        assert errors == []


def test_a_twin_kind_typo_names_the_closest_twin_kind() -> None:
    [d] = _one("kubetwin.io/v1alpha1", "NodePol")
    assert d.message == 'no matches for kind "NodePol" in version "kubetwin.io/v1alpha1"'
    assert d.hint.startswith("did you mean NodePool?")


def test_run_refuses_a_kind_typo_instead_of_admitting_nothing() -> None:
    from kueue_builders import make_cq

    from kubetwin.api.errors import KubetwinError
    from kubetwin.runner import run

    cq = make_cq("cq").flavor("default", cpu="8").obj()
    cq["kind"] = "ClusterQueu"
    with pytest.raises(KubetwinError, match='no matches for kind "ClusterQueu" in version "kueue.x-k8s.io/v1beta2"'):
        run(objects=[cq], duration="10m")


# --- namespaces as the API server scopes them ---

def _run(text: str):
    from kubetwin.runner import run

    scenario = "---\napiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec: {duration: 10m}\n"
    manifests = load_text(text + scenario, "f.yaml")
    assert not [d for d in validate(manifests) if d.severity == "error"]
    return run(manifests=manifests)


def _stored(result, kind: str) -> list[dict]:
    return [o for _, _, etype, o in result.history if o["kind"] == kind and etype == "ADDED"]


@pytest.mark.parametrize(("api_version", "kind", "extra"), [
    ("v1", "Secret", "stringData: {token: x}\n"),
    ("v1", "ServiceAccount", ""),
    ("v1", "ConfigMap", "data: {a: b}\n"),
    ("rbac.authorization.k8s.io/v1", "Role", "rules: []\n"),
    ("networking.k8s.io/v1", "NetworkPolicy", "spec: {podSelector: {}}\n"),
])
def test_every_namespaced_built_in_kind_in_a_missing_namespace_is_refused(api_version, kind, extra) -> None:
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x, namespace: ml}}\n{extra}"
    diags = [d for d in validate(load_text(text, "f.yaml")) if d.severity == "error"]
    assert [d.message for d in diags] == ['namespaces "ml" not found'], [d.render() for d in diags]


@pytest.mark.parametrize(("api_version", "kind", "extra"), [
    ("scheduling.k8s.io/v1", "PriorityClass", "value: 1000\n"),
    ("storage.k8s.io/v1", "StorageClass", "provisioner: pd.csi.storage.gke.io\n"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "rules: []\n"),
    ("kubetwin.io/v1alpha1", "NodePool", "spec: {machineType: n2-standard-8, nodeCount: 1}\n"),
])
def test_a_cluster_scoped_kind_given_a_namespace_is_stored_without_it(api_version, kind, extra) -> None:
    """The API server clears metadata.namespace of a cluster-scoped object on create (apiserver's
    rest.BeforeCreate: EnsureObjectNamespaceMatchesRequestNamespace with the cluster scope's empty namespace):
    no `namespaces "ml" not found`, and the object is found where cluster-scoped objects are."""
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x, namespace: ml}}\n{extra}"
    assert not [d for d in validate(load_text(text, "f.yaml")) if d.severity == "error"]
    r = _run(text)
    [obj] = _stored(r, kind)
    assert "namespace" not in obj["metadata"]
    if kind == "NodePool":
        assert len(_stored(r, "Node")) == 1


def test_a_dumped_terminating_namespace_is_created_active() -> None:
    """A Namespace object carries no deletion on create: BeforeCreate clears deletionTimestamp and the namespace
    strategy's PrepareForCreate sets status.phase Active (pkg/registry/core/namespace/strategy.go), so a dump's
    Terminating namespace takes new objects; SetDefaults_Namespace labels it kubernetes.io/metadata.name and the
    strategy adds the kubernetes finalizer."""
    r = _run("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml, deletionTimestamp: '2024-01-01T00:00:00Z'}\n"
             "status: {phase: Terminating}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ml}\n"
             "data: {x: '1'}\n")
    [ns] = [o for o in _stored(r, "Namespace") if o["metadata"]["name"] == "ml"]
    assert ns["status"] == {"phase": "Active"}
    assert "deletionTimestamp" not in ns["metadata"]
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ml"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert [o["metadata"]["namespace"] for o in _stored(r, "ConfigMap")] == ["ml"]


def test_objects_created_at_or_after_their_namespace_run() -> None:
    r = _run("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml, annotations: {kubetwin.io/create-at: 1m}}\n---\n"
             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: ml, annotations: "
             "{kubetwin.io/create-at: 1m}}\ndata: {x: '1'}\n")
    assert [o["metadata"]["name"] for o in _stored(r, "ConfigMap")] == ["b"]


def test_a_namespaced_kind_without_a_namespace_lands_in_default() -> None:
    r = _run("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}\n")
    assert [o["metadata"]["namespace"] for o in _stored(r, "Secret")] == ["default"]


NS_DELETED = """apiVersion: v1
kind: Namespace
metadata: {name: ml, annotations: {kubetwin.io/delete-at: 5m}}
---
apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: p}
spec: {machineType: n2-standard-8, nodeCount: 1, bootDelay: 0s}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ml}
spec:
  template:
    metadata: {annotations: {kubetwin.io/duration: 30m}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: 'busybox:1.36', resources: {requests: {cpu: '1'}}}]
"""


def test_an_object_created_after_its_namespace_is_deleted_is_refused() -> None:
    late = ("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: late, namespace: ml, annotations: "
            "{kubetwin.io/create-at: 10m}}\ndata: {a: b}\n")
    errors = [d for d in validate(load_text(NS_DELETED + late, "f.yaml")) if d.severity == "error"]
    assert [(d.obj, d.message) for d in errors] == [("ConfigMap/ml/late", 'namespaces "ml" not found')]
    assert "deleted at 5m" in errors[0].hint


def test_deleting_a_namespace_deletes_what_is_in_it() -> None:
    """The namespace controller deletes every object of a deleted namespace (pkg/controller/namespace/deletion):
    the Job and its running pod are gone at 5m, the Job never completes and its node is free."""
    r = _run(NS_DELETED)
    deleted = {(o["kind"], t) for t, _, etype, o in r.history if etype == "DELETED" and o["kind"] in ("Job", "Pod")}
    assert {k for k, _ in deleted} == {"Job", "Pod"} and {t for _, t in deleted} == {300.0}
    assert not [o for _, _, _, o in r.history if o["kind"] == "Job" and any(
        c["type"] == "Complete" for c in (o.get("status") or {}).get("conditions") or [])]


