"""Short versions of the two routing studies (benchmarks/study_routing.py, docs/serving-studies.md), run from the
same example files, asserting only the qualitative results the full studies rest on: routing by prefix raises the
engines' prefix-cache hit rate above round robin on the Mooncake conversation trace, and on llm-d's shared-prefix
workload precise >= approximate > random in hit rate, with precise also best in TTFT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetwin.runner import run

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE_EXAMPLE = ROOT / "examples" / "serving-mooncake-routing.yaml"
LLMD_EXAMPLE = ROOT / "examples" / "serving-llmd-shared-prefix.yaml"
MOONCAKE_HEAD = ROOT / "tests" / "data" / "mooncake-conversation-head.jsonl"


def objects(example: Path, router: str, **trace_spec: Any) -> list[dict]:
    """The example's objects with the pool's router annotation set and `trace_spec` replacing RequestTrace fields
    (paths resolve from the working directory when objects are passed, so they are made absolute here)."""
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    for d in docs:
        if d["kind"] == "InferencePool":
            d["metadata"]["annotations"]["kubetwin.io/router"] = router
        if d["kind"] == "RequestTrace":
            if d["spec"].get("path"):
                d["spec"]["path"] = str((example.parent / d["spec"]["path"]).resolve())
            d["spec"].update(trace_spec)
    return docs


def overall(objs: list[dict], duration: str) -> dict[str, Any]:
    return run(objects=objs, seed=1, duration=duration).summary["serving"]["overall"]


def test_examples_read_the_shipped_trace_and_the_router_annotation() -> None:
    """The Mooncake example reads the trace shipped in the repository (examples/data, Apache-2.0), and both examples
    pick their router by annotation."""
    docs = list(yaml.safe_load_all(MOONCAKE_EXAMPLE.read_text()))
    trace = next(d for d in docs if d["kind"] == "RequestTrace")
    assert (MOONCAKE_EXAMPLE.parent / trace["spec"]["path"]).resolve() == (
        ROOT / "examples" / "data" / "mooncake-fast25" / "conversation_trace.jsonl")
    for path in (MOONCAKE_EXAMPLE, LLMD_EXAMPLE):
        pool = next(d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "InferencePool")
        assert "kubetwin.io/router" in pool["metadata"]["annotations"]


@pytest.fixture(scope="module")
def mooncake_head() -> dict[str, dict[str, Any]]:
    """The first 300 Mooncake conversation requests (102 s of trace) on the example's 8 replicas, per router."""
    return {r: overall(objects(MOONCAKE_EXAMPLE, r, path=str(MOONCAKE_HEAD), timeScale=0.5), "13m")
            for r in ("round-robin", "epp", "precise", "sglang-cache-aware")}


def test_mooncake_prefix_aware_routers_beat_round_robin_hit_rate(mooncake_head: dict[str, dict[str, Any]]) -> None:
    rr = mooncake_head["round-robin"]
    assert rr["completed"] == 300
    for r in ("epp", "precise", "sglang-cache-aware"):
        assert mooncake_head[r]["completed"] == 300
        assert mooncake_head[r]["prefix_cache_hit_rate"] > 1.5 * rr["prefix_cache_hit_rate"], r
    # nothing beats the infinite cache (0.366 of the full trace's blocks; the head is below it too)
    assert max(m["prefix_cache_hit_rate"] for m in mooncake_head.values()) < 0.366


@pytest.fixture(scope="module")
def shared_prefix() -> dict[str, dict[str, Any]]:
    """llm-d's shared_prefix data (150 groups x 5 prompts of 6,000 + 1,200 tokens) with 500 output tokens, at a
    constant 16 QPS for 90 s on the example's 8 Qwen3-32B TP=2 replicas: random routing already queues there."""
    gen = {"rate": 16, "duration": "90s", "process": {"type": "poisson"},
           "sharedPrefix": {"numGroups": 150, "promptsPerGroup": 5, "systemPromptLen": 6000, "questionLen": 1200,
                            "outputLen": 500}}
    return {r: overall(objects(LLMD_EXAMPLE, r, generator=gen), "20m") for r in ("precise", "epp-v1.0", "random")}


def test_shared_prefix_precise_ge_approximate_gt_random(shared_prefix: dict[str, dict[str, Any]]) -> None:
    precise, approx, rnd = shared_prefix["precise"], shared_prefix["epp-v1.0"], shared_prefix["random"]
    assert precise["completed"] == approx["completed"] == rnd["completed"] > 0
    hit = {r: m["prefix_cache_hit_rate"] for r, m in shared_prefix.items()}
    assert hit["precise"] >= hit["epp-v1.0"] - 0.01
    assert hit["epp-v1.0"] > hit["random"] + 0.3, hit
    assert precise["ttft_seconds"]["p90"] < 1.0
    assert rnd["ttft_seconds"]["p90"] > 10 * precise["ttft_seconds"]["p90"]
