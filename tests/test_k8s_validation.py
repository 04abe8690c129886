"""k8s.validation: apimachinery's pkg/util/validation name rules with its own test cases (validation_test.go:
TestIsQualifiedName, TestIsValidLabelValue, TestIsDNS1123Subdomain), and ValidateObjectMeta's labels and annotations
as `kubetwin validate` reports them, at the top level and in a built-in pod template (the API server's
`spec.template.labels` path)."""

from __future__ import annotations

import pytest

from kubetwin.api.loader import load_text
from kubetwin.k8s import validation as v
from kubetwin.validation.validate import validate

QUALIFIED_OK = ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
                "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple",
                "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123",
                "example.com/Uppercase_Is_OK_123", "requests.storage-foo", "a" * 63, "a" * 253 + "/" + "b" * 63]
QUALIFIED_BAD = ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash", "Example.com/abc",
                 "example_com/abc", "example.com/", "/simple", "a" * 64, "a" * 254 + "/abc"]


@pytest.mark.parametrize("name", QUALIFIED_OK)
def test_qualified_names_apimachinery_accepts(name: str) -> None:
    assert v.is_qualified_name(name) == []


@pytest.mark.parametrize("name", QUALIFIED_BAD)
def test_qualified_names_apimachinery_refuses(name: str) -> None:
    assert v.is_qualified_name(name) != []


@pytest.mark.parametrize(("value", "ok"), [
    ("simple", True), ("now-with-dashes", True), ("1-starts-with-num", True), ("end-with-num-1", True),
    ("1234", True), ("-starts-with-dash", False), ("ends-with-dash-", False), (".starts.with.dot", False),
    ("ends.with.dot.", False), ("nospecialchars%^=@", False), ("Tama-nui-te-rā.is.Māori.sun", False),
    ("\\backslashes\\are\\bad", False), ("-starts-with-dash", False), ("", True), ("a" * 63, True),
    ("a" * 64, False), ("now_with_underscores", True), ("now.with.dots", True), ("Uppercase_Is_OK_123", True),
])
def test_label_values(value: str, ok: bool) -> None:
    assert (v.is_valid_label_value(value) == []) is ok


def test_messages_are_apimachinerys_words() -> None:
    assert v.is_valid_label_value("a" * 64) == ["must be no more than 63 characters"]
    assert v.is_qualified_name("example.com/") == [
        "name part must be non-empty",
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
    assert v.is_qualified_name("Example.com/abc") == [
        "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]


def _errors(text: str) -> list[str]:
    return [f"{d.field}: {d.message}" for d in validate(load_text(text, "x.yaml")) if d.severity == "error"]


def test_validate_refuses_bad_labels_and_annotations_at_the_api_servers_paths() -> None:
    job = """apiVersion: batch/v1
kind: Job
metadata:
  name: j
  namespace: default
  labels: {team: ml, "bad key!": x}
  annotations: {"Example.COM/Owner": me, "a/b/c": x}
spec:
  template:
    metadata:
      labels: {app: -train-}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
"""
    errs = _errors(job)
    assert len(errs) == 3, errs
    assert errs[0].startswith('metadata.labels: Invalid value: "bad key!": name part must consist of')
    # annotation keys are checked lowercased: Example.COM/Owner is fine, a/b/c is not
    assert errs[1].startswith('metadata.annotations: Invalid value: "a/b/c": a qualified name must consist of')
    assert errs[2].startswith('spec.template.labels: Invalid value: "-train-": a valid label must be an empty '
                              "string or consist of")


def test_annotations_over_256_kib_together_are_too_long() -> None:
    pod = f"""apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: default, annotations: {{a: "{'x' * 140_000}", b: "{'y' * 140_000}"}}}}
spec: {{containers: [{{name: c, image: busybox}}]}}
"""
    assert _errors(pod) == ["metadata.annotations: Too long: may not be more than 262144 bytes"]
