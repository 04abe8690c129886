"""The workload x device-kind support matrix (validation/accelerators.py): docs/devices.md's table is the generated
one, no cell is empty, and every cell the table calls refused or a notice is what `kubetwin validate` really gives
(the run summary repeats validate's notices); a modelled cell gives none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from k8s_builders import make_pool

from kubetwin.api.loader import Manifest
from kubetwin.validation import accelerators
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- devices:begin -->", "<!-- devices:end -->"
P = "training.kubetwin.io/"
TRAIN = {P + "params": "100M", P + "steps": "10", P + "global-batch-size": "8", P + "sequence-length": "1024"}


def test_docs_table_is_the_generated_one() -> None:
    page = (ROOT / "docs" / "devices.md").read_text()
    assert BEGIN in page and END in page
    table = page.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert table == accelerators.markdown(), "regenerate: python -m kubetwin.validation.accelerators --markdown"
    out = subprocess.run([sys.executable, "-m", "kubetwin.validation.accelerators", "--markdown"],
                         capture_output=True, text=True, check=True).stdout
    assert out == accelerators.markdown()


def test_no_empty_cell() -> None:
    """Every cell says something of its own: a status, and a text whose {server}/{device} placeholders were filled
    (the matrix is built over WORKLOADS x DEVICES, so only the texts can be empty or half-made)."""
    assert all(c.status in ("modelled", "refused", "notice") and c.text.strip() for c in accelerators.MATRIX.values())
    assert not [key for key, c in accelerators.MATRIX.items() if "{" in c.text or "}" in c.text]


def _pools(device: str) -> list[dict]:
    if device == "TPU single-host":
        return [make_pool("tpu", "ct5lp-hightpu-4t", 1).obj()]
    if device == "TPU multi-host":
        return [make_pool("tpu", "ct5lp-hightpu-4t", 4).spec(placementPolicy={"tpuTopology": "4x4"}).obj()]
    pool = make_pool("gpu", "a2-ultragpu-1g", 1).gpus("nvidia-a100-80gb", 1)
    if device == "MIG":
        pool = pool.gpu_partition("3g.40gb")
    elif device == "time-slicing":
        pool = pool.gpu_sharing("TIME_SHARING", 4)
    elif device == "MPS":
        pool = pool.gpu_sharing("MPS", 4)
    return [pool.obj()]


def _container(workload: str) -> tuple[dict, dict]:
    """(the container, the pod template's annotations)."""
    if workload == "vLLM":
        return {"name": "s", "image": "vllm/vllm-openai:v0.10.1", "args": ["--model", "Qwen/Qwen3-0.6B"]}, {}
    if workload == "TGI":
        return {"name": "s", "image": "ghcr.io/huggingface/text-generation-inference:3.0.1",
                "args": ["--model-id", "Qwen/Qwen3-0.6B"]}, {}
    if workload == "Triton":
        return {"name": "s", "image": "nvcr.io/nvidia/tritonserver:24.08-py3",
                "command": ["tritonserver", "--model-repository=/models"]}, {}
    if workload == "SGLang":
        return {"name": "s", "image": "lmsysorg/sglang:latest",
                "command": ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-0.6B"]}, {}
    ann = dict(TRAIN)
    if workload == "training FSDP":
        ann[P + "fsdp"] = "true"
    if workload == "training JAX":
        ann[P + "launcher"] = "jax"
    return {"name": "t", "image": "us-docker.pkg.dev/x/train:1"}, ann


def _object(workload: str, device: str) -> dict:
    c, ann = _container(workload)
    tpu = device.startswith("TPU")
    c["resources"] = {"limits": {"google.com/tpu": "4"} if tpu else {"nvidia.com/gpu": "1"}}
    spec = {"restartPolicy": "Never", "containers": [c]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"parallelism": 1, "completions": 1, "template": {"metadata": {"annotations": ann},
                                                                     "spec": spec}}}


@pytest.mark.parametrize(("workload", "device"), sorted(accelerators.MATRIX))
def test_validate_gives_what_the_table_says(workload: str, device: str) -> None:
    cell = accelerators.MATRIX[(workload, device)]
    objs = [*_pools(device), _object(workload, device)]
    diags = validate([Manifest(o, "t.yaml", 1) for o in objs])
    mine = [d for d in diags if d.message == cell.text]
    if cell.status == "modelled":
        assert not [d for d in diags if d.hint.startswith("see docs/devices.md")], diags
    else:
        assert len(mine) == 1, [d.render() for d in diags]
        assert mine[0].severity == ("error" if cell.status == "refused" else "notice")


def test_the_run_summary_repeats_the_notice_and_refuses_what_validate_refuses() -> None:
    from k8s_builders import make_scenario

    from kubetwin.api.errors import KubetwinError
    from kubetwin.runner import run

    res = run(objects=[make_scenario("1h").obj(), *_pools("MIG"), _object("SGLang", "MIG")])
    text = accelerators.MATRIX[("SGLang", "MIG")].text
    assert any(text in n for n in res.summary["notices"])
    with pytest.raises(KubetwinError, match="on TPU: the twin has no serving performance model"):
        run(objects=[make_scenario("1h").obj(), *_pools("TPU single-host"), _object("vLLM", "TPU single-host")])
