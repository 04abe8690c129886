"""docs/architecture.md's "Plugging in" paragraph, tried: each kind of addition it names, added the way it says.

A new CRD kind is one CustomResourceDefinition registered in the kind registry (api/kinds.py); validation against
its schema, structural defaults, the store's scope, `kubetwin run`'s creation order and `kubetwin get`'s resource
names and printer columns follow from it with no other change. A kind's own validation checks are one module
(its `KindChecks`) and its line in validation.kinds' registry. A node-only scheduler Filter is one `NodeFilter`
(its function and the pod fields it reads) registered in the profile (scheduler/plugins.py).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from conftest import final_objects
from k8s_builders import make_pod, make_pool, make_scenario, static_node
from maintenance_window_plugin import CLOSED, LABEL, MaintenanceWindow
from scheduler_builders import SAME_TEAM, TEAM
from serving_builders import MODEL, h100_pool, inference_pool, serving_scenario, trace, vllm
from typer.testing import CliRunner

from kubetwin.api import kinds
from kubetwin.api.loader import load_paths
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler import registry
from kubetwin.validation import kinds as kind_checks
from kubetwin.validation.validate import validate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# A made-up CRD, written as a project would ship it (apiextensions.k8s.io/v1).
MODEL_CACHE_CRD = yaml.safe_load("""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: modelcaches.cache.example.com}
spec:
  group: cache.example.com
  scope: Namespaced
  names: {kind: ModelCache, plural: modelcaches, singular: modelcache, shortNames: [mcache]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Model, type: string, jsonPath: .spec.model}
    - {name: Tier, type: string, jsonPath: .spec.tier}
    - {name: Size, type: string, jsonPath: .spec.size, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [model]
            properties:
              model: {type: string}
              tier: {type: string, default: ssd, enum: [ssd, hyperdisk]}
              size: {type: string}
""")

OBJECT = """apiVersion: cache.example.com/v1alpha1
kind: ModelCache
metadata: {name: llama, namespace: default}
spec:
  model: meta-llama/Llama-3.1-8B
  size: 64Gi
"""


def _errors(tmp_path: Path, text: str) -> list:
    f = tmp_path / "cache.yaml"
    f.write_text(text)
    return [d for d in validate(load_paths([str(f)])) if d.severity == "error"]


def test_a_crd_kind_registered_once_is_validated_defaulted_scoped_ordered_and_printed(tmp_path: Path) -> None:
    with kinds.registered(kinds.from_crd(MODEL_CACHE_CRD, create_order=3)):
        # validate: the CRD's schema, in the API server's words, with the closest field name
        assert _errors(tmp_path, OBJECT) == []
        bad = _errors(tmp_path, OBJECT.replace("  model:", "  modle:"))
        assert any(d.field == "spec.modle" and "model" in d.hint for d in bad), bad
        bad = _errors(tmp_path, OBJECT.replace("  model: meta-llama/Llama-3.1-8B\n", ""))
        assert any("Required value" in d.message and d.field == "spec.model" for d in bad), bad
        bad = _errors(tmp_path, OBJECT + "  tier: nvme\n")
        assert [d.field for d in bad] == ["spec.tier"] and "Unsupported value" in bad[0].message
        # scope and creation order come from the registry
        assert not kinds.is_cluster_scoped("ModelCache")
        assert kinds.create_order("ModelCache") == 3
        # run: stored with the schema's default; get by short name prints the CRD's columns (Size only wide)
        (tmp_path / "cache.yaml").write_text(OBJECT)
        out = tmp_path / "run"
        res = CliRunner().invoke(app, ["run", str(EXAMPLES / "kueue-cohort-borrowing.yaml"),
                                       str(tmp_path / "cache.yaml"), "--out", str(out), "--duration", "10m"])
        assert res.exit_code == 0, res.output
        for args, header, row in ((["mcache"], ["NAME", "MODEL", "TIER"], ["llama", "meta-llama/Llama-3.1-8B", "ssd"]),
                                  (["modelcaches.cache.example.com", "-o", "wide"], ["NAME", "MODEL", "TIER", "SIZE"],
                                   ["llama", "meta-llama/Llama-3.1-8B", "ssd", "64Gi"])):
            res = CliRunner().invoke(app, ["get", *args, "--run", str(out)])
            assert res.exit_code == 0, res.output
            rows = [re.split(r"\s{2,}", line.strip()) for line in res.output.strip().splitlines()]
            assert rows == [header, row]
    # gone with the with-block: an unknown kind again
    assert kinds.REGISTRY.resolve("mcache") is None
    assert not kinds.REGISTRY.is_custom("cache.example.com", "ModelCache")



# A kind's own checks, written as a new module of validation/kinds/ would be (a file per kind, as Kueue's
# pkg/webhooks/): ModelCache's model must be a Hugging Face repo id.
MODEL_CACHE_CHECKS = '''"""ModelCache: spec.model names a Hugging Face repository (organization/name)."""

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation.kinds.base import KindChecks


def model_id(m: Manifest) -> list[Diagnostic]:
    model = str((m.obj.get("spec") or {}).get("model", ""))
    if model.count("/") == 1:
        return []
    return [Diagnostic(m.file, m.line_of("spec.model"), m.ref, "spec.model",
                       f'Invalid value: "{model}": must be a Hugging Face repository id (organization/name)',
                       "write the model as huggingface.co names it, e.g. meta-llama/Llama-3.1-8B")]


CHECKS = KindChecks("cache.example.com", "ModelCache", checks=(model_id,))
'''


def test_a_kinds_own_checks_are_one_module_and_its_registry_line(tmp_path: Path) -> None:
    """docs/architecture.md: a kind's validation checks are its module in validation/kinds/ and its line in the
    registry (`kind_checks.registered` is that line for a with-block); `kubetwin validate` then runs them after the
    kind's schema and fails closed on their errors, with file:line, object, field path and fix."""
    module_file = tmp_path / "modelcache.py"
    module_file.write_text(MODEL_CACHE_CHECKS)
    spec = importlib.util.spec_from_file_location("modelcache_checks", module_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    manifest = tmp_path / "llama-cache.yaml"
    manifest.write_text(OBJECT.replace("meta-llama/Llama-3.1-8B", "llama-3.1-8b"))
    with kinds.registered(kinds.from_crd(MODEL_CACHE_CRD)):
        assert _errors(tmp_path, manifest.read_text()) == []  # the kind alone: the schema accepts it
        with kind_checks.registered(module.CHECKS):
            res = CliRunner().invoke(app, ["validate", str(manifest)])
            assert res.exit_code == 1, res.output
            assert (f'{manifest}:5: error: ModelCache/default/llama: spec.model: Invalid value: "llama-3.1-8b": must '
                    "be a Hugging Face repository id (organization/name)\n    fix: write the model as huggingface.co "
                    "names it, e.g. meta-llama/Llama-3.1-8B\n") in res.output
            assert _errors(tmp_path, OBJECT) == []  # a repository id passes
            # after the schema, as a validating webhook: an object the schema refuses gets only the schema's error
            bad = _errors(tmp_path, manifest.read_text() + "  tier: nvme\n")
            assert [d.field for d in bad] == ["spec.tier"], bad
        assert _errors(tmp_path, manifest.read_text()) == []  # gone with the with-block
    assert kind_checks.REGISTRY.get("cache.example.com", "ModelCache") is None


def test_a_node_only_filter_reading_a_pod_label_is_one_registration() -> None:
    """One NodeFilter with the pod fields it reads, registered in the profile: the scheduler runs it, caches its
    verdicts per the fields it reads (two pods alike but for the label each land on their team's node; before
    the cache keyed on those fields, the second reused the first's verdicts), its reason reaches FailedScheduling,
    and its QueueingHint requeues the pod when a node of its team arrives."""
    nodes = []
    # node-c arrives at 2m, before the scheduler's 5 min flush of unschedulable pods: only the hint requeues pod-c
    for team, at in (("a", "0s"), ("b", "0s"), ("c", "2m")):
        node = static_node(f"node-{team}").obj()
        node["metadata"]["labels"][TEAM] = team
        node["metadata"]["annotations"] = {"kubetwin.io/create-at": at}
        nodes.append(node)
    pods = []
    for team in "abc":
        pod = make_pod(f"pod-{team}").cpu("1").obj()
        pod["metadata"]["labels"] = {TEAM: team}
        pods.append(pod)
    with P.registered(SAME_TEAM):
        result = run(objects=[make_scenario("10m").obj(), *nodes, *pods])
    bound = {name: o["spec"].get("nodeName") for name, o in final_objects(result, "Pod").items()}
    assert bound == {"pod-a": "node-a", "pod-b": "node-b", "pod-c": "node-c"}
    assert result.first_time("Pod", lambda o: bool(o["spec"].get("nodeName")), "pod-c") == 120.0
    failed = [e["message"] for e in final_objects(result, "Event").values()
              if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "pod-c"]
    assert failed and failed[0] == ("0/2 nodes are available: 2 node(s) belong to another team. preemption: 0/2 "
                                    "nodes are available: 2 Preemption is not helpful for scheduling.")
    assert "SameTeam" not in P.DEFAULT.by_name  # the registration ended with the block


def _config_map(name: str, at: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": data,
            "metadata": {"name": name, "namespace": "default", "annotations": {"kubetwin.io/create-at": at}}}


def test_the_cluster_autoscaler_honours_a_filter_registered_the_same_way() -> None:
    """The same one registration binds the cluster autoscaler's simulations (simulator/clustersnapshot/predicate
    SchedulerPluginRunner runs the scheduler's Filters on template nodes): of two autoscaling pools alike but for the
    team label, only the pod's own team's pool is bought, and without the Filter the first pool would have been
    (tests/test_ca_scheduler_filters.py holds the rule for every pool shape, scale-down included)."""
    def pool(name: str, team: str) -> dict:
        return make_pool(name, "n2-standard-8", 0).autoscaling(0, 2).node_labels(**{TEAM: team}).obj()

    pod = make_pod("p").cpu("1").duration("30m").obj()
    pod["metadata"]["labels"] = {TEAM: "a"}
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
                                           "controller": True}]
    objs = [make_scenario("20m").obj(), pool("aaa-theirs", "b"), pool("zzz-ours", "a"), pod]

    def bought(result) -> set[str]:  # noqa: ANN001
        return {o["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for _, _, etype, o in result.history
                if o["kind"] == "Node" and etype == "ADDED"}

    with P.registered(SAME_TEAM):
        assert bought(run(objects=objs)) == {"zzz-ours"}
    assert bought(run(objects=objs)) == {"aaa-theirs"}  # the expander's choice among equals, without the Filter


@pytest.mark.parametrize("opens", [True, False])
def test_a_plugin_that_reacts_to_cluster_events_is_one_file_and_one_registration(opens: bool) -> None:
    """tests/maintenance_window_plugin.py, registered with one line: its PreFilter rejects the pod, the scheduler
    watches the ConfigMaps its events_to_register names, a ConfigMap its QueueingHint answers QueueSkip for leaves
    the pod waiting (no attempt at 1m), and the one it answers Queue for requeues it at once (bound at 2m, before
    the 5-minute flush of unschedulable pods; a node event would not do it, as the plugin does not register Node)."""
    pod = make_pod("pod").cpu("1").obj()
    pod["metadata"]["labels"] = {LABEL: "true"}
    objs = [make_scenario("4m").obj(), static_node("node-a").obj(), pod,
            _config_map("unrelated", "1m", open="true"),  # QueueSkip: another ConfigMap
            _config_map("maintenance-window", "2m", open="true" if opens else "false")]
    late_node = static_node("node-b").obj()
    late_node["metadata"]["annotations"] = {"kubetwin.io/create-at": "90s"}
    count = len(registry.REGISTRY)
    with registry.registered(lambda h: MaintenanceWindow(h.store)):
        result = run(objects=[*objs, late_node])
    assert len(registry.REGISTRY) == count  # the registration ended with the block
    failed = [e for e in final_objects(result, "Event").values() if e["reason"] == "FailedScheduling"]
    assert failed and failed[0]["message"] == f"0/1 nodes are available: {CLOSED}."
    bound_at = result.first_time("Pod", lambda o: bool(o["spec"].get("nodeName")), "pod")
    if opens:
        assert bound_at == 120.0
        assert result.summary["scheduler"]["attempts"] == 2  # at 0 s and at 2 m: nothing between requeued it
    else:
        assert bound_at is None
        assert result.summary["scheduler"]["attempts"] == 1  # every later event was QueueSkip or not its own


class FirstEndpointRouter:
    """A made-up policy: every request to the endpoint whose name sorts first (reads only the snapshot)."""

    name = "first-endpoint"

    def pick(self, req, snap, now):  # noqa: ANN001, ANN201 - the Router protocol's shape
        from kubetwin.serving.types import Decision

        if not snap.names:
            return Decision(None, 503, "no healthy upstream")
        return Decision(min(range(len(snap.names)), key=lambda i: snap.names[i]))

    def routed(self, req, index_or_name) -> None:  # noqa: ANN001
        pass

    def finished(self, req, name) -> None:  # noqa: ANN001
        pass

    def remove(self, name) -> None:  # noqa: ANN001
        pass


def test_a_router_preset_is_one_registration() -> None:
    """docs/architecture.md: a routing policy is a class with pick/routed/finished/remove and a name in PRESETS;
    `kubetwin.io/router` then selects it in validate and run."""

    from kubetwin.serving.router import presets

    objs = [serving_scenario("15m").obj(), h100_pool(2).obj(),
            vllm("srv", 2).args(["--model", MODEL, "--gpu-memory-utilization", "0.5"]).obj(),
            inference_pool().router("first-endpoint").obj(), trace().rate(2).duration("2m").start("8m").obj()]
    assert any("unknown router preset 'first-endpoint'" in d.message
               for d in validate([load_obj(o) for o in objs]) if d.severity == "error")
    with presets.registered("first-endpoint", presets.Preset("every request to the first endpoint by name",
                                                             lambda **_: FirstEndpointRouter())):
        assert not [d for d in validate([load_obj(o) for o in objs]) if d.severity == "error"]
        result = run(objects=objs)
    served = result.requests()
    replicas = sorted({v.object["metadata"]["name"] for v in result.versions("Pod", prefix="srv-")})
    assert len(replicas) == 2 and len(served) > 100 and (served["status"] == 200).all()
    assert set(served["pod"]) == {replicas[0]}  # round-robin or EPP would use both
    assert "first-endpoint" not in presets.PRESETS


def load_obj(obj: dict):  # noqa: ANN201
    from kubetwin.api.loader import Manifest

    return Manifest(obj, "<object>", 0)


def test_a_gpu_type_is_one_catalog_row() -> None:
    """docs/architecture.md: a GPU type is a row in catalog/data/machines.yaml `gpus:` (with the machine types that
    carry it and the zones that offer them); node pools, prices, quotas, DCGM and the serving model then use it.
    Here a made-up 96 GB GPU is registered for a with-block and serves vLLM in a NodePool."""

    from kubetwin import catalog

    gpu = catalog.GPUType("nvidia-x100-96gb", memory_gib=96, bf16_tflops=1200, source="a made-up GPU",
                          hbm_gbps=4000, nvlink_gbps=450, sms=144, training_mfu=0.4, quota_metric="NVIDIA_X100_GPUS")
    machine = catalog.MachineType("x4-highgpu-1g", "x4-highgpu", 24, 200, gpu.name, 1, 10.0, 4.0, "made up")
    pool = make_pool("x100", "x4-highgpu-1g", 1).gpus(gpu.name, 1).obj()
    objs = [serving_scenario("15m").obj(), pool, vllm("srv", 1).args(["--model", MODEL]).obj(), inference_pool().obj(),
            trace().rate(2).duration("2m").start("10m").obj()]
    assert any("x4-highgpu-1g" in d.message for d in validate([load_obj(o) for o in objs]) if d.severity == "error")
    with catalog.registered(gpu, (machine,), zones=("us-central1-a",)):
        assert not [d for d in validate([load_obj(o) for o in objs]) if d.severity == "error"]
        result = run(objects=objs)
        node = result.last("Node", prefix="gke-kubetwin-x100-")
        assert node["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == gpu.name
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
        served = result.requests()
        assert len(served) > 100 and (served["status"] == 200).all()
        registered_at = result.versions("Node", node["metadata"]["name"])[0].time
        assert result.summary["cost"]["total_usd"] == pytest.approx(10.0 * (900 - registered_at) / 3600)  # its price
    with pytest.raises(catalog.CatalogError):
        catalog.gpu_type(gpu.name)
