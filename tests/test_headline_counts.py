"""The run's headline counts what happened: ProvisioningRequest-driven scale-ups (best-effort-atomic and GKE's
queued provisioning) are scale-ups, and 404 answers (vLLM's unknown model) are counted beside 429 and 503."""

from __future__ import annotations

from pathlib import Path

from k8s_builders import make_scenario
from serving_builders import MODEL, h100_pool, inference_model, inference_pool, serving_scenario, trace, vllm
from test_cluster_autoscaler import pod_template, pool, provreq

from kubetwin.report.headline import autoscaler_rows, serving_rows
from kubetwin.runner import run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dws-flex-start.yaml"


def _row(rows: list[tuple[str, str]], label: str) -> str:
    return dict(rows)[label]


def test_provisioning_request_scale_ups_are_counted_for_each_class() -> None:
    atomic = run(objects=[make_scenario("10m").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1),
                          pod_template("t"), provreq("ok", "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "t", 2)])
    ups = atomic.summary["cluster_autoscaler"]["scale_ups"]
    assert [(u["group"], u["from"], u["to"], u["granted"], u.get("provisioning_request")) for u in ups] == [
        ("l4/us-central1-a", 0, 2, 2, "default/ok")]
    assert _row(autoscaler_rows(atomic.summary), "cluster autoscaler").startswith(
        "1 scale-ups (1 for ProvisioningRequests), ")
    queued = run([EXAMPLE])  # GKE queued provisioning (DWS flex-start): four nodes at once at 2 h
    ups = queued.summary["cluster_autoscaler"]["scale_ups"]
    assert [(u["t"], u["to"] - u["from"], u.get("provisioning_request")) for u in ups if u["granted"]] == [
        (7200.0, 4, "default/train-pr")]
    assert "0 scale-ups" not in _row(autoscaler_rows(queued.summary), "cluster autoscaler")


def test_the_serving_headline_counts_404s() -> None:
    im = inference_model("food").model("food-review").obj()
    im["spec"]["targetModels"] = [{"name": "food-review-1", "weight": 1}]
    r = run(objects=[serving_scenario("12m").obj(), h100_pool(1).obj(), inference_pool().obj(), im,
                     trace().rate(4).duration("2m").start("8m").model("food-review").obj(),
                     vllm("srv", 1).args(["--model", MODEL]).obj()])  # no --enable-lora: vLLM answers 404
    o = r.summary["serving"]["overall"]
    assert o["not_found_404"] == o["requests"] > 100
    assert _row(serving_rows(r.summary), "requests (completed / 429 / 404 / 503)") == \
        f"{o['requests']} (0 / 0 / {o['requests']} / 0)"
