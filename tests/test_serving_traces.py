"""Request traces: the RequestTrace kind, the public-trace loaders, the generator and the lazy Request stream."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import load_text
from kubetwin.serving.traces import arrays as T
from kubetwin.serving.traces.arrays import requests, trace_stats
from kubetwin.serving.traces.requesttrace import load_request_trace
from kubetwin.validation.validate import validate

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MOONCAKE_FULL = (Path(__file__).resolve().parents[1] / "examples" / "data" / "mooncake-fast25"
                 / "conversation_trace.jsonl")  # shipped with the example (Apache-2.0)


def rt(spec: dict, name: str = "t") -> dict:
    base = {"target": {"kind": "InferencePool", "name": "pool"}, "model": "llama"}
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace", "metadata": {"name": name},
            "spec": base | spec}


def gen(**g: object) -> dict:
    return rt({"format": "generator", "generator": {"rate": 10, "duration": "100s"} | g})


# ---- loaders ----

def test_azure_head_loads_with_seconds_from_first_request():
    a = T.load_azure(DATA / "azure-llm-2023-conv-head.csv")
    a.check()
    assert len(a) == 500
    assert a.arrival[0] == 0.0
    # rows 2 and 3: 18:15:46.6805900 -> 18:15:50.9951690, 374/44 then 396/109 tokens
    assert a.arrival[1] == pytest.approx(4.314579, abs=1e-6)
    assert (a.prompt[:2].tolist(), a.output[:2].tolist()) == ([374, 396], [44, 109])
    assert np.array_equal(np.diff(a.seg_offsets), np.ones(500))  # one unique segment each
    assert len(np.unique(a.seg_hashes)) == 500


def test_mooncake_segments_are_512_token_blocks_chained():
    a = T.load_mooncake(DATA / "mooncake-conversation-head.jsonl")
    a.check()
    assert len(a) == 300
    # line 1: input 6758 in 14 hash ids -> 13 x 512 + 102
    first = a.seg_tokens[a.seg_offsets[0]:a.seg_offsets[1]].tolist()
    assert first == [512] * 13 + [6758 - 512 * 13]
    # lines 1 and 2 share hash id 0 as the first block, so the same chained hash; their second blocks differ
    h1 = a.seg_hashes[a.seg_offsets[0]:a.seg_offsets[1]]
    h2 = a.seg_hashes[a.seg_offsets[1]:a.seg_offsets[2]]
    assert h1[0] == h2[0] and h1[1] != h2[1]
    # the same id after a different prefix is a different segment (position matters)
    assert T.mix(T.mix(0, 5), 7) != T.mix(T.mix(0, 6), 7)
    assert a.arrival[-1] > 0 and np.all(np.diff(a.arrival) >= 0)


def test_vidur_and_azure_agree_on_the_same_requests():
    path = SHARED / "profiles" / "vidur" / "processed_traces" / "splitwise_conv.csv"
    full = SHARED / "traces" / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv"
    if not path.exists() or not full.exists():
        pytest.skip("shared traces not present")
    v, a = T.load_vidur(path), T.load_azure(full)
    assert len(v) == len(a) == 19366
    assert np.array_equal(v.prompt, a.prompt) and np.allclose(v.arrival, a.arrival, atol=1e-5)


def test_mooncake_full_reuse_ratio_matches_reference():
    t0 = time.perf_counter()
    a = T.load_mooncake(MOONCAKE_FULL)
    elapsed = time.perf_counter() - t0
    s = trace_stats(a)
    assert s["count"] == 12031
    assert s["prompt_mean"] == pytest.approx(12035, abs=1)
    assert s["prefix_reuse_segments"] == pytest.approx(0.366, abs=0.002)  # reference doc section 5
    assert len(np.unique(a.seg_hashes)) == 182790  # unique blocks per the reference doc
    assert elapsed < 2.0


@pytest.mark.parametrize("text,needle", [
    ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1]}\n', "does not fit 1 hash ids"),
    ('{"timestamp": 0, "input_length": 600}\n', "missing key 'output_length'"),
    ("not json\n", ":1: not JSON"),
])
def test_mooncake_bad_lines_name_file_and_line(tmp_path, text, needle):
    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(T.TraceError, match=needle):
        T.load_mooncake(p)


def test_azure_wrong_columns_says_which(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,2\n")
    with pytest.raises(T.TraceError, match="missing column.*TIMESTAMP"):
        T.load_azure(p)


# ---- the RequestTrace kind ----

def test_request_trace_is_a_twin_kind_validated_with_field_paths(tmp_path):
    text = """apiVersion: kubetwin.io/v1alpha1
kind: RequestTrace
metadata: {name: bad}
spec:
  format: mooncake
  path: x.jsonl
  target: {kind: Gateway, name: g}
  model: m
"""
    diags = validate(load_text(text, "t.yaml"))
    assert any(d.field == "spec.target.kind" and d.line == 7 for d in diags), [d.render() for d in diags]


def test_path_is_relative_to_manifest_and_missing_file_is_clear(tmp_path):
    manifest = tmp_path / "sub" / "trace.yaml"
    manifest.parent.mkdir()
    (manifest.parent / "head.jsonl").write_text((DATA / "mooncake-conversation-head.jsonl").read_text())
    a = load_request_trace(rt({"format": "mooncake", "path": "head.jsonl"}), manifest)
    assert len(a) == 300
    with pytest.raises(KubetwinError) as exc:
        load_request_trace(rt({"format": "mooncake", "path": "nope.jsonl"}), manifest)
    d = exc.value.diagnostics[0]
    assert d.field == "spec.path" and str(manifest.parent / "nope.jsonl") in d.message and d.hint


def test_replay_fields_time_scale_offset_limit_loop():
    m = rt({"format": "azure-llm-2023", "path": "azure-llm-2023-conv-head.csv"})
    full = load_request_trace(m, DATA / "x.yaml")
    half = load_request_trace(rt(m["spec"] | {"timeScale": 0.5}), DATA / "x.yaml")
    assert np.allclose(half.arrival, full.arrival * 0.5)
    off = load_request_trace(rt(m["spec"] | {"startOffset": "60s", "limit": 10}), DATA / "x.yaml")
    skipped = int(np.sum(full.arrival < 60))
    assert len(off) == 10 and off.prompt[0] == full.prompt[skipped] and off.arrival[0] >= 0
    span = float(full.arrival[-1])
    looped = load_request_trace(rt(m["spec"] | {"loop": True}), DATA / "x.yaml", horizon=2.5 * span)
    looped.check()
    assert 2 * len(full) < len(looped) <= 3 * len(full) and looped.arrival[-1] < 2.5 * span


def test_requests_are_lazy_and_carry_segments():
    a = T.load_mooncake(DATA / "mooncake-conversation-head.jsonl")
    it = requests(a, "llama", priority=-1, start_id=100)
    assert iter(it) is it  # a generator, not a list
    r0 = next(it)
    assert (r0.id, r0.model, r0.priority, r0.prompt_tokens) == (100, "llama", -1, 6758)
    assert sum(r0.seg_tokens) == r0.prompt_tokens and len(r0.hashes) == 14
    assert all(isinstance(h, int) and h >= 0 for h in r0.hashes)
    assert sum(1 for _ in it) == 299


# ---- generator ----

def test_generator_one_million_requests_fast_and_deterministic():
    m = gen(rate=10_000, duration="100s", promptTokens={"lognormal": {"mean": 1000, "sigma": 0.8}},
            outputTokens=200)
    t0 = time.perf_counter()
    a = load_request_trace(m, "x.yaml", seed=7)
    elapsed = time.perf_counter() - t0
    assert 990_000 < len(a) < 1_010_000
    assert elapsed < 2.0, elapsed
    assert trace_stats(a)["prompt_mean"] == pytest.approx(1000, rel=0.02)
    b = load_request_trace(m, "x.yaml", seed=7)
    assert np.array_equal(a.arrival, b.arrival) and np.array_equal(a.seg_hashes, b.seg_hashes)
    c = load_request_trace(m, "x.yaml", seed=8)
    assert not np.array_equal(a.arrival[:100], c.arrival[:100])


def test_gamma_cv_controls_burstiness():
    def gap_cv(process: dict) -> float:
        a = load_request_trace(gen(rate=50, duration="2000s", promptTokens=10, outputTokens=10, process=process),
                               "x.yaml")
        g = np.diff(a.arrival)
        return float(g.std() / g.mean())
    assert gap_cv({"type": "poisson"}) == pytest.approx(1.0, abs=0.05)
    assert gap_cv({"type": "gamma", "cv": 3}) == pytest.approx(3.0, rel=0.15)


def test_rate_schedule_steps_and_diurnal_and_on_off():
    a = load_request_trace(gen(rate=10, duration="300s", promptTokens=5, outputTokens=5,
                               rateSchedule={"steps": [{"at": "100s", "rate": 50}, {"at": "200s", "rate": 0}]}),
                           "x.yaml")
    counts = np.histogram(a.arrival, bins=[0, 100, 200, 300])[0]
    assert counts[0] == pytest.approx(1000, rel=0.15) and counts[1] == pytest.approx(5000, rel=0.1)
    assert counts[2] == 0
    d = load_request_trace(gen(rate=10, duration="1d", promptTokens=5, outputTokens=5,
                               rateSchedule={"diurnal": {"peakAt": "14h", "trough": 0.2}}), "x.yaml")
    hourly = np.histogram(d.arrival, bins=24, range=(0, 86400))[0]
    assert int(np.argmax(hourly)) in (13, 14) and int(np.argmin(hourly)) in (1, 2)
    assert hourly.max() / hourly.min() > 3
    o = load_request_trace(gen(rate=20, duration="3600s", promptTokens=5, outputTokens=5,
                               process={"type": "on-off", "onDuration": "10s", "offDuration": "30s"}), "x.yaml")
    per_s = np.bincount(o.arrival.astype(int), minlength=3600)
    assert len(o) == pytest.approx(20 * 3600 / 4, rel=0.25)  # ON a quarter of the time
    assert (per_s == 0).mean() > 0.6  # silent seconds during OFF periods


def test_shared_prefix_matches_inference_perf_shape():
    sp = {"numGroups": 150, "promptsPerGroup": 5, "systemPromptLen": 6000, "questionLen": 1200, "outputLen": 1000}
    a = load_request_trace(gen(rate=20, duration="500s", sharedPrefix=sp), "x.yaml")
    a.check()
    assert set(a.prompt.tolist()) == {7200} and set(a.output.tolist()) == {1000}
    sys_h, q_h = a.seg_hashes[0::2], a.seg_hashes[1::2]
    assert len(np.unique(sys_h)) <= 150 and len(np.unique(q_h)) <= 750
    assert len(np.unique(q_h)) > 700  # ~10k draws cover nearly all 750 prompts
    # the same question always follows the same system prompt
    pairs = {(int(q), int(s)) for q, s in zip(q_h, sys_h, strict=True)}
    assert len(pairs) == len(np.unique(q_h))


def test_loras_and_sessions():
    a = load_request_trace(gen(rate=50, duration="200s", promptTokens=100, outputTokens=20,
                               loras=[{"name": "x", "weight": 3}, {"name": "y", "weight": 1}]), "x.yaml")
    share = float(np.mean(a.lora == 0))
    assert share == pytest.approx(0.75, abs=0.03)
    assert {r.lora for r in requests(a, "m")} == {"x", "y"}
    s = load_request_trace(gen(rate=50, duration="200s", promptTokens=100, outputTokens=20,
                               sessions={"concurrent": 5, "meanTurns": 4}), "x.yaml")
    s.check()
    reqs = list(requests(s, "m"))
    by_session: dict[str, list] = {}
    for r in reqs:
        by_session.setdefault(r.session, []).append(r)
    turns = [v for v in by_session.values() if len(v) >= 2]
    assert turns
    r1, r2 = turns[0][0], turns[0][1]
    # turn 2's prompt = turn 1's prompt + turn 1's answer + a new message, as a shared prefix
    assert r2.hashes[:len(r1.hashes)] == r1.hashes
    assert r2.prompt_tokens == r1.prompt_tokens + r1.output_tokens + 100
    assert np.mean([len(v) for v in by_session.values()]) == pytest.approx(4, rel=0.35)


def test_generator_errors_point_at_fields(tmp_path):
    with pytest.raises(KubetwinError) as exc:
        load_request_trace(gen(outputTokens=5), "x.yaml")
    assert exc.value.diagnostics[0].field == "spec.generator.promptTokens"
    with pytest.raises(KubetwinError) as exc:
        load_request_trace(gen(promptTokens={"value": 3, "lognormal": {"mean": 2, "sigma": 1}}, outputTokens=1),
                           "x.yaml")
    assert "exactly one" in exc.value.diagnostics[0].message
    with pytest.raises(KubetwinError) as exc:
        load_request_trace(gen(promptTokens={"fromTrace": {"format": "vidur", "path": "none.csv"}}, outputTokens=1),
                           tmp_path / "m.yaml")
    d = exc.value.diagnostics[0]
    assert d.field == "spec.generator.promptTokens.fromTrace.path" and "none.csv" in d.message


def test_token_counts_from_a_named_trace_stay_paired():
    src = {"fromTrace": {"format": "azure-llm-2023", "path": "azure-llm-2023-conv-head.csv"}}
    a = load_request_trace(gen(promptTokens=src, outputTokens=src), DATA / "m.yaml")
    head = T.load_azure(DATA / "azure-llm-2023-conv-head.csv")
    real = set(zip(head.prompt.tolist(), head.output.tolist(), strict=True))
    assert set(zip(a.prompt.tolist(), a.output.tolist(), strict=True)) <= real
