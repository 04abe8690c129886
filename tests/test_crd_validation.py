"""CRD kinds are checked as an API server with the real CRDs installed checks them (kubetwin/api/crd.py).

Each case pins the API server's exact words (kube-openapi's texts, the CRD's own CEL messages; sources in
kubetwin/api/crd_schema.py and crd_cel.py) and the fix kubetwin adds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from kubetwin.api import crd, crd_cel, kinds
from kubetwin.api.kinds import crd_document, is_simulated
from kubetwin.api.loader import load_paths, load_text
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "reference"
INCOMPLETE = crd.INCOMPLETE


def _cq(version: str, spec: str) -> str:
    return f"apiVersion: kueue.x-k8s.io/{version}\nkind: ClusterQueue\nmetadata: {{name: cq}}\nspec:\n{spec}"


_GROUP = """  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 16%s}
      - {name: cpu, nominalQuota: 512}
"""
_PR = """apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: pr, namespace: ml}
spec:
  provisioningClassName: queued-provisioning.gke.io
  podSets:
"""
_JOBSET = """apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
%s  replicatedJobs:
  - name: workers
    replicas: 2
    %s
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: x%s}]
"""

CASES = [
    # (id, manifest, [(path, message)], expected fix of the first error or None)
    ("unknown-field-suggests",
     "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: ml}\n"
     "spec: {clusterQueueName: cq}\n",
     [("spec.clusterQueueName", 'strict decoding error: unknown field "spec.clusterQueueName"')],
     "did you mean spec.clusterQueue? rename clusterQueueName to clusterQueue, or remove it"),
    ("unknown-metadata-field",
     "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f, label: {a: b}}\n",
     [("metadata.label", 'strict decoding error: unknown field "metadata.label"')],
     "did you mean metadata.labels? rename label to labels, or remove it"),
    ("v1beta2-has-no-cohort", _cq("v1beta2", "  cohort: team\n"),
     [("spec.cohort", 'strict decoding error: unknown field "spec.cohort"')],
     "spec.cohort is a field of kueue.x-k8s.io/v1beta1 ClusterQueue, not of kueue.x-k8s.io/v1beta2: did you mean "
     "spec.cohortName? rename cohort to cohortName, or remove it"),
    ("v1beta1-has-no-cohortName", _cq("v1beta1", "  cohortName: team\n"),
     [("spec.cohortName", 'strict decoding error: unknown field "spec.cohortName"')],
     "spec.cohortName is a field of kueue.x-k8s.io/v1beta2 ClusterQueue, not of kueue.x-k8s.io/v1beta1: did you mean "
     "spec.cohort? rename cohortName to cohort, or remove it"),
    ("v1beta1-cohort-ok", _cq("v1beta1", "  cohort: team\n" + _GROUP % ", borrowingLimit: 4"), [], None),
    ("v1beta2-cohortName-ok", _cq("v1beta2", "  cohortName: team\n" + _GROUP % ", borrowingLimit: 4"), [], None),
    ("enum", _cq("v1beta2", "  queueingStrategy: FIFO\n"),
     [("spec.queueingStrategy", 'Unsupported value: "FIFO": supported values: "StrictFIFO", "BestEffortFIFO"'),
      ("", INCOMPLETE)],
     "use one of: StrictFIFO, BestEffortFIFO"),
    ("required", _PR + "  - {count: 1, podTemplateRef: {}}\n",
     [("spec.podSets[0].podTemplateRef.name", "Required value"), ("", INCOMPLETE)],
     "set spec.podSets[0].podTemplateRef.name"),
    ("required-spec", "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: pr}\n",
     [("spec", "Required value"), ("", INCOMPLETE)], "set spec"),
    ("borrowingLimit-without-cohort-v1beta2", _cq("v1beta2", _GROUP % ", borrowingLimit: 4"),
     [("spec", 'Invalid value: "object": borrowingLimit must be nil when cohort is empty')],
     "put the ClusterQueue in a cohort (v1beta1 spec.cohort, v1beta2 spec.cohortName) or remove borrowingLimit "
     "(the CRD requires: !has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
     "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true)"),
    ("borrowingLimit-without-cohort-v1beta1", _cq("v1beta1", _GROUP % ", borrowingLimit: 4"),
     [("spec", 'Invalid value: "object": borrowingLimit must be nil when cohort is empty')], None),
    ("flavors-vs-coveredResources", _cq("v1beta2", _GROUP % "" + "    - name: a100\n      resources:\n"
                                        "      - {name: nvidia.com/gpu, nominalQuota: 32}\n"),
     [("spec.resourceGroups[0]",
       'Invalid value: "object": flavors must have the same number of resources as the coveredResources')],
     "list every covered resource under each flavor's resources, in the coveredResources order (use nominalQuota: 0 "
     "for a resource a flavor does not offer) (the CRD requires: self.flavors.all(x, size(x.resources) == "
     "size(self.coveredResources)))"),
    ("reclaim-never-borrow-lowerpriority",
     _cq("v1beta1", "  preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}\n"),
     [("spec.preemption", 'Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never')],
     "set preemption.borrowWithinCohort.policy: Never, or reclaimWithinCohort: LowerPriority or Any (the CRD "
     "requires: !(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  "
     "self.borrowWithinCohort.policy != 'Never'))"),
    ("reclaim-any-borrow-lowerpriority-ok",
     _cq("v1beta1", "  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority}}\n"), [],
     None),
    ("int-or-string", _cq("v1beta2", _GROUP.replace("nominalQuota: 512", "nominalQuota: 0.5") % ""),
     [("spec.resourceGroups[0].flavors[0].resources[1].nominalQuota",
       'Invalid value: "number": spec.resourceGroups[0].flavors[0].resources[1].nominalQuota in body must be of '
       'type integer,string: "number"'), ("", INCOMPLETE)],
     'write spec.resourceGroups[0].flavors[0].resources[1].nominalQuota as an integer or a quoted quantity such as '
     '"0.5", "500m" or "2048Gi"'),
    ("quantity-pattern", _cq("v1beta2", _GROUP.replace("nominalQuota: 512", "nominalQuota: lots") % ""),
     [("spec.resourceGroups[0].flavors[0].resources[1].nominalQuota",
       "Invalid value: \"lots\": spec.resourceGroups[0].flavors[0].resources[1].nominalQuota in body should match "
       "'^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|"
       "(\\.[0-9]+))))?$'")],
     "write a Kubernetes quantity such as 16, 500m or 2048Gi"),
    ("list-map-duplicate", _cq("v1beta2", _GROUP % "" + "    - name: h100\n      resources:\n"
                               "      - {name: nvidia.com/gpu, nominalQuota: 32}\n"
                               "      - {name: cpu, nominalQuota: 1}\n"),
     [("spec.resourceGroups[0].flavors[1]", 'Duplicate value: map[string]interface {}{"name":"h100"}')],
     "remove the duplicate: each item of spec.resourceGroups[0].flavors needs a unique name"),
    ("too-long", _cq("v1beta2", f"  cohortName: {'a' * 254}\n"),
     [("spec.cohortName", "Too long: may not be more than 253 bytes"), ("", INCOMPLETE)],
     "shorten it to at most 253 characters"),
    ("missing-version", "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\n",
     [("apiVersion", 'no matches for kind "ClusterQueue" in version "kueue.x-k8s.io/v1alpha1"')],
     "use a served version: kueue.x-k8s.io/v1beta1 (deprecated), kueue.x-k8s.io/v1beta2"),
    ("jobset-bad-field", _JOBSET % ("", "replica: 3", ""),
     [("spec.replicatedJobs[0].replica", 'strict decoding error: unknown field "spec.replicatedJobs[0].replica"')],
     "did you mean spec.replicatedJobs[0].replicas? rename replica to replicas, or remove it"),
    ("jobset-startup-vs-dependsOn",
     _JOBSET % ("  startupPolicy: {startupPolicyOrder: InOrder}\n", "dependsOn: [{name: leader, status: Ready}]", ""),
     [("spec", 'Invalid value: "object": StartupPolicy and DependsOn APIs are mutually exclusive')],
     "the CRD requires: !(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
     "self.replicatedJobs.exists(x, has(x.dependsOn)))"),
    ("jobset-pod-template-list-map", _JOBSET % ("", "", ", ports: [{containerPort: 80}, {containerPort: 80}]"),
     [("spec.replicatedJobs[0].template.spec.template.spec.containers[0].ports[1]",
       'Duplicate value: map[string]interface {}{"containerPort":80, "protocol":"TCP"}')], None),
    ("jobset-ok", _JOBSET % ("", "", ""), [], None),
    ("provreq-too-many-podsets",
     _PR + "".join(f"  - {{count: 1, podTemplateRef: {{name: t{i}}}}}\n" for i in range(33)),
     [("spec.podSets", "Too many: 33: must have at most 32 items"), ("", INCOMPLETE)], "list at most 32 items"),
    ("provreq-count-0", _PR + "  - {count: 0, podTemplateRef: {name: t}}\n",
     [("spec.podSets[0].count",
       "Invalid value: 0: spec.podSets[0].count in body should be greater than or equal to 1")], "use a value >= 1"),
    ("provreq-no-podsets", _PR.replace("podSets:\n", "podSets: []\n"),
     [("spec.podSets", "Invalid value: 0: spec.podSets in body should have at least 1 items")],
     "list at least 1 item(s)"),
    ("cel-runtime-error", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\n"
     "spec: {topologyName: default}\n",
     [("spec", 'Invalid value: "object": no such key: nodeLabels evaluating rule: at least one nodeLabel is required '
       "when topology is set")], None),
    ("transition-rules-skipped", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: t}\n"
     "spec: {levels: [{nodeLabel: cloud.google.com/gke-nodepool}, {nodeLabel: kubernetes.io/hostname}]}\n", [], None),
    ("inference-pool-unique-ports", "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\n"
     "metadata: {name: p}\nspec: {selector: {matchLabels: {app: vllm}}, targetPorts: [{number: 8000}, "
     "{number: 8000}]}\n",
     [("spec.targetPorts", 'Invalid value: "array": port number must be unique')], None),
    ("inference-model-weights", "apiVersion: inference.networking.x-k8s.io/v1alpha2\nkind: InferenceModel\n"
     "metadata: {name: m}\nspec: {modelName: m, poolRef: {name: p}, targetModels: [{name: a, weight: 1}, {name: b}]}\n",
     [("spec.targetModels", 'Invalid value: "array": Weights should be set for all models, or none of the models.')],
     None),
    ("maximum-as-go-prints-it", "apiVersion: inference.networking.x-k8s.io/v1alpha2\nkind: InferenceModel\n"
     "metadata: {name: m}\nspec: {modelName: m, poolRef: {name: p}, targetModels: [{name: a, weight: 2000000}]}\n",
     [("spec.targetModels[0].weight", "Invalid value: 2000000: spec.targetModels[0].weight in body should be less "
       "than or equal to 1e+06")], "use a value <= 1000000"),
    ("bad-value-types", _cq("v1beta2", "  resourceGroups: 5\n  preemption: [Never]\n"),
     [("spec.resourceGroups", 'Invalid value: "integer": spec.resourceGroups in body must be of type array: '
       '"integer"'),
      ("spec.preemption", 'Invalid value: "array": spec.preemption in body must be of type object: "array"'),
      ("", INCOMPLETE)], "write spec.resourceGroups as an array"),
]


@pytest.mark.parametrize("text, expected, fix", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_crd_cases(text: str, expected: list, fix: str | None) -> None:
    errors = crd.check(yaml.safe_load(text))
    assert [(e.path, e.message) for e in errors] == expected
    if fix is not None:
        assert errors[0].hint == fix


def test_defaults_are_applied_as_the_api_server_does() -> None:
    obj = yaml.safe_load(_cq("v1beta2", "  cohortName: null\n  fairSharing: {}\n" + _GROUP % ""))
    out = crd.apply_defaults(obj)
    assert out is not obj and "queueingStrategy" not in obj["spec"]  # a new dict; the input is untouched
    spec = out["spec"]
    assert "cohortName" not in spec  # a non-nullable null is pruned
    assert spec["queueingStrategy"] == "BestEffortFIFO" and spec["stopPolicy"] == "None"
    assert spec["preemption"] == {"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Never",
                                  "withinClusterQueue": "Never"}
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert spec["fairSharing"] == {"weight": 1}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert crd.apply_defaults(pod) == pod and crd.apply_defaults(pod) is not pod


def test_validation_runs_on_the_defaulted_object() -> None:
    """preemption defaults reclaimWithinCohort to Never, so borrowWithinCohort LowerPriority alone is rejected."""
    errors = crd.check(yaml.safe_load(_cq("v1beta1", "  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n")))
    assert [(e.path, e.message) for e in errors] == [
        ("spec.preemption", 'Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never')]


SYNTHETIC = {"type": "object", "properties": {"spec": {
    "type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
    "x-kubernetes-validations": [
        {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' > max ' + "
         "string(self.max)", "fieldPath": ".min"},
        {"rule": "self.min != 7", "reason": "FieldValueForbidden", "message": "7 is taken"},
        {"rule": "self.max != 9", "reason": "FieldValueDuplicate", "message": "9 again"},
        {"rule": "self.max != 8", "reason": "FieldValueRequired", "messageExpression": "''", "message": " eight "},
        {"rule": "self.max != 5"},
        {"rule": "self.min == oldSelf.min", "message": "immutable"}]}}}


@pytest.mark.parametrize("spec, expected", [
    ({"min": 3, "max": 2}, [("spec.min", 'Invalid value: "object": min 3 > max 2')]),
    ({"min": 7, "max": 9}, [("spec", "Forbidden: 7 is taken"), ("spec", 'Duplicate value: "object"')]),
    ({"min": 1, "max": 8}, [("spec", "Required value: eight")]),
    ({"min": 1, "max": 5}, [("spec", 'Invalid value: "object": failed rule: self.max != 5')]),
    ({"min": 1, "max": 2}, []),
])
def test_message_expression_reason_and_field_path(spec: dict, expected: list) -> None:
    """No shipped CRD uses messageExpression/reason/fieldPath yet (checked below), so a synthetic schema pins them."""
    errors = crd_cel.check({"spec": spec}, SYNTHETIC)
    assert [(e.path, e.message) for e in errors] == expected


@pytest.mark.slow
def test_every_shipped_rule_compiles_and_the_file_table_matches_the_files() -> None:
    folder = ROOT / "src" / "kubetwin" / "api" / "crds"
    seen = {}
    for f in sorted(folder.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        seen[(doc["spec"]["group"], doc["spec"]["names"]["kind"], f.name)] = doc
    assert {(g, k, f) for (g, k), (f, *_) in kinds.CRDS.items()} <= set(seen)
    rules = []

    def walk(node: dict) -> None:
        rules.extend(node.get("x-kubernetes-validations") or [])
        for sub in [*(node.get("properties") or {}).values(), node.get("items"), node.get("additionalProperties")]:
            if isinstance(sub, dict):
                walk(sub)
    for doc in seen.values():
        for v in doc["spec"]["versions"]:
            walk(v["schema"]["openAPIV3Schema"])
    assert len(rules) >= 30
    for rule in rules:
        assert not {"fieldPath"} & set(rule)  # GMP's rules carry messageExpression and reason (crd_cel reads both)
        if "oldSelf" not in rule["rule"]:
            crd_cel.compile_rule(rule["rule"])
        if rule.get("messageExpression"):
            crd_cel.compile_rule(rule["messageExpression"])


def test_seed_kueue_objects_and_the_corrected_seed(tmp_path: Path) -> None:
    diags = validate(load_paths([ROOT / "examples" / "seed-as-written.yaml"]))
    kueue = [(d.line, d.field, d.message, d.hint) for d in diags if d.severity == "error"
             and d.obj.split("/")[0] in ("ClusterQueue", "LocalQueue")]
    assert kueue == [
        (101, "spec.resourceGroups[0]",
         'Invalid value: "object": flavors must have the same number of resources as the coveredResources',
         "list every covered resource under each flavor's resources, in the coveredResources order (use "
         "nominalQuota: 0 for a resource a flavor does not offer) (the CRD requires: self.flavors.all(x, "
         "size(x.resources) == size(self.coveredResources)))"),
        (122, "spec.clusterQueueName", 'strict decoding error: unknown field "spec.clusterQueueName"',
         "did you mean spec.clusterQueue? rename clusterQueueName to clusterQueue, or remove it")]
    if not (SHARED / "seed-manifests-corrected.yaml").exists():
        pytest.skip(f"the corrected seed is under {SHARED}, which this checkout does not have beside it")
    # with the Namespaces it uses (gpu-operator, nlp-team), which it does not define
    corrected = validate(load_paths([ROOT / "tests" / "data" / "seed-corrected-namespaces.yaml",
                                     SHARED / "seed-manifests-corrected.yaml"]))
    assert [d.render() for d in corrected if d.severity == "error"] == []
    assert [d.obj for d in corrected if d.severity == "notice" and "not simulated" not in d.message] == []


def test_manifest_diagnostics_name_and_deprecation_and_no_traceback() -> None:
    text = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: Bad_Name}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: ok}\nspec:\n"
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [null, 3, {name: f, resources: {}}]\n")
    diags = validate(load_text(text, "x.yaml"))
    got = [(d.line, d.severity, d.field, d.message) for d in diags]
    assert got[:2] == [
        (1, "notice", "apiVersion", "Warning: This version is deprecated. Use v1beta2 instead."),
        (3, "error", "metadata.name", 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of '
         "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")]
    assert got[2:] == [
        (11, "error", "spec.resourceGroups[0].flavors[0]", 'Invalid value: "null": spec.resourceGroups[0].flavors[0] '
         'in body must be of type object: "null"'),
        (11, "error", "spec.resourceGroups[0].flavors[1]", 'Invalid value: "integer": '
         'spec.resourceGroups[0].flavors[1] in body must be of type object: "integer"'),
        (11, "error", "spec.resourceGroups[0].flavors[2].resources", 'Invalid value: "object": '
         'spec.resourceGroups[0].flavors[2].resources in body must be of type array: "object"'),
        (5, "notice", "", INCOMPLETE)]


@pytest.mark.parametrize("text, expected", [
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: [a]\n",
     [("error", "metadata", 'Invalid value: "array": metadata in body must be of type object: "array"'),
      ("notice", "", INCOMPLETE)]),
    ("apiVersion: kueue.x-k8s.io\nkind: Cohort\nmetadata: {name: a}\n",
     [("error", "apiVersion", 'no matches for kind "Cohort" in version "kueue.x-k8s.io"')]),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nspec: {resourceGroups: [{flavors: 5}]}\n",
     [("error", "metadata.name", "Required value: name or generateName is required"),
      ("error", "spec.resourceGroups[0].coveredResources", "Required value"),
      ("error", "spec.resourceGroups[0].flavors", 'Invalid value: "integer": spec.resourceGroups[0].flavors in body '
       'must be of type array: "integer"'), ("notice", "", INCOMPLETE)]),
    # a map where a list belongs: the API server prunes its keys, so strict decoding names them
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: a}\n"
     "spec: {resourceGroups: [{flavors: {a: 1}}]}\n",
     [("error", "spec.resourceGroups[0].flavors.a",
       'strict decoding error: unknown field "spec.resourceGroups[0].flavors.a"')]),
])
def test_malformed_objects_are_diagnostics_not_tracebacks(text: str, expected: list) -> None:
    assert [(d.severity, d.field, d.message) for d in validate(load_text(text, "m.yaml"))] == expected


@pytest.mark.parametrize("api_version, kind, group_name", [
    ("kueue.x-k8s.io/v1beta2", "Cohort", "Kueue"), ("kueue.x-k8s.io/v1beta2", "AdmissionCheck", "Kueue"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective", "Gateway API Inference Extension")])
def test_valid_crd_object_keeps_the_not_simulated_notice(api_version: str, kind: str, group_name: str) -> None:
    """Valid objects: no errors, and the notice while the kind is not simulated (api/kinds.py)."""
    spec = {"AdmissionCheck": "spec: {controllerName: kueue.x-k8s.io/provisioning-request}\n",
            "InferenceObjective": "spec: {priority: -1, poolRef: {name: pool}}\n"}.get(kind, "")
    diags = validate(load_text(f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: a}}\n{spec}",
                               "c.yaml"))
    expected = [] if is_simulated(api_version, kind) else [
        f"{group_name} kind {kind} ({api_version}) is accepted but not simulated yet: it is stored and has no effect "
        "on the run"]
    assert [d.message for d in diags] == expected


@pytest.mark.slow
def test_a_thousand_cluster_queues_validate_quickly() -> None:
    one = _cq("v1beta2", "  cohortName: all\n" + _GROUP % ", borrowingLimit: 4").replace("name: cq", "name: cq-{i}")
    manifests = load_text("---\n".join(one.replace("{i}", str(i)) for i in range(1000)), "many.yaml")
    validate(manifests[:1])
    misses = crd_cel.compile_rule.cache_info().misses
    start = time.perf_counter()
    diags = validate(manifests)
    elapsed = time.perf_counter() - start
    assert not [d for d in diags if d.severity == "error"]
    assert crd_cel.compile_rule.cache_info().misses == misses  # every rule compiled once, before
    assert elapsed < 2.0, elapsed  # about 0.2 s on a laptop core


def test_the_jobset_crd_is_parsed_only_when_a_jobset_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "REGISTRY", kinds.default_registry())
    crd_document.cache_clear()
    crd.check(yaml.safe_load(_cq("v1beta2", "  cohortName: all\n")))
    assert crd_document.cache_info().currsize == 1
    crd.check(yaml.safe_load(_JOBSET % ("", "", "")))
    assert crd_document.cache_info().currsize == 2


def test_jobset_webhook_defaults_run_before_the_crd_rules() -> None:
    """The API server runs JobSet's mutating webhook (it names failurePolicy rules) before the schema check."""
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "a"},
          "spec": {"failurePolicy": {"maxRestarts": 1, "rules": [{"action": "FailJobSet"}]},
                   "replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
                       "containers": [{"name": "c", "image": "x"}]}}}}}]}}
    assert crd.check(js) == []
    bad = crd.check({**js, "spec": "bad"})
    assert bad[0].path == "spec" and "must be of type object" in bad[0].message
