"""Hostile and malformed input: everything `kubetwin run` would reject is a `kubetwin validate` error with
file:line, object, field path and a fix, in the API server's words; no input reaches a traceback or takes unbounded
memory or time (issue 16)."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import kubetwin
from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import load_paths, load_text
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.validation.validate import validate

SRC = Path(kubetwin.__file__).resolve().parents[1]  # the kubetwin under test
POOL = ("apiVersion: kubetwin.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
        "spec: {machineType: n2-standard-8, nodeCount: 1}\n")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def job(ns: str = "default", container: str = "c", cpu: str = "1", extra: str = "", template_ann: str = "",
        spec_extra: str = "", limits: str = "") -> str:
    return textwrap.dedent(f"""\
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: j, namespace: "{ns}"}}
        spec:
          {(spec_extra or "completions: 1").replace(chr(10), chr(10) + " " * 10)}
          template:
            metadata:
              annotations: {{{template_ann}}}
            spec:
              restartPolicy: Never
              containers:
              - name: {container}
                image: x
                resources:
                  requests: {{cpu: "{cpu}", memory: 1Gi{extra}}}
                  limits: {{{limits}}}
        """)


def jobset(replicas: str = "1", job_spec: str = "completions: 1", pod_ann: str = "",
           container: str = "{name: c, image: x}") -> str:
    """A JobSet with one replicated Job (replicas on line 7) whose pod template has one container."""
    meta = f"          metadata:\n            annotations: {{{pod_ann}}}\n" if pod_ann else ""
    return ("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\nspec:\n  replicatedJobs:\n"
            f"  - name: w\n    replicas: {replicas}\n    template:\n      spec:\n        {job_spec}\n"
            f"        template:\n{meta}          spec:\n            restartPolicy: Never\n"
            f"            containers: [{container}]\n")


def errors(text: str) -> list:
    return [d for d in validate(load_text(text, "t.yaml")) if d.severity == "error"]


def bomb(levels: int = 9, fanout: int = 9) -> str:
    """The 14-line billion laughs, in an annotation."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: x", "  annotations:", '    a0: &a0 "lol"']
    for i in range(1, levels):
        lines.append(f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fanout) + "]")
    return "\n".join(lines) + "\n"


def _limited(code: str, mem_gib: int = 2, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run code in a subprocess capped at mem_gib of address space, so a bomb cannot take the machine down."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem_gib << 30, mem_gib << 30))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=cap, env={"PYTHONPATH": str(SRC)})


def test_alias_bomb_is_refused_as_go_yaml_does(tmp_path: Path) -> None:
    """9 levels of 9 aliases: go-yaml (sigs.k8s.io/yaml) fails "document contains excessive aliasing"; validate
    and run say so in bounded memory and time."""
    f = tmp_path / "bomb.yaml"
    f.write_text(bomb())
    assert len(f.read_text().splitlines()) < 20
    res = _limited(f"""
from kubetwin.cli.main import app
from typer.testing import CliRunner
for cmd in (["validate"], ["run", "--duration", "1m"]):
    r = CliRunner().invoke(app, [*cmd, {str(f)!r}])
    print(r.exit_code, r.output)
""")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("yaml: document contains excessive aliasing") == 2, res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_some_alias_use_is_fine() -> None:
    """Anchors reused a few times decode, as in go-yaml (the heuristic needs over 100 aliased of over 1000 nodes)."""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: &l {a: b, c: d}}\n"
            "spec: {nodeSelector: *l, containers: [{name: c, image: x}]}\n")
    [pod] = load_text(text)
    assert pod.obj["spec"]["nodeSelector"] == {"a": "b", "c": "d"} and not errors(text)
    small = bomb(3, 4)  # 1 + 4 + 16 + 64 values: no bomb
    assert load_text(small)[0].obj["metadata"]["annotations"]["a2"][0] == ["lol"] * 4


def test_documents_over_the_request_body_limit_are_refused() -> None:
    """A 10 MB namespace name: the API server reads at most 3 MiB per request (MaxRequestBodyBytes)."""
    with pytest.raises(KubetwinError, match="Request entity too large: limit is 3145728"):
        load_text(POOL + "---\n" + job(ns="a" * 10_000_000))


def test_object_over_etcds_limit_is_refused() -> None:
    big = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + "".join(
        f"  k{i}: {'v' * 1000}\n" for i in range(2000))
    with pytest.raises(KubetwinError, match="etcdserver: request is too large"):
        load_text(big)


def test_deep_nesting_and_nan_are_errors_not_tracebacks() -> None:
    deep = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: " + "[" * 500 + "]" * 500 + "\n"
    with pytest.raises(KubetwinError, match="exceeded max depth"):
        load_text(deep)
    with pytest.raises(KubetwinError, match="json: unsupported value: NaN"):
        load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nx: .nan\n")


def test_empty_file_and_folder_without_manifests(tmp_path: Path) -> None:
    """kubectl apply -f on nothing: "no objects passed to apply"."""
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    (tmp_path / "none").mkdir()
    for target in (tmp_path / "empty.yaml", tmp_path / "none"):
        res = CliRunner().invoke(app, ["validate", str(target)])
        assert res.exit_code == 1 and "no objects passed to apply" in res.output, res.output


def test_scenario_sample_interval_zero_and_negative_seed(tmp_path: Path) -> None:
    """sampleInterval 0s never ended a run with a serving workload; seed -1 died in the store's uid generation."""
    scen = "apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec: {sampleInterval: 0s}\n"
    [e] = errors(scen)
    assert e.field == "spec.sampleInterval" and e.line == 4 and "must be greater than 0" in e.message
    [e] = errors(scen.replace("sampleInterval: 0s", "seed: -1"))
    assert e.field == "spec.seed" and e.message == "Invalid value: -1: must be greater than or equal to 0"
    f = tmp_path / "s.yaml"
    f.write_text(POOL)
    res = CliRunner().invoke(app, ["run", str(f), "--seed", "-1", "--duration", "1m"])
    assert res.exit_code == 1 and "spec.seed: Invalid value: -1: must be greater than or equal to 0" in res.output
    assert "--seed -1" in res.output  # the diagnostic names the flag it came from
    assert res.exception is None or isinstance(res.exception, SystemExit)  # a clean exit, no traceback
    res = CliRunner().invoke(app, ["run", str(f), "--duration", "banana"])
    assert res.exit_code == 1 and "invalid duration 'banana'" in res.output


def test_a_flag_that_replaces_a_scenario_field_is_named_instead_of_the_file_line(tmp_path: Path) -> None:
    """--duration/--seed written into the file's Scenario: an error about them starts with the flag (the file's
    line no longer holds the value); errors about the Scenario's own fields still name file:line."""
    f = tmp_path / "s.yaml"
    f.write_text(POOL + "---\napiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
                 "spec: {duration: 1h, sampleInterval: 0s}\n")
    res = CliRunner().invoke(app, ["run", str(f), "--duration", "banana"])
    lines = [ln for ln in res.output.splitlines() if ": error: " in ln]
    assert any(ln.startswith("--duration banana: error: Scenario/s: spec.duration: invalid duration") for ln in lines)
    assert any(ln.startswith(f"{f}:") and "spec.sampleInterval" in ln for ln in lines), res.output
    assert not any(ln.startswith("-:") or " with --" in ln for ln in lines)


def test_names_in_the_api_servers_words() -> None:
    [e] = errors(POOL + "---\n" + job(ns="dé"))
    assert e.field == "metadata.namespace" and e.message == f'Invalid value: "dé": {LABEL_MSG}'
    [e] = errors(job(container="Bad_Name"))
    assert e.field == "spec.template.spec.containers[0].name" and LABEL_MSG in e.message
    long = errors(job(ns="n" * 64))
    assert [d.message.split(": ", 2)[-1] for d in long] == ["must be no more than 63 characters"]
    [e] = errors("apiVersion: " + "a" * 300 + "/v1\nkind: Foo\nmetadata: {name: x}\n")
    assert e.field == "apiVersion" and e.message.startswith('no matches for kind "Foo"') and len(e.message) < 300


def test_quantities_in_the_api_servers_words() -> None:
    base = "spec.template.spec.containers[0].resources"
    [e] = errors(job(cpu="-1"))
    assert (e.field, e.message) == (f"{base}.requests[cpu]", 'Invalid value: "-1": must be greater than or equal to 0')
    [e] = errors(job(cpu="1e30"))
    assert e.field == f"{base}.requests[cpu]" and "int64 milli-units" in e.message
    assert not errors(job(extra=", ephemeral-storage: 1e16"))  # 10 PB: counted in bytes, not milli-bytes
    [e] = errors(job(extra=", ephemeral-storage: 1e30"))
    assert e.field == f"{base}.requests[ephemeral-storage]" and "no more than 9223372036854775807 " in e.message
    frac = errors(job(extra=", nvidia.com/gpu: 500m", limits="nvidia.com/gpu: 500m"))
    assert {(d.field, d.message) for d in frac} == {
        (f"{base}.requests[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'),
        (f"{base}.limits[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer')}
    [e] = errors(job(cpu="2", limits="cpu: 1"))
    assert e.message == 'Invalid value: "2": must be less than or equal to cpu limit of 1'


def test_integer_fields_range_and_sign() -> None:
    deploy = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: REPLICAS\n"
              "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
              "    spec: {containers: [{name: c, image: x}]}\n")
    [e] = errors(deploy.replace("REPLICAS", str(-(2**63))))
    assert e.field == "spec.replicas" and "into Go struct field of type int32" in e.message
    [e] = errors(deploy.replace("REPLICAS", "-2"))
    assert e.message == "Invalid value: -2: must be greater than or equal to 0"
    [e] = errors(job(spec_extra="completions: 3000000000"))
    assert e.field == "spec.completions" and "int32" in e.message
    [e] = errors(job(spec_extra="parallelism: 2.5"))
    assert e.field == "spec.parallelism"
    cq = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
          "  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n"
          "      resources:\n      - {name: cpu, nominalQuota: -5}\n")
    [e] = errors(cq)
    assert e.field == "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert e.message == 'Invalid value: "-5": must be greater than or equal to 0'


def test_twin_annotations_are_validated_everywhere_the_twin_reads_them() -> None:
    """fail-after on a pod template, a JobSet's pod template duration and checkpoint-interval, a RequestTrace's
    create-at: a bad value used to crash the run."""
    [e] = errors(POOL + "---\n" + job(template_ann="kubetwin.io/fail-after: banana"))
    assert e.field == 'spec.template.metadata.annotations["kubetwin.io/fail-after"]' and e.line == 13
    assert "invalid duration 'banana'" in e.message and e.hint.startswith('e.g. kubetwin.io/fail-after: "20m"')
    text = jobset(pod_ann="kubetwin.io/duration: soon, kubetwin.io/checkpoint-interval: 0s")
    found = {(d.field, d.message.split(": ")[-1][:20]) for d in errors(text)}
    pre = "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
    assert {f for f, _ in found} == {f'{pre}["kubetwin.io/duration"]', f'{pre}["kubetwin.io/checkpoint-interval"]'}
    trace = ("apiVersion: kubetwin.io/v1alpha1\nkind: RequestTrace\nmetadata:\n  name: t\n  annotations: "
             "{kubetwin.io/create-at: later}\nspec: {format: generator, target: {kind: Service, name: s}, model: m, "
             "generator: {rate: 1, promptTokens: 10, outputTokens: 10}}\n")
    [e] = errors(trace)
    assert e.field == 'metadata.annotations["kubetwin.io/create-at"]' and e.line == 5


def test_misplaced_and_misspelt_annotations_are_notices() -> None:
    diags = validate(load_text(job(template_ann="kubetwin.io/duraton: 1h").replace(
        'namespace: "default"}', 'namespace: "default", annotations: {kubetwin.io/duration: 1h}}'), "t.yaml"))
    notes = {d.field: d for d in diags if d.severity == "notice"}
    typo = notes['spec.template.metadata.annotations["kubetwin.io/duraton"]']
    assert typo.hint == "did you mean kubetwin.io/duration?"
    assert "has no effect" in notes['metadata.annotations["kubetwin.io/duration"]'].message


def test_node_pool_min_above_max() -> None:
    [e] = errors("apiVersion: kubetwin.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
                 "  machineType: n2-standard-8\n  autoscaling: {minNodeCount: 5, maxNodeCount: 2}\n")
    assert e.field == "spec.autoscaling" and e.message == ("minNodeCount (5) must be less than or equal to "
                                                           "maxNodeCount (2)")


def test_twin_kind_errors_in_the_users_words() -> None:
    trace = ("apiVersion: kubetwin.io/v1alpha1\nkind: RequestTrace\nmetadata: {name: t}\nspec: {format: generator, "
             "target: x, model: m, generator: {rate: RATE, promptTokens: 10, outputTokens: 10}}\n")
    [e] = errors(trace.replace("RATE", "1"))
    assert "spec.target must be {kind: InferencePool|Service, name: NAME}" in e.message
    [e] = errors(trace.replace("target: x", "target: {kind: Service, name: s}").replace("RATE", "1.0e+88"))
    assert e.field == "spec.generator.rate" and "a twin limit" in e.message
    [e] = errors("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: 3.5\n")
    assert e.field == "metadata" and "metadata must be {name: NAME}" in e.message
    [e] = errors("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
                 "spec: {scoringStrategy: Most}\n")
    assert e.message == ('Unsupported value: "Most": supported values: "LeastAllocated", "MostAllocated"')
    [e] = errors("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec: {sampleIntervl: 1m}\n")
    assert e.hint.startswith("did you mean sampleInterval?")


def test_unknown_core_field_gets_the_closest_real_name() -> None:
    [e] = errors(job(spec_extra="paralelism: 2"))
    assert e.message == 'strict decoding error: unknown field "spec.paralelism"'
    assert e.hint.startswith("did you mean parallelism?")


def test_cpu_that_validate_accepts_runs(tmp_path: Path) -> None:
    """cpu 1e30 overflowed the node table in run; now validate refuses it, and a large valid request runs."""
    f = tmp_path / "big.yaml"
    f.write_text(POOL + "---\n" + job(cpu="9e12"))
    result = run([f], duration="10m")
    assert result.summary["pods"]["by_phase"].get("Pending") == 1


def test_get_nodes_on_a_plain_v1_node(tmp_path: Path) -> None:
    f = tmp_path / "node.yaml"
    f.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: plain}\n")
    run([f], out=tmp_path / "run", duration="1m")
    for args in (["get", "nodes"], ["get", "nodes", "-o", "wide"], ["describe", "node", "plain"]):
        res = CliRunner().invoke(app, [*args, "--run", str(tmp_path / "run")])
        assert res.exit_code == 0 and "plain" in res.output, (args, res.output)
        assert re.search(r"plain\s+NotReady", res.output) or "Name:" in res.output


def test_examples_load_as_yaml_load_reads_them() -> None:
    """Values constructed from the composed nodes (one parse) are what yaml.load gives."""
    files = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))
    assert len(files) > 10
    for f in files:
        docs = [d for d in yaml.load_all(f.read_text(), Loader=yaml.CSafeLoader) if d is not None]
        assert [m.obj for m in load_paths([f])] == docs, f


def test_jobset_integer_ranges_and_pod_templates() -> None:
    """A JobSet's int32 fields (replicas, the Job template's parallelism) and its pods' containers."""
    text = jobset(replicas="REPLICAS", container='{name: Bad_C, image: x, resources: {requests: {cpu: "-1"}}}')
    [e] = errors(text.replace("REPLICAS", "1.0e+30"))
    assert e.field == "spec.replicatedJobs[0].replicas" and e.message == (
        "Invalid value: 1e+30: json: cannot unmarshal number 1e+30 into Go struct field of type int32")
    pod = "spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
    assert {(d.field, d.message.split(": ")[-1][:30]) for d in errors(text.replace("REPLICAS", "1"))} == {
        (f"{pod}.name", LABEL_MSG.split(": ")[-1][:30]),
        (f"{pod}.resources.requests[cpu]", "must be greater than or equal ")}


def test_counts_that_would_never_finish_are_refused() -> None:
    """Found by the fuzzer: nodeCount 2^64 created nodes forever; parallelism 2^31-1 pods likewise."""
    [e] = errors("apiVersion: kubetwin.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
                 "spec: {machineType: n2-standard-8, nodeCount: 18446744073709551616}\n")
    assert e.field == "spec.nodeCount" and e.message.endswith("must be less than or equal to 1000")
    [e] = errors(job(spec_extra="parallelism: 2147483647"))
    assert e.field == "spec.parallelism" and "200,000 pods per cluster" in e.message
    [e] = errors(job(spec_extra="completionMode: Indexed\ncompletions: 200000\nparallelism: 100001"))
    assert e.message == ("Invalid value: 100001: must be less than or equal to 100000 when completion mode is "
                         "Indexed")


def test_twin_integers_are_int32() -> None:
    """Found by the fuzzer: sharedPrefix.promptsPerGroup 2^64 overflowed numpy in the run."""
    trace = ("apiVersion: kubetwin.io/v1alpha1\nkind: RequestTrace\nmetadata: {name: t}\nspec: {format: generator, "
             "target: {kind: Service, name: s}, model: m, generator: {rate: 1, sharedPrefix: {numGroups: 2, "
             "promptsPerGroup: 18446744073709551616, systemPromptLen: 10, questionLen: 10, outputLen: 10}}}\n")
    [e] = errors(trace)
    assert e.field == "spec.generator.sharedPrefix.promptsPerGroup"
    assert e.message == "Invalid value: 18446744073709551616: must be less than or equal to 2147483647"


def test_whole_floats_are_integers_as_the_api_server_reads_them(tmp_path: Path) -> None:
    """Found by the fuzzer: `nodeCount: 1.0` / `parallelism: 2.0` passed validate and crashed the run (range() of a
    float). YAMLToJSON writes float64 2.0 as JSON 2, so the API server stores the integer 2."""
    f = tmp_path / "floats.yaml"
    f.write_text(POOL.replace("nodeCount: 1", "nodeCount: 1.0") + "---\n" + job(
        spec_extra="completions: 2.0\nparallelism: 2.0", template_ann="kubetwin.io/duration: 1m"))
    [pool, j] = load_paths([f])
    assert pool.obj["spec"]["nodeCount"] == 1 and isinstance(j.obj["spec"]["parallelism"], int)
    result = run([f], duration="10m")
    assert result.summary["pods"]["by_phase"].get("Succeeded") == 2


def test_indexed_jobs_need_completions() -> None:
    """batch validation: "spec.completions: Required value: when completion mode is Indexed"; a JobSet's Jobs are
    Indexed by default (its webhook), so the same holds for their templates. The run crashed on both."""
    [e] = errors(job(spec_extra="completionMode: Indexed\nparallelism: 2"))
    assert (e.field, e.message) == ("spec.completions", "Required value: when completion mode is Indexed")
    [e] = errors(jobset(replicas="2", job_spec="parallelism: 2"))
    assert e.field == "spec.replicatedJobs[0].template.spec.completions"


def test_kind_must_be_a_name() -> None:
    """Found by the fuzzer: a kind that was a list, or an unknown kind of a known group with no metadata, was
    accepted with a notice and crashed the run."""
    [e] = errors("apiVersion: kueue.x-k8s.io/v1beta2\nkind: [a]\nmetadata: {name: x}\n")
    assert e.field == "kind" and "cannot unmarshal array into Go struct field TypeMeta.kind of type string" in e.message
    [e] = errors("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Clust\n")  # Kueue has no such kind (issue 31)
    assert e.field == "kind" and e.message == 'no matches for kind "Clust" in version "kueue.x-k8s.io/v1beta2"'
    [e] = errors("apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\n")  # a real one, not simulated
    assert e.field == "metadata.name" and e.message.startswith("Required value")


def test_truncated_templates_and_empty_list_items() -> None:
    """Found by the fuzzer: a Deployment cut off after `template:` and a pod with a bare `-` under volumes passed
    validate and crashed the run."""
    deploy = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 1\n"
              "  selector: {matchLabels: {a: b}}\n  template:\n")
    [e] = errors(deploy)
    assert (e.field, e.message) == ("spec.template.spec.containers", "Required value")
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n"
           "  volumes:\n  -\n")
    [e] = errors(pod)
    assert (e.field, e.line) == ("spec.volumes[0]", 7) and e.message.startswith("Required value")


def test_kueue_configuration_integers_are_not_strings() -> None:
    """Found by the fuzzer: `backoffLimitCount: !!str 3` was accepted and crashed Kueue's requeue at run time."""
    cfg = ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  timeout: 10m\n"
           "  requeuingStrategy: {timestamp: Eviction, backoffLimitCount: !!str 3}\n")
    [e] = errors(cfg)
    assert e.field == "waitForPodsReady.requeuingStrategy.backoffLimitCount" and "valid integer" in e.message


def test_more_fuzzer_findings() -> None:
    """A PodTemplate's unicode cpu crashed the ProvisioningRequest's simulation; an explicit `!!int` on a text
    value raised ValueError from the YAML constructor; a 400-digit training sequence-length overflowed the
    step-time model."""
    tmpl = ("apiVersion: v1\nkind: PodTemplate\nmetadata: {name: t}\ntemplate:\n  spec:\n    containers:\n"
            "    - {name: c, image: x, resources: {requests: {cpu: é}}}\n")
    [e] = errors(tmpl)
    assert e.field == "template.spec.containers[0].resources.requests[cpu]" and "quantities must match" in e.message
    with pytest.raises(KubetwinError, match="yaml: cannot decode a value as the type its tag names"):
        load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: !!int 10 apples}\n")
    train = job(template_ann="training.kubetwin.io/params: 8B, training.kubetwin.io/steps: '10', "
                "training.kubetwin.io/global-batch-size: '8', training.kubetwin.io/sequence-length: '" + "9" * 400
                + "'").replace("memory: 1Gi", "memory: 1Gi, nvidia.com/gpu: 1").replace(
                    "limits: {}", "limits: {nvidia.com/gpu: 1}")
    [e] = errors(train)
    assert "sequence-length" in e.field and "from 1 to 2147483647" in e.message


def test_typed_scalars_the_api_server_would_refuse_or_default() -> None:
    """Found by the fuzzer: NodePool `nodeCount: !!str 3` passed (pydantic coerced it) and crashed the node pool
    controller; a JobSet's `replicas: null` (the API server drops it and defaults 1) crashed the JobSet controller."""
    [e] = errors(POOL.replace("nodeCount: 1", "nodeCount: '3'"))
    assert (e.field, e.message) == ("spec.nodeCount", 'Invalid value: "3": must be an integer')
    [e] = errors(jobset(replicas="null"))
    assert (e.field, e.line) == ("spec.replicatedJobs[0].replicas", 7) and "defaults the field" in e.message


def test_a_diagnostic_without_a_file_starts_with_its_severity() -> None:
    from kubetwin.api.errors import Diagnostic

    assert Diagnostic("-", 0, "-", "", "no such thing", "try another").render() == \
        "error: no such thing\n    fix: try another"
    assert Diagnostic("", 0, "Pod/a", "spec", "bad").render() == "error: Pod/a: spec: bad"
    assert Diagnostic("f.yaml", 3, "-", "", "bad", severity="notice").render() == "f.yaml:3: notice: bad"
