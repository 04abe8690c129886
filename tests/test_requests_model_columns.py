"""requests.csv's model columns mean the same thing on every row, whatever its status: `model` is the model the
request was routed as (the InferenceModel's target after the endpoint picker's traffic split — the Inference
Extension's `target_model_name` — else the model asked for), `requested_model` the model the client asked for
(the InferenceModel's modelName: the extension's `model_name`). Before, a row served on a target that was the base
model itself showed the InferenceModel's name while a 429 row showed the target."""

from __future__ import annotations

from serving_builders import MODEL, h100_pool, inference_model, inference_pool, serving_scenario, trace, vllm

from kubetwin.runner import run
from kubetwin.serving.observe.results import CSV_FIELDS


def test_model_and_requested_model_on_served_429_and_404_rows() -> None:
    im = inference_model("batch").model("batch-model").criticality("Sheddable").obj()
    targets = [MODEL, "adapter-1", "missing"]
    im["spec"]["targetModels"] = [{"name": t, "weight": 1} for t in targets]
    args = ["--model", MODEL, "--max-num-seqs", "4", "--enable-lora", "--max-loras", "1",
            "--lora-modules", "adapter-1=/adapters/1"]
    objs = [serving_scenario("20m").obj(), h100_pool(1).obj(), vllm("srv", 1).args(args).obj(),
            inference_pool().obj(), im,
            trace("sheddable").rate(6).duration("5m").start("8m").model("batch-model").prompt(2000).output(400).obj()]
    df = run(objects=objs).requests()
    by_status = {s: df[df.status == s] for s in (200, 404, 429)}
    assert all(len(rows) > 10 for rows in by_status.values()), df.status.value_counts()
    assert set(df.requested_model) == {"batch-model"}  # what the client asked for, on every row
    assert set(by_status[200].model) == {MODEL, "adapter-1"}  # the target it ran as (base model or adapter)
    assert set(by_status[404].model) == {"missing"}
    assert set(by_status[429].model) <= set(targets) and len(set(by_status[429].model)) > 1
    assert CSV_FIELDS[-1] == "requested_model" and CSV_FIELDS[:-1][-2:] == ("model", "reason")  # added, not renamed
