"""Kueue reads its configuration where Kueue does: ConfigMap kueue-system/kueue-manager-config, key
controller_manager_config.yaml (kubernetes-sigs/kueue config/components/manager + config/default), exactly as the
bare Configuration document the twin also accepts. Issue 31 item 3."""

from __future__ import annotations

import pytest
import yaml
from conftest import is_true
from k8s_builders import make_job, make_pool, make_scenario
from kueue_builders import fair_preemptions_f3, make_configuration, make_cq, make_flavor, make_lq

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import Manifest, load_paths
from kubetwin.kueue import config as kueue_config
from kubetwin.runner import run as kt_run
from kubetwin.validation.validate import validate

NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
FAIR = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def configmap(cfg: dict, namespace: str = "kueue-system", key: str = "controller_manager_config.yaml") -> dict:
    """The ConfigMap as Kueue's install manifests ship it, holding `cfg` as YAML text."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config",
                                                                  "namespace": namespace},
            "data": {key: yaml.safe_dump(cfg, sort_keys=False)}}


# Every setting the twin reads from a Configuration (kueue/config.py KueueConfig), each in both API versions.
SETTINGS = {
    "waitForPodsReady": make_configuration().fields(waitForPodsReady={
        "timeout": "7m", "blockAdmission": True, "recoveryTimeout": "0s", "requeuingStrategy": {
            "timestamp": "Creation", "backoffLimitCount": 3, "backoffBaseSeconds": 10, "backoffMaxSeconds": 100}}),
    "waitForPodsReady-v1beta1": make_configuration().version("v1beta1").fields(
        waitForPodsReady={"enable": True, "timeout": "2m"}),
    "fairSharing": make_configuration().fields(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]}),
    "fairSharing-v1beta1": make_configuration().version("v1beta1").fields(fairSharing={"enable": True}),
    "admissionFairSharing": make_configuration().fields(admissionFairSharing={"usageHalfLifeTime": "168h",
                                                                              "resourceWeights": {"cpu": 0.0}}),
    "manageJobsWithoutQueueName": make_configuration().fields(manageJobsWithoutQueueName=True),
    "featureGates": make_configuration().fields(featureGates={"PartialAdmission": False}),
    "integrations": make_configuration().fields(integrations={"frameworks": ["batch/job", "pod"]}),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_setting_reads_the_same_from_the_configmap(name):
    cfg = SETTINGS[name].obj()
    bare = kueue_config.find([Manifest(cfg, "<object>", 0)])
    from_cm = kueue_config.find([Manifest(NS, "<object>", 0), Manifest(configmap(cfg), "<object>", 0)])
    assert bare is not None and bare != kueue_config.KueueConfig()  # the setting changes something
    assert from_cm == bare


def _queue_objects() -> list[dict]:
    gang = make_job("gang").queue("main").cpu("9").pods(3).duration("1h").obj()
    small = make_job("small").queue("main").cpu("1").create_at("1m").obj()
    return [make_scenario().obj(), make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="40").obj(), make_lq("main").cluster_queue("cq").obj(), gang, small]


def _outcome(result) -> tuple:
    admitted = {n: result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=f"job-{n}-")
                for n in ("gang", "small")}
    return admitted, result.summary["kueue"], result.last("Workload", prefix="job-gang-")["spec"]["active"]


def test_block_admission_from_the_configmap_gives_the_same_run():
    cfg = make_configuration().fields(waitForPodsReady={"timeout": "10m", "blockAdmission": True,
                                                        "requeuingStrategy": {"backoffLimitCount": 0}}).obj()
    bare = kt_run(objects=[*_queue_objects(), cfg])
    from_cm = kt_run(objects=[*_queue_objects(), NS, configmap(cfg)])
    none = kt_run(objects=[*_queue_objects(), NS])
    assert _outcome(from_cm) == _outcome(bare)
    assert _outcome(bare)[0]["small"] == 600.0  # blocked until the gang is deactivated
    assert _outcome(none)[0]["small"] == 60.0  # without the config: admitted at its creation


def test_fair_sharing_from_the_configmap_gives_the_same_run():
    objs = fair_preemptions_f3()
    cfg = make_configuration().fields(fairSharing=FAIR).obj()

    def outcome(result):
        return (result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix="job-a-incoming-"),
                sorted(o["involvedObject"]["name"].split("-")[1] for _, o in result.recorded_events("Preempted")))

    from_cm, bare = outcome(kt_run(objects=[*objs, NS, configmap(cfg)])), outcome(kt_run(objects=[*objs, cfg]))
    assert from_cm == bare == (300.0, ["b5"])


CM_FILE = """apiVersion: v1
kind: Namespace
metadata:
  name: kueue-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kueue-manager-config
  namespace: kueue-system
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
{body}"""


def test_malformed_yaml_in_the_key_is_an_error_at_its_file_line(tmp_path):
    f = tmp_path / "kueue.yaml"
    f.write_text(CM_FILE.format(body="    waitForPodsReady:\n      timeout: 5m\n     blockAdmission: [true\n"))
    diags = [d for d in validate(load_paths([f])) if d.severity == "error"]
    assert len(diags) == 1, diags
    d = diags[0]
    assert (d.file, d.line) == (str(f), 17) and d.obj == "ConfigMap/kueue-system/kueue-manager-config"
    assert "YAML" in d.message and "does not start" in d.message
    with pytest.raises(KubetwinError):
        kt_run([f])


def test_configuration_errors_in_the_key_point_at_the_configmap_file(tmp_path):
    f = tmp_path / "kueue.yaml"
    f.write_text(CM_FILE.format(body="    waitForPodsReady:\n      timeout: 10\n    waitForPodReady: {}\n"))
    got = {(d.line, d.field, d.severity) for d in validate(load_paths([f]))}
    assert (16, "data[controller_manager_config.yaml].waitForPodsReady.timeout", "error") in got
    assert (17, "data[controller_manager_config.yaml].waitForPodReady", "error") in got


def test_not_a_configuration_and_a_missing_key_are_errors(tmp_path):
    f = tmp_path / "kueue.yaml"
    f.write_text(CM_FILE.format(body="").replace("kind: Configuration", "kind: Confguration"))
    d = [d for d in validate(load_paths([f])) if d.severity == "error"]
    assert len(d) == 1 and "must hold one Kueue Configuration" in d[0].message and d[0].line == 13
    cm = configmap(make_configuration().obj(), key="config.yaml")
    d = [d for d in validate([Manifest(NS, "<o>", 0), Manifest(cm, "<o>", 0)]) if d.severity == "error"]
    assert len(d) == 1 and "controller_manager_config.yaml" in d[0].message and "config.yaml" in d[0].message


def test_configmap_outside_kueue_system_is_a_notice_and_not_read():
    cm = configmap(make_configuration().fields(fairSharing=FAIR).obj(), namespace="default")
    ms = [Manifest(cm, "<o>", 0)]
    notes = [d for d in validate(ms) if "kueue-system" in d.message]
    assert [d.severity for d in notes] == ["notice"]
    assert kueue_config.find(ms) is None


def test_both_forms_given_is_an_error_naming_both(tmp_path):
    f = tmp_path / "kueue.yaml"
    f.write_text(CM_FILE.format(body="    fairSharing:\n      preemptionStrategies: [LessThanInitialShare]\n")
                 + "---\napiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
    errors = [d for d in validate(load_paths([f])) if d.severity == "error"]
    assert len(errors) == 1, errors
    e = errors[0]
    assert e.line == 18 and "kueue-system/kueue-manager-config" in e.message and f"{f}:6" in e.message
    assert "given twice" in e.message
