"""Kueue's configuration as its install manifests ship it and its docs edit it (issue 31 item 3, second pass).

The ConfigMap `kueue-system/kueue-manager-config` as `manifests.yaml` holds it (kustomize's output of
kubernetes-sigs/kueue@ff69552e config/default: the key `controller_manager_config.yaml` is
config/components/manager/controller_manager_config.yaml verbatim, copied into tests/data/kueue-manager-config/),
then the edits Kueue's docs tell users to make: "Install a custom-configured released version" (installation.md),
"Setup All-or-nothing with ready Pods" (setup_wait_for_pods_ready.md), fair sharing (the file's own commented
block), integrations.frameworks. Each setting the twin models must take effect; each one it does not must be a
notice naming the field and what the run does instead."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kubetwin.api.loader import load_text
from kubetwin.kueue import config as kueue_config
from kubetwin.runner import run
from kubetwin.validation.validate import validate

DEFAULT = (Path(__file__).parent / "data" / "kueue-manager-config" / "controller_manager_config.yaml").read_text()
NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  labels:
    app.kubernetes.io/name: kueue
    control-plane: controller-manager
  name: kueue-system
"""


def manifests_yaml(config_text: str) -> str:
    """The Namespace and the ConfigMap as kustomize writes them into manifests.yaml."""
    return (NAMESPACE + "---\napiVersion: v1\ndata:\n  controller_manager_config.yaml: |\n"
            + textwrap.indent(config_text, "    ") + "kind: ConfigMap\nmetadata:\n  labels:\n"
            "    app.kubernetes.io/name: kueue\n    control-plane: controller-manager\n"
            "  name: kueue-manager-config\n  namespace: kueue-system\n")


def uncomment(text: str, first: str, lines: int) -> str:
    """The file with the commented block starting at the line `first` (as written, with its '#') uncommented."""
    out = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(out) if line.rstrip() == first)
    for i in range(start, start + lines):
        out[i] = out[i].replace("#", "", 1)
    return "".join(out)


def diagnostics(text: str) -> list:
    return [d for d in validate(load_text(text, "manifests.yaml"))]


def config_of(text: str) -> kueue_config.KueueConfig | None:
    return kueue_config.find(load_text(text, "manifests.yaml"))


def test_the_shipped_configmap_is_read_as_kueue_reads_it() -> None:
    text = manifests_yaml(DEFAULT)
    found = diagnostics(text)
    assert [d for d in found if d.severity == "error"] == []
    assert [d.message for d in found if d.severity != "info"] == []  # plumbing only: nothing changes a decision
    cfg = config_of(text)
    assert cfg is not None and cfg.wait_for_pods_ready is None and not cfg.fair_sharing
    # the shipped list comments out pytorchjob; it lists leaderworkerset, which the twin's Kueue runs (controller.lws)
    assert cfg.managed_kinds == {"Job", "JobSet", "Pod", "TrainJob", "LeaderWorkerSet"}
    assert "deployment" in cfg.frameworks and "leaderworkerset.x-k8s.io/leaderworkerset" in cfg.frameworks


def test_the_docs_custom_configured_install() -> None:
    """installation.md "Install a custom-configured released version": its ConfigMap verbatim."""
    text = NAMESPACE + """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kueue-manager-config
  namespace: kueue-system
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
    namespace: kueue-system
    health:
      healthProbeBindAddress: :8081
    metrics:
      bindAddress: :8443
      # enableClusterQueueResources: true
    webhook:
      port: 9443
    manageJobsWithoutQueueName: true
    internalCertManagement:
      enable: true
      webhookServiceName: kueue-webhook-service
      webhookSecretName: kueue-webhook-server-cert
    waitForPodsReady:
      timeout: 10m
    integrations:
      frameworks:
      - "batch/job"
"""
    cfg = config_of(text)
    assert cfg is not None and cfg.wait_for_pods_ready is not None
    assert cfg.wait_for_pods_ready.timeout == 600.0 and cfg.managed_kinds == {"Job"}
    notes = {d.field: d.message for d in diagnostics(text) if d.severity == "notice"}
    prefix = "data[controller_manager_config.yaml]."
    assert set(notes) == {prefix + "manageJobsWithoutQueueName", prefix + "integrations.frameworks"}, notes
    assert "not modelled" in notes[prefix + "manageJobsWithoutQueueName"]
    assert "without kueue.x-k8s.io/queue-name" in notes[prefix + "manageJobsWithoutQueueName"]


def test_the_wait_for_pods_ready_docs_settings_take_effect() -> None:
    """setup_wait_for_pods_ready.md's block, with its example values, uncommented in the shipped file."""
    text = DEFAULT.replace("""#waitForPodsReady:
#  timeout: 5m
#  recoveryTimeout: 3m
#  blockAdmission: false
#  requeuingStrategy:
#    timestamp: Eviction
#    backoffLimitCount: null # null indicates infinite requeuing
#    backoffBaseSeconds: 60
#    backoffMaxSeconds: 3600
""", """waitForPodsReady:
  timeout: 30m
  recoveryTimeout: 30m
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 5
    backoffBaseSeconds: 60
    backoffMaxSeconds: 3600
""")
    assert text != DEFAULT
    cfg = config_of(manifests_yaml(text))
    assert cfg is not None and cfg.wait_for_pods_ready == kueue_config.WaitForPodsReady(
        timeout=1800.0, block_admission=False, recovery_timeout=1800.0, timestamp="Eviction",
        backoff_limit_count=5, backoff_base_seconds=60, backoff_max_seconds=3600)
    # the file's own commented block, uncommented as is (backoffLimitCount: null = requeue forever)
    cfg = config_of(manifests_yaml(uncomment(DEFAULT, "#waitForPodsReady:", 9)))
    assert cfg is not None and cfg.wait_for_pods_ready is not None
    assert (cfg.wait_for_pods_ready.timeout, cfg.wait_for_pods_ready.recovery_timeout,
            cfg.wait_for_pods_ready.backoff_limit_count) == (300.0, 180.0, None)


def test_fair_sharing_uncommented_in_the_shipped_file() -> None:
    cfg = config_of(manifests_yaml(uncomment(DEFAULT, "#fairSharing:", 2)))
    assert cfg is not None and cfg.fair_sharing
    assert cfg.preemption_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def test_jobset_removed_from_the_frameworks_is_said_and_applied() -> None:
    text = manifests_yaml(DEFAULT.replace('  - "jobset.x-k8s.io/jobset"\n', ""))
    cfg = config_of(text)
    assert cfg is not None and cfg.managed_kinds == {"Job", "Pod", "TrainJob", "LeaderWorkerSet"}
    assert any("JobSets labelled kueue.x-k8s.io/queue-name are not queued" in d.message
               for d in diagnostics(text) if d.severity == "notice")


# Settings in the shipped file's commented examples that the twin's Kueue does not model: uncommenting each gives
# one notice on that field. (first line as written, lines in the block, field)
UNMODELLED = [
    ("#manageJobsWithoutQueueName: true", 1, "manageJobsWithoutQueueName"),
    ("#managedJobsNamespaceSelector:", 5, "managedJobsNamespaceSelector"),
    ("#admissionFairSharing:", 6, "admissionFairSharing"),
    ("#resources:", 3, "resources"),
    ("#objectRetentionPolicies:", 4, "objectRetentionPolicies"),
    ("#  externalFrameworks:", 2, "integrations.externalFrameworks"),
]


@pytest.mark.parametrize(("first", "lines", "field"), UNMODELLED, ids=[u[2] for u in UNMODELLED])
def test_each_setting_the_twin_does_not_model_is_a_notice(first: str, lines: int, field: str) -> None:
    text = manifests_yaml(uncomment(DEFAULT, first, lines))
    found = diagnostics(text)
    assert [d.message for d in found if d.severity == "error"] == []
    notes = [d for d in found if d.severity == "notice"]
    assert [d.field for d in notes] == [f"data[controller_manager_config.yaml].{field}"], [d.message for d in notes]
    assert "not modelled" in notes[0].message


def test_a_notice_for_an_unmodelled_setting_is_repeated_by_the_run(tmp_path) -> None:
    text = ("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata:\n  name: s\nspec:\n  duration: 10m\n---\n"
            + manifests_yaml(uncomment(DEFAULT, "#admissionFairSharing:", 6)))
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = run(paths=[path])
    assert any("admissionFairSharing" in line for line in result.summary["notices"])


DEPLOYMENT = """apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: user-queue
  namespace: default
spec:
  clusterQueue: cluster-queue
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello-world
  labels:
    app: hello-world
    kueue.x-k8s.io/queue-name: user-queue
spec:
  replicas: 3
  selector:
    matchLabels:
      app: hello-world
  template:
    metadata:
      labels:
        app: hello-world
    spec:
      containers:
      - name: hello-world
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: [netexec, --http-port=8080]
        resources:
          requests:
            cpu: "1"
"""


@pytest.mark.parametrize("listed", [True, False])
def test_a_queued_deployment_is_a_notice_while_kueues_deployment_integration_is_not_modelled(listed: bool) -> None:
    """Kueue's "Run a Deployment" task: a Deployment labelled with a queue name. The shipped configuration lists
    `deployment`; the twin's Kueue does not run that integration, so the notice names it; without `deployment` in
    integrations.frameworks Kueue ignores the label too, and nothing is said."""
    config = DEFAULT if listed else DEFAULT.replace('  - "deployment"\n', "")
    found = diagnostics(manifests_yaml(config) + "---\n" + DEPLOYMENT)
    notes = [d.message for d in found if d.obj.startswith("Deployment/")]
    if listed:
        assert notes == ["Kueue's deployment integration is not modelled: Kueue would queue this Deployment's pods "
                         "in LocalQueue user-queue and admit them within its quota; the run starts them unqueued"]
    else:
        assert notes == []


def test_the_shipped_configmap_with_the_docs_wait_for_pods_ready_runs_as_the_bare_configuration() -> None:
    """examples/kueue-wait-for-pods-ready.yaml with its Configuration moved into the shipped ConfigMap (the
    shipped file with its commented waitForPodsReady block set to the example's values): the same run."""
    example = Path(__file__).parent.parent / "examples" / "kueue-wait-for-pods-ready.yaml"
    text = example.read_text()
    docs = text.split("\n---\n")
    bare = [d for d in docs if "kind: Configuration" in d]
    assert len(bare) == 1
    config = DEFAULT.replace("""#waitForPodsReady:
#  timeout: 5m
#  recoveryTimeout: 3m
#  blockAdmission: false
#  requeuingStrategy:
#    timestamp: Eviction
#    backoffLimitCount: null # null indicates infinite requeuing
#    backoffBaseSeconds: 60
#    backoffMaxSeconds: 3600
""", """waitForPodsReady:
  timeout: 10m
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 2
    backoffBaseSeconds: 60
    backoffMaxSeconds: 3600
""")
    moved = "\n---\n".join(d for d in docs if d is not bare[0]) + "\n---\n" + manifests_yaml(config)
    a = run(manifests=load_text(text, "example.yaml"))
    b = run(manifests=load_text(moved, "moved.yaml"))
    assert a.summary["kueue"] == b.summary["kueue"]
    def timeline(res) -> list[tuple[float, str, str]]:  # Workload names carry a uid-derived suffix
        return [(e.first_seen, e.event["reason"], e.event["involvedObject"]["name"].rsplit("-", 1)[0])
                for e in res.recorded_events()]

    assert timeline(a) == timeline(b)
    assert "EvictedDueToPodsReadyTimeout" in {reason for _, reason, _ in timeline(b)}  # the setting took effect
