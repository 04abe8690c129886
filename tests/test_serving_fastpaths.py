"""The serving data plane's fast paths give what the plain ones gave: arrivals drained between queued events run in
the same order as one heap event each would (Environment.claim), and requests.csv is csv.writer's bytes."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from kubetwin.serving.dataplane import requestlog
from kubetwin.serving.dataplane.requestlog import RequestLog
from kubetwin.serving.observe.results import CSV_FIELDS, latencies, write_csv
from kubetwin.serving.types import Request
from kubetwin.sim.env import Environment


def _run(times: list[float], drain: bool) -> list[tuple[str, float]]:
    """A stream of arrivals plus timers (some at equal times, scheduled before and during the stream)."""
    env = Environment()
    seen: list[tuple[str, float]] = []
    for t in (1.0, 2.0, 2.5):
        env.at(t, lambda t=t: seen.append(("timer", env.now)))
    it = iter(times)

    def arrive() -> None:
        while True:
            seen.append(("arrival", env.now))
            if env.now == 2.0:  # an arrival schedules something due at once and something at the next arrival's time
                env.after(0, lambda: seen.append(("spawned-now", env.now)))
                env.at(3.0, lambda: seen.append(("spawned-3", env.now)))
            nxt = next(it, None)
            if nxt is None:
                return
            if not (drain and env.claim(nxt)):
                env.at(nxt, arrive)
                return

    env.at(next(it), arrive)
    env.run(10.0)
    return seen


def test_claim_keeps_the_heap_order() -> None:
    times = [0.5, 0.7, 1.0, 1.0, 1.5, 2.0, 2.0, 2.2, 3.0, 3.0, 4.0, 11.0]
    assert _run(times, drain=True) == _run(times, drain=False)


def test_claim_bounds() -> None:
    env = Environment()
    assert not env.claim(1.0)  # no run in progress
    moved: list[float] = []
    got: list[bool] = []

    def step() -> None:
        got.extend([env.claim(0.5), env.claim(2.0), env.claim(3.0), env.claim(1.5), env.claim(1.5), env.claim(6.0)])

    env.at(1.0, step)
    env.at(3.0, lambda: None)
    env.run(5.0, on_advance=moved.append)
    # past: no; before the queued 3.0: yes; tie with it: no; past again: no; horizon 5: no
    assert got == [False, True, False, False, False, False]
    assert moved == [1.0, 2.0, 3.0]
    assert env.peek() == float("inf")


def _reference_csv(a: dict[str, np.ndarray], labels: list[str]) -> str:
    """requests.csv as the row-at-a-time csv.writer wrote it."""
    lat = latencies(a)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)

    def f(x: float) -> str:
        return "" if np.isnan(x) else f"{x:.6f}"

    for i in range(len(a["id"])):
        w.writerow((int(a["id"][i]), labels[a["trace"][i]], labels[a["pool"][i]], f"{a['arrival'][i]:.6f}",
                    labels[a["pod"][i]], int(a["status"][i]), f(lat["ttft"][i]), f(lat["tpot"][i]),
                    f(lat["e2e"][i]), f(lat["queue"][i]), int(a["prompt"][i]), int(a["output"][i]),
                    int(a["cached"][i]), int(a["preempt"][i]), int(a["priority"][i]), labels[a["model"][i]],
                    labels[a["reason"][i]], labels[a["requested"][i]]))
    return buf.getvalue()


def test_requests_csv_is_csv_writers_bytes() -> None:
    rng = np.random.default_rng(3)
    pods = ["vllm-0", "", 'odd"pod', "a,b", "line\nbreak", "nan"]
    log = RequestLog()
    assert write_csv(log.arrays(), log.labels) == _reference_csv(log.arrays(), log.labels)
    for i in range(3000):
        r = Request(int(rng.integers(0, 10**6)), float(rng.random() * 100), int(rng.integers(1, 4000)),
                    int(rng.integers(1, 300)), (), ())
        r.pod = pods[i % len(pods)]
        r.status = int(rng.choice([200, 200, 0, 429, 503, 400]))
        if r.status == 200 or i % 3 == 0:
            r.scheduled = r.arrival + float(rng.random())
            r.first_token = r.scheduled + float(rng.random())
            r.finish = r.first_token + float(rng.random() * 5)
        r.cached_tokens, r.preemptions, r.priority = int(rng.integers(0, 64)), i % 2, i % 3 - 1
        log.add(r, "default/t" if i % 2 else "ns/other", "InferencePool/default/p")
    a = log.arrays()
    assert {k: v.dtype.kind for k, v in a.items()} == {k: "f" if k in RequestLog.FLOAT_COLS else "i" for k in a}
    assert np.all(np.diff(a["arrival"]) >= 0)
    assert write_csv(a, log.labels) == _reference_csv(a, log.labels)


def test_request_log_chunks_read_as_the_rows_did(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log keeps compact columns every _CHUNK rows: arrays() and columns() read the same values, in the same
    order, as one buffer of rows would (ids and counts exact, times float64)."""
    def logged(chunk: int) -> RequestLog:
        monkeypatch.setattr(requestlog, "_CHUNK", chunk)
        rng = np.random.default_rng(5)
        log = RequestLog()
        for i in range(500):
            r = Request(10**12 + i, float(rng.random() * 100), int(rng.integers(1, 100_000)), 7, (), ())
            r.pod, r.status, r.finish, r.priority = f"vllm-{i % 7}", 200 if i % 5 else 503, 1.0 / (i + 3), -(i % 3)
            log.add(r, "default/t", "InferencePool/default/p")
        return log

    whole = logged(10**6)
    chunked = logged(64)
    assert chunked.chunks and len(chunked) == len(whole) == 500
    for start in (0, 63, 64, 300, 499, 500):
        a, b = whole.columns(start, ("id", "finish", "pod")), chunked.columns(start, ("id", "finish", "pod"))
        assert all(np.array_equal(a[k], b[k]) for k in a)
    a, b = whole.arrays(), chunked.arrays()
    assert all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in RequestLog.COLS)
    assert a["id"].min() == 10**12 and write_csv(a, whole.labels) == write_csv(b, chunked.labels)
    # the run's last read releases the chunks as it sorts them: the same arrays, and nothing left in the log
    c = chunked.arrays(release=True)
    assert all(c[k].dtype == b[k].dtype and np.array_equal(c[k], b[k]) for k in RequestLog.COLS)
    assert not chunked.chunks and len(chunked) == 0


def test_histograms_grouped_by_pod_match_a_mask_per_pod() -> None:
    """vLLM's per-pod histograms from one sort of a scrape's rows: the counts, sums (bit for bit: each pod's values
    are added in log order) and observation counts a boolean mask per pod gives, over several scrapes."""
    from kubetwin.serving.observe.histograms import HISTOGRAMS, RequestHistograms

    rng = np.random.default_rng(11)
    log, hist = RequestLog(), RequestHistograms()
    rows: list[tuple[int, int, float, float, float, int]] = []  # pod, status, arrival, first, finish, output
    for scrape in range(4):
        for i in range(700):
            r = Request(scrape * 1000 + i, float(rng.random() * 10), 100, int(rng.integers(1, 60)), (), ())
            r.pod, r.status = f"vllm-{int(rng.integers(0, 9))}", 200 if i % 7 else 503
            r.first_token = r.arrival + float(rng.random() * 3)
            r.finish = r.first_token + float(rng.random() * 20)
            log.add(r, "t", "p")
            rows.append((log.names[r.pod], r.status, r.arrival, r.first_token, r.finish, r.output_tokens))
        hist.consume(log)
    expect: dict[int, dict[str, list]] = {}
    for lo in range(0, len(rows), 700):  # what the per-pod masks added, scrape by scrape
        m = np.asarray(rows[lo:lo + 700], dtype=np.float64)
        m = m[m[:, 1] == 200]
        ttft, e2e, decode = m[:, 3] - m[:, 2], m[:, 4] - m[:, 2], np.maximum(m[:, 5] - 1, 0)
        tpot = np.where(decode > 0, (m[:, 4] - m[:, 3]) / np.maximum(decode, 1), 0.0)
        pods = m[:, 0].astype(np.int64)
        for pod in np.unique(pods):
            sel = pods == pod
            per = expect.setdefault(int(pod), {n: [np.zeros(len(b) + 1, dtype=np.int64), 0.0, 0]
                                               for n, b in HISTOGRAMS.items()})
            for name, values, w in (("vllm:time_to_first_token_seconds", ttft[sel], np.ones(sel.sum(), np.int64)),
                                    ("vllm:time_per_output_token_seconds", tpot[sel], decode[sel].astype(np.int64)),
                                    ("vllm:e2e_request_latency_seconds", e2e[sel], np.ones(sel.sum(), np.int64))):
                idx = np.searchsorted(np.asarray(HISTOGRAMS[name]), values, side="left")
                h = per[name]
                h[0] += np.bincount(idx, weights=w, minlength=len(HISTOGRAMS[name]) + 1).astype(np.int64)
                h[1] += float((values * w).sum())
                h[2] += int(w.sum())
    assert sorted(hist.pods) == sorted(expect) and len(expect) == 9
    for pod, per in expect.items():
        for name, (counts, total, n) in per.items():
            got = hist.pods[pod][name]
            assert got[0].tolist() == counts.tolist() and got[1] == total and got[2] == n
