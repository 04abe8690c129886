"""`kubetwin get / describe / version / api-resources` print what kubectl prints: one test per -o format and flag.

Expected shapes and words come from kubectl's own code and docs (kubernetes/kubectl@dee3483a pkg/cmd/get,
pkg/describe; kubernetes/cli-runtime@69e8693b pkg/printers; kubernetes/client-go@32ce75a7 util/jsonpath and its
jsonpath_test.go; https://kubernetes.io/docs/reference/kubectl/jsonpath/ and .../field-selectors/).
One small run (a CPU node, two L4 nodes, a Deployment, a Job, a Pod and a Pod that never fits) serves the module.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin.cli.main import app

SCENARIO = """\
apiVersion: kubetwin.io/v1alpha1
kind: Scenario
metadata: {name: kubectl-output}
spec: {duration: 3h, seed: 1, report: [summary]}
---
apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: gpu}
spec: {machineType: g2-standard-8, nodeCount: 2, zones: [us-central1-a], driverInstallDelay: 0s,
       accelerators: [{type: nvidia-l4, count: 1}]}
---
apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec: {machineType: e2-standard-4, nodeCount: 1, zones: [us-central1-a]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: default, labels: {team: ml}}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata: {labels: {app: train}, annotations: {kubetwin.io/duration: 1h}}
    spec:
      restartPolicy: Never
      containers: [{name: trainer, image: trainer, resources: {requests: {cpu: "2"}, limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: default, labels: {app: solo, tier: batch}, annotations: {kubetwin.io/duration: 30m}}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Namespace
metadata: {name: research}
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: research, labels: {app: huge}, annotations: {kubetwin.io/create-at: 10m}}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "4"}}}]
"""

# kubectl get's allowed formats, less kyaml and the Go templates the twin does not print (get_flags.go order)
FORMATS = "json,yaml,name,jsonpath,jsonpath-as-json,jsonpath-file,custom-columns,custom-columns-file,wide"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("kubectl")
    (tmp / "s.yaml").write_text(SCENARIO)
    res = CliRunner().invoke(app, ["run", str(tmp / "s.yaml"), "--out", str(tmp / "run")])
    assert res.exit_code == 0, res.output
    return tmp / "run"


def kt(run: Path, *args: str, code: int = 0, at: str | None = "20m"):
    """Invoke kubetwin with --run (and --at 20m: everything is running then); stdout and stderr apart."""
    extra = ["--run", str(run)] + (["--at", at] if at else [])
    res = CliRunner().invoke(app, [*args, *extra])
    assert res.exit_code == code, (args, res.output)
    return res.stdout, res.stderr


def table(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


# --- -o formats ---------------------------------------------------------------------------------------------------

def test_o_json_prints_a_v1_list_and_a_named_object_alone(run) -> None:
    out, _ = kt(run, "get", "pods", "-o", "json")
    doc = json.loads(out)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List" and doc["metadata"] == {"resourceVersion": ""}
    assert [p["metadata"]["name"] for p in doc["items"]][0] == "solo"
    assert out.startswith('{\n    "apiVersion": "v1",\n    "items": [')  # MarshalIndent, 4 spaces, sorted keys
    one = json.loads(kt(run, "get", "pod", "solo", "-o", "json")[0])
    assert one["kind"] == "Pod" and one["metadata"]["name"] == "solo"  # single item implied: no List


def test_o_yaml(run) -> None:
    out, _ = kt(run, "get", "jobs", "-o", "yaml")
    assert out.startswith("apiVersion: v1\nitems:\n- apiVersion: batch/v1\n")
    assert out.endswith("kind: List\nmetadata:\n  resourceVersion: ''\n")
    assert yaml.safe_load(kt(run, "get", "job", "train", "-o", "yaml")[0])["kind"] == "Job"


def test_o_name_is_kind_dot_group_slash_name(run) -> None:
    from kubetwin.cli.output import name_of

    assert kt(run, "get", "pods", "-o", "name")[0].splitlines()[0] == "pod/solo"
    assert kt(run, "get", "jobs", "-o", "name")[0] == "job.batch/train\n"
    assert kt(run, "get", "deploy", "-o", "name")[0] == "deployment.apps/web\n"
    assert name_of({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "x"}}) \
        == "workload.kueue.x-k8s.io/x"


def test_o_equals_attached_and_long_forms_are_the_same(run) -> None:
    want = kt(run, "get", "jobs", "-o", "name")[0]
    assert want == "job.batch/train\n"
    for args in (["-o=name"], ["-oname"], ["--output", "name"], ["--output=name"]):
        assert kt(run, "get", "jobs", *args)[0] == want, args


def test_unknown_o_is_an_error_listing_the_formats_in_kubectls_words(run) -> None:
    out, err = kt(run, "get", "pods", "-o", "tabel", code=1)
    assert out == ""
    assert err == f'error: unable to match a printer suitable for the output format "tabel", allowed formats are: ' \
                  f'{FORMATS}\n'
    assert "allowed formats are" in kt(run, "get", "pods", "-o", "go-template={{.kind}}", code=1)[1]


def test_o_wide_adds_ip_node_and_nominated_node(run) -> None:
    rows = table(kt(run, "get", "pods", "-o", "wide")[0])
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert rows[1][6].startswith("gke-kubetwin-cpu-") and rows[1][7] == "<none>" and rows[1][8] == "<none>"


def test_get_nodes_o_wide_has_kubectls_columns_then_the_twins(run) -> None:
    """printNode's wide columns in kubectl's order; the twin's nodes have no addresses and no OS, kernel or runtime
    in status.nodeInfo (run folders keep their node objects), so those read <none> / <unknown> as kubectl prints
    them; INSTANCE-TYPE and GPUS follow, added after kubectl's."""
    rows = table(kt(run, "get", "nodes", "-o", "wide")[0])
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                       "KERNEL-VERSION", "CONTAINER-RUNTIME", "INSTANCE-TYPE", "GPUS"]
    node = rows[1]
    assert node[0].startswith("gke-kubetwin-") and node[1] == "Ready" and node[2] == "<none>"
    assert node[4].startswith("v1.") and node[5:10] == ["<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    assert node[10] and node[11].isdigit()  # the pool's machine type and its allocatable GPUs
    # a Node that has them (an imported one): its addresses and nodeInfo, as kubectl reads them
    from datetime import UTC, datetime

    from kubetwin.cli.printers import table as printed

    full = {"metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP",
                                                                             "address": "10.128.0.7"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.5-gke.1000", "osImage": "Container-Optimized OS",
                                    "kernelVersion": "6.6.93+", "containerRuntimeVersion": "containerd://2.0.6"}}}
    assert printed("Node", [full], datetime(2026, 1, 1, 1, tzinfo=UTC), True)[1][4:10] == [
        "v1.33.5-gke.1000", "10.128.0.7", "<none>", "Container-Optimized OS", "6.6.93+", "containerd://2.0.6"]


def test_o_wide_counts_the_readiness_gates_that_are_true() -> None:
    """printPod: READINESS GATES is "<none>" without gates, else true conditions of the listed types / gates."""
    from datetime import UTC, datetime

    from kubetwin.cli.printers import table

    pod = {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"containers": [{"name": "c"}], "readinessGates": [{"conditionType": "a.io/ready"},
                                                                       {"conditionType": "b.io/ready"}]},
           "status": {"phase": "Running", "conditions": [{"type": "a.io/ready", "status": "True"},
                                                         {"type": "b.io/ready", "status": "False"}]}}
    rows = table("Pod", [pod], datetime(2026, 1, 1, 1, tzinfo=UTC), True)
    assert rows[1][-1] == "1/2"


def test_o_jsonpath_joins_results_with_spaces_and_adds_no_newline(run) -> None:
    out, _ = kt(run, "get", "pods", "-o", "jsonpath={.items[*].metadata.name}")
    assert re.fullmatch(r"solo train-\w+ train-\w+ web-\w+-\w+ web-\w+-\w+", out)
    assert kt(run, "get", "pod", "solo", "-o", "jsonpath={.metadata.labels}")[0] == '{"app":"solo","tier":"batch"}'
    assert kt(run, "get", "pod", "solo", "-o", "jsonpath=name={.metadata.name}")[0] == "name=solo"


def test_o_jsonpath_range_literals_filters_and_escaped_dots(run) -> None:
    tmpl = '{range .items[*]}{.metadata.name}{"\\t"}{.status.phase}{"\\n"}{end}'
    lines = kt(run, "get", "pods", "-A", "-o", f"jsonpath={tmpl}")[0].splitlines()
    assert lines[0] == "solo\tRunning" and lines[-1] == "huge\tPending" and len(lines) == 6  # by namespace, name
    pending = '{.items[?(@.status.phase=="Pending")].metadata.name}'
    assert kt(run, "get", "pods", "-A", "-o", f"jsonpath={pending}")[0] == "huge"
    node = kt(run, "get", "pods", "-o", 'jsonpath={.items[0].spec.nodeName}')[0]
    zone = "{.metadata.labels.topology\\.kubernetes\\.io/zone}"
    assert kt(run, "get", "node", node, "-o", f"jsonpath={zone}")[0] == "us-central1-a"


def test_o_jsonpath_errors_as_kubectl_words_them(run) -> None:
    assert kt(run, "get", "pods", "-o", "jsonpath={.items[", code=1)[1] == \
        "error: error parsing jsonpath {.items[, unterminated array\n"
    assert kt(run, "get", "pods", "-o", "jsonpath={.items", code=1)[1] == \
        "error: error parsing jsonpath {.items, unclosed action\n"
    assert kt(run, "get", "pods", "-o", "jsonpath={.items!}", code=1)[1] == \
        "error: error parsing jsonpath {.items!}, unrecognized character in action: U+0021 '!'\n"
    assert kt(run, "get", "pods", "-o", "jsonpath=", code=1)[1] == \
        "error: template format specified but no template given\n"


def test_o_jsonpath_as_json_prints_each_action_as_an_indented_array(run) -> None:
    out, _ = kt(run, "get", "jobs", "-o", "jsonpath-as-json={.items[*].metadata.name}")
    assert out == '[\n    "train"\n]\n'


def test_o_jsonpath_follows_client_go_test_cases() -> None:
    """client-go util/jsonpath/jsonpath_test.go TestJSONPath's storeData cases, as facts."""
    from kubetwin.cli.jsonpath import Template

    store = {"Name": "jsonpath", "Book": [
        {"Category": "reference", "Author": "Nigel Rees", "Title": "Sayings of the Centurey", "Price": 8.95},
        {"Category": "fiction", "Author": "Evelyn Waugh", "Title": "Sword of Honour", "Price": 12.99},
        {"Category": "fiction", "Author": "Herman Melville", "Title": "Moby Dick", "Price": 8.99}],
        "Bicycle": [{"Color": "red", "Price": 19.95, "IsNew": True},
                    {"Color": "green", "Price": 20.01, "IsNew": False}],
        "Labels": {"engieer": 10, "web/html": 15, "k8s-app": 20}, "Employees": {"jason": "manager", "dan": "clerk"}}
    cases = [("hello jsonpath", None, "hello jsonpath"), ("{[?(@<5)]}", [2, 6, 3, 7], "2 3"), ('{"{"}', None, "{"),
             ("{[1,3,4]}", [0, 1, 2, 3, 4], "1 3 4"), ("hello {.Name}", store, "hello jsonpath"),
             ("{$.Labels.web/html}", store, "15"), ("{.Labels.k8s-app}", store, "20"),
             ("{.Bicycle[*].Color}", store, "red green"),
             ('{range .Bicycle[*]}{ "{" }{ @.* }{ "} " }{end}', store, "{red 19.95 true} {green 20.01 false} "),
             ("{..Price}", store, "8.95 12.99 8.99 19.95 20.01"), ("{ .bools[-1] }", {"bools": [True, False]}, "false"),
             ("{ .integers[:4:2] }", {"integers": [1, 2, 3, 4]}, "1 3"), ("{ .floats }", {"floats": [1.0, 2.2]},
                                                                          "[1,2.2]")]
    assert [(text, Template(text).render(data)) for text, data, want in cases] == [(text, want) for text, _, want
                                                                                   in cases]


def test_o_custom_columns_prints_none_for_missing_and_rejects_a_bad_spec(run) -> None:
    out, _ = kt(run, "get", "pods", "-A", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,"
                                                   "GPU:.spec.containers[0].resources.limits.nvidia\\.com/gpu")
    rows = table(out)
    assert rows[0] == ["NAME", "NODE", "GPU"]
    assert rows[-1] == ["huge", "<none>", "4"]
    assert rows[1][0] == "solo" and rows[1][2] == "<none>"
    assert kt(run, "get", "pods", "-o", "custom-columns=NAME", code=1)[1] == \
        "error: unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>\n"
    assert kt(run, "get", "pods", "-o", "custom-columns=", code=1)[1] == \
        "error: custom-columns format specified but no custom columns given\n"


def test_o_custom_columns_file_and_jsonpath_file(run, tmp_path) -> None:
    (tmp_path / "cols").write_text("NAME          PHASE\n.metadata.name   .status.phase\n")
    assert table(kt(run, "get", "pods", "-A", "-o", f"custom-columns-file={tmp_path / 'cols'}")[0])[-1] == \
        ["huge", "Pending"]
    (tmp_path / "tmpl").write_text("{.metadata.name}")
    assert kt(run, "get", "job", "train", "-o", f"jsonpath-file={tmp_path / 'tmpl'}")[0] == "train"


# --- flags --------------------------------------------------------------------------------------------------------

def names(run: Path, *args: str) -> list[str]:
    return kt(run, "get", *args, "-o", "name")[0].split()


def test_selector_supports_every_operator(run) -> None:
    assert names(run, "pods", "-l", "app=solo") == ["pod/solo"]
    assert names(run, "pods", "--selector", "app==solo") == ["pod/solo"]
    assert len(names(run, "pods", "-l", "app!=web")) == 3  # solo and the two train pods
    assert names(run, "pods", "-l", "app in (solo,huge)", "-A") == ["pod/solo", "pod/huge"]
    assert len(names(run, "pods", "-l", "app notin (web,train)")) == 1
    assert names(run, "pods", "-l", "tier") == ["pod/solo"]
    assert len(names(run, "pods", "-l", "!tier")) == 4
    assert names(run, "pods", "-l", "app=solo,tier=batch") == ["pod/solo"]
    assert "unable to parse requirement" in kt(run, "get", "pods", "-l", "app in solo", code=1)[1]


def test_field_selector_on_pods_and_the_api_servers_errors(run) -> None:
    assert names(run, "pods", "-A", "--field-selector", "status.phase=Pending") == ["pod/huge"]
    assert len(names(run, "pods", "-A", "--field-selector", "status.phase!=Pending")) == 5
    node = kt(run, "get", "pod", "solo", "-o", "jsonpath={.spec.nodeName}")[0]
    assert "pod/solo" in names(run, "pods", "--field-selector", f"spec.nodeName={node}")
    assert names(run, "pods", "-A", "--field-selector", "spec.nodeName=") == ["pod/huge"]
    assert names(run, "pods", "-A", "--field-selector", "metadata.namespace==research,metadata.name=huge") == \
        ["pod/huge"]
    assert kt(run, "get", "pods", "--field-selector", "foo=bar", code=1)[1] == (
        'Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label selector "", field '
        'selector "foo=bar": field label not supported: foo\n')
    assert kt(run, "get", "deploy", "-l", "app=web", "--field-selector", "status.phase=Running", code=1)[1] == (
        'Error from server (BadRequest): Unable to find "apps/v1, Resource=deployments" that match label selector '
        '"app=web", field selector "status.phase=Running": "status.phase" is not a known field selector: only '
        '"metadata.name", "metadata.namespace"\n')


def test_sort_by_compares_quantities_by_amount_and_missing_fields_error(run) -> None:
    by_cpu = names(run, "pods", "--sort-by", ".spec.containers[0].resources.requests.cpu")
    assert by_cpu[:2] == ["pod/web-" + n.split("/web-")[1] for n in by_cpu[:2]]  # 500m < 1 < 2
    assert by_cpu[2] == "pod/solo" and by_cpu[3].startswith("pod/train-")
    assert names(run, "pods", "--sort-by", "{.metadata.name}")[0] == "pod/solo"
    assert kt(run, "get", "pods", "--sort-by", ".spec.nope", code=1)[1] == \
        'error: couldn\'t find any field with path "{.spec.nope}" in the list of objects\n'


def test_no_headers_and_show_labels(run) -> None:
    rows = table(kt(run, "get", "pods", "--no-headers")[0])
    assert rows[0][0] == "solo" and len(rows) == 5
    rows = table(kt(run, "get", "pods", "--show-labels", "-l", "app=solo")[0])
    assert rows[0][-1] == "LABELS" and rows[1][-1] == "app=solo,tier=batch"
    assert kt(run, "get", "pods", "--show-labels", "-o", "json", code=1)[1] == \
        "error: --show-labels option cannot be used with json printer\n"


def test_get_all_prints_each_kind_with_kind_prefixed_names(run) -> None:
    out, _ = kt(run, "get", "all")
    blocks = out.split("\n\n")
    assert [table(b)[1][0].split("/")[0] for b in blocks] == ["pod", "deployment.apps", "replicaset.apps",
                                                              "job.batch"]
    assert table(blocks[1])[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]


def test_kind_slash_name_and_several_kinds(run) -> None:
    out, _ = kt(run, "get", "pod/solo", "job/train")
    assert [r[0] for r in table(out) if r != [""]] == ["NAME", "pod/solo", "NAME", "job.batch/train"]
    assert kt(run, "get", "pod/solo", "-o", "json")[0].startswith('{\n    "apiVersion": "v1",\n    "kind": "Pod"')
    out, _ = kt(run, "get", "jobs,deployments")
    assert "job.batch/train" in out and "deployment.apps/web" in out
    assert "there is no need to specify a resource type" in kt(run, "get", "pods", "pod/solo", code=1)[1]
    assert kt(run, "get", "widgets", code=1)[1] == 'error: the server doesn\'t have a resource type "widgets"\n'


def test_not_found_names_the_resource_and_group(run) -> None:
    out, err = kt(run, "get", "pods", "solo", "nope", code=1)
    assert table(out)[1][0] == "solo"
    assert err == 'Error from server (NotFound): pods "nope" not found\n'
    assert kt(run, "get", "job", "nope", code=1)[1] == 'Error from server (NotFound): jobs.batch "nope" not found\n'
    assert kt(run, "get", "job", "nope", "-o", "json", code=1)[0] == ""


def test_no_resources_found_messages(run) -> None:
    assert kt(run, "get", "pods", "-n", "empty") == ("", "No resources found in empty namespace.\n")
    assert kt(run, "get", "pods", "-A", "-l", "app=nope") == ("", "No resources found\n")
    assert kt(run, "get", "nodes", "-l", "app=nope") == ("", "No resources found\n")
    assert kt(run, "get", "pods", "pod", "-A", code=1)[1] == \
        "error: a resource cannot be retrieved by name across all namespaces\n"
    assert json.loads(kt(run, "get", "pods", "-n", "empty", "-o", "json")[0])["items"] == []


def test_at_accepts_an_rfc3339_time_on_the_runs_clock(run) -> None:
    start = json.loads((run / "run.json").read_text())["startTime"]
    assert start == "2026-01-01T00:00:00Z"
    assert kt(run, "get", "pods", "-A", at="2026-01-01T00:05:00Z") == kt(run, "get", "pods", "-A", at="5m")
    assert names(run, "pods", "-A")[-1] == "pod/huge"  # created at 10m: present at 20m ...
    assert "pod/huge" not in kt(run, "get", "pods", "-A", "-o", "name", at="2026-01-01T00:09:59+00:00")[0]
    assert "before the run started" in kt(run, "get", "pods", at="2025-12-31T23:00:00Z", code=1)[1]


# --- describe -----------------------------------------------------------------------------------------------------

def test_describe_node_has_kubectls_sections_in_order(run) -> None:
    node = kt(run, "get", "pod", "solo", "-o", "jsonpath={.spec.nodeName}")[0]
    out, _ = kt(run, "describe", "node", node)
    heads = [line.split(":")[0] for line in out.splitlines() if line and not line[0].isspace()]
    assert heads == ["Name", "Roles", "Labels", "Annotations", "CreationTimestamp", "Taints", "Unschedulable",
                     "Conditions", "Addresses", "Capacity", "Allocatable", "System Info", "ProviderID",
                     "Non-terminated Pods", "Allocated resources", "Events"]
    assert re.search(r"\n  Type\s+Status\s+LastHeartbeatTime\s+LastTransitionTime\s+Reason\s+Message\n", out)
    assert re.search(r"\n  Ready\s+True\s+", out)
    assert re.search(r"Non-terminated Pods:\s+\(3 in total\)", out)
    assert re.search(r"\n  default\s+solo\s+1 \(\d+%\)\s+0 \(0%\)\s+0 \(0%\)\s+0 \(0%\)\s+20m\n", out)
    assert re.search(r"CreationTimestamp:\s+Thu, 01 Jan 2026 00:\d\d:\d\d \+0000\n", out)
    assert re.search(r"\n  Kubelet Version:\s+v1\.34", out)


def test_describe_job_and_deployment_in_kubectls_layout(run) -> None:
    job, _ = kt(run, "describe", "job", "train", at=None)
    assert re.search(r"\nCompletions:\s+2\n", job) and re.search(r"\nParallelism:\s+2\n", job)
    assert re.search(r"\nPods Statuses:\s+0 Active \(0 Ready\) / 2 Succeeded / 0 Failed\n", job) or \
        re.search(r"\nPods Statuses:\s+0 Active / 2 Succeeded / 0 Failed\n", job)
    assert re.search(r"\nPod Template:\n  Labels:\s+app=train\n  Annotations:\s+kubetwin.io/duration: 1h\n", job)
    assert re.search(r"\n   trainer:\n    Image:\s+trainer\n", job)
    assert re.search(r"\nStart Time:\s+Thu, 01 Jan 2026 00:00:00 \+0000\nCompleted At:\s+Thu, 01 Jan 2026 01:\d\d:\d\d "
                     r"\+0000\nDuration:\s+6\dm\n", job)
    dep, _ = kt(run, "describe", "deployment", "web")
    assert re.search(r"\nReplicas:\s+2 desired \| 2 updated \| 2 total \| 2 available \| 0 unavailable\n", dep)
    assert re.search(r"\nRollingUpdateStrategy:\s+25% max unavailable, 25% max surge\n", dep)
    assert re.search(r"\nNewReplicaSet:\s+web-\w+ \(2/2 replicas created\)\n", dep)
    assert "  Normal  ScalingReplicaSet" in dep


def test_describe_custom_resources_and_claims_use_the_generic_describer() -> None:
    """Workload (a CRD) and ResourceClaim have no kubectl describer: fields as indented Key: value lines."""
    from datetime import UTC, datetime

    from kubetwin.cli.describe import describe

    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {
        "name": "job-a", "namespace": "ml", "uid": "u1", "labels": {"x": "y"}},
        "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 2}]},
        "status": {"admission": {"clusterQueue": "cq"}}}
    text = describe(wl, [], datetime(2026, 1, 1, tzinfo=UTC))
    assert text.splitlines()[:6] == ["Name:         job-a", "Namespace:    ml", "Labels:       x=y",
                                     "Annotations:  <none>", "API Version:  kueue.x-k8s.io/v1beta2",
                                     "Kind:         Workload"]
    # one tabwriter over the whole text, as tabbedString: consecutive lines with a tab share the column
    assert "\nMetadata:\n  UID:  u1\nSpec:\n  Pod Sets:\n    Count:     2\n    Name:      main\n  Queue Name:  main\n" \
        in text
    assert text.endswith("\nStatus:\n  Admission:\n    Cluster Queue:  cq\nEvents:             <none>")
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "d"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    assert "\n      Exactly:\n        Device Class Name:  gpu.nvidia.com\n" in describe(claim, [], datetime.now(UTC))


def test_tabwriter_aligns_column_blocks_as_gos() -> None:
    from kubetwin.cli.output import tabwrite

    # consecutive lines sharing a column align; a line without tabs ends the block; the last cell is not padded
    assert tabwrite("a:\tb\nlonger:\tc\nx\nk:\tv", 0, 2) == "a:       b\nlonger:  c\nx\nk:  v"
    assert tabwrite("A\tB\nx\ty", 6, 3) == "A     B\nx     y"  # kubectl get's minimum width 6


# --- version, api-resources ---------------------------------------------------------------------------------------

def test_version_names_kubetwin_and_the_upstream_versions() -> None:
    res = CliRunner().invoke(app, ["version"])
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert lines[0] == "kubetwin Version: 0.1.0" and lines[1].startswith("Kubernetes Version: v1.34.0")
    assert any(line.startswith("Kueue Version: ") for line in lines)
    doc = json.loads(CliRunner().invoke(app, ["version", "-o", "json"]).stdout)
    assert doc["kubernetesVersion"]["gitVersion"] == "v1.34.0" and "kueue" in doc["upstream"]
    assert yaml.safe_load(CliRunner().invoke(app, ["version", "-o", "yaml"]).stdout) == doc
    assert CliRunner().invoke(app, ["version", "-o", "wide"]).exit_code == 1


def test_api_resources_lists_the_kind_registry_as_kubectl() -> None:
    res = CliRunner().invoke(app, ["api-resources"])
    rows = table(res.stdout)
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert ["pods", "po", "v1", "true", "Pod"] in rows
    assert ["clusterqueues", "cq", "kueue.x-k8s.io/v1beta2", "false", "ClusterQueue"] in rows
    col = res.stdout.splitlines()[0].index("APIVERSION")
    groups = [line[col:].split()[0].rpartition("/")[0] for line in res.stdout.splitlines()[1:]]
    assert groups == sorted(groups)  # by group, the core group first
    names_ = CliRunner().invoke(app, ["api-resources", "-o", "name", "--namespaced=false"]).stdout.split()
    assert "nodes" in names_ and "clusterqueues.kueue.x-k8s.io" in names_ and "pods" not in names_
    wide = table(CliRunner().invoke(app, ["api-resources", "-o", "wide"]).stdout)
    assert wide[0][-2:] == ["VERBS", "CATEGORIES"]
    assert next(r for r in wide if r[0] == "pods")[-1] == "all"


def test_a_table_of_whole_rows_is_aligned_as_the_tabwriter_aligns_it() -> None:
    """table_text's one-format-per-line path gives the tabwriter's text; a cell holding a tab or a line break goes
    through the tabwriter itself."""
    from kubetwin.cli.output import table_text, tabwrite

    rows = [["NAME", "STATUS", "AGE"], ["a", "Running", "5m"], ["a-much-longer-name", "", "12h"], ["b", "x", ""]]
    assert table_text(rows) == tabwrite("\n".join("\t".join(r) for r in rows), 6, 3)
    assert table_text(rows).splitlines()[1] == "a".ljust(18 + 3) + "Running".ljust(7 + 3) + "5m"
    odd = [["LAST SEEN", "MESSAGE"], ["5m", "two\nlines"], ["1s", "a\ttab"]]
    assert table_text(odd) == tabwrite("\n".join("\t".join(r) for r in odd), 6, 3)
