"""The live tools' edges (issue 34 item 7): an unknown gateway preset and a config key typo refused in one line or in
validate's words (file, key path, did-you-mean), `emulate --port 0` naming the port it bound, a --max-model-len
past the model's context refused in vLLM's words, loadgen saying a base URL lacks /v1, max_tokens "5" read as vLLM's
pydantic model reads it, and a stream cut mid-response counted as stream_cut, not 200."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "httpx", "uvicorn")

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from live_fakes import generator_trace
from typer.testing import CliRunner

from kubetwin.api.loader import load_text
from kubetwin.cli.loadgen import summary_line
from kubetwin.cli.main import app
from kubetwin.live import loadgen as lg
from kubetwin.live.emulator import EmulatorConfig, EmulatorConfigError, EmulatorThread
from kubetwin.live.emulator.config import build_served
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen2.5-7B-Instruct"  # max_position_embeddings 32768
T = 10.0
VLLM_TOO_LONG = ("User-specified max_model_len (40000) is greater than the derived max_model_len "
                 "(max_position_embeddings=32768.0 or model_max_length=None in model's config.json). To allow "
                 "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")


def _env(**extra: str) -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def _kubetwin(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubetwin.cli.main", *args], env=_env(), capture_output=True,
                          text=True, timeout=timeout)


# ---- kubetwin gateway --config ----

def test_an_unknown_preset_is_one_line_with_the_presets_and_a_did_you_mean(tmp_path: Path) -> None:
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("listen: 127.0.0.1:0\nadminListen: 127.0.0.1:0\nendpoints: [127.0.0.1:1]\npreset: ep\n")
    res = _kubetwin("gateway", "--config", str(cfg))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"{cfg}:4: error: preset: unknown router preset 'ep'; known: round-robin, ")
    assert "epp, " in lines[0] and lines[0].endswith("; did you mean 'epp'?")


def test_a_config_key_typo_names_the_file_line_key_path_and_the_closest_key(tmp_path: Path) -> None:
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("listn: 127.0.0.1:0\nadminListen: 127.0.0.1:0\nendpoints: [127.0.0.1:1]\nenvoy:\n"
                   "  failureMod: FailOpen\n")
    res = _kubetwin("gateway", "--config", str(cfg))
    assert res.returncode == 2 and "Traceback" not in res.stderr and "pydantic" not in res.stderr
    assert f'{cfg}:1: error: listn: strict decoding error: unknown field "listn"\n' \
           "    fix: did you mean listen? rename listn to listen, or remove it" in res.stderr
    assert f'{cfg}:5: error: envoy.failureMod: strict decoding error: unknown field "envoy.failureMod"\n' \
           "    fix: did you mean failureMode? rename failureMod to failureMode, or remove it" in res.stderr


# ---- kubetwin emulate vllm ----

def test_emulate_port_0_prints_the_port_it_bound() -> None:
    p = subprocess.Popen([sys.executable, "-m", "kubetwin.cli.main", "emulate", "vllm", "--model", MODEL, "--port",
                          "0", "--time-scale", "100"], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stderr is not None
        banner = p.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+) \(time scale", banner)
        assert found is not None, banner
        port = int(found.group(1))
        assert port != 0
        deadline = time.monotonic() + 30
        while True:  # the banner's port is the one serving
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=T).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "nothing answered on the printed port"
            time.sleep(0.05)
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stderr is not None:
            p.stderr.close()
    assert p.returncode is not None  # no process left behind


def test_max_model_len_past_the_models_context_is_refused_in_vllms_words(monkeypatch: pytest.MonkeyPatch) -> None:
    res = _kubetwin("emulate", "vllm", "--model", QWEN, "--max-model-len", "40000", "--port", "0")  # bounded wait
    assert res.returncode == 1
    assert f"error: {VLLM_TOO_LONG} VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution." in res.stderr
    assert build_served(EmulatorConfig(model=QWEN, vllm_args=["--max-model-len", "32768"])).max_model_len == 32768
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # vLLM then only warns
    assert build_served(EmulatorConfig(model=QWEN, vllm_args=["--max-model-len", "40000"])).max_model_len == 40000
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0")
    with pytest.raises(EmulatorConfigError, match=re.escape(VLLM_TOO_LONG)):
        build_served(EmulatorConfig(model=QWEN, vllm_args=["--max-model-len", "40000"]))


def test_validate_refuses_the_same_max_model_len_on_a_pod() -> None:
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "default"},
           "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                                    "args": ["--model", QWEN, "--max-model-len", "40000"],
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    diags = [d for d in validate(load_text(yaml.safe_dump(doc), "pod.yaml")) if d.severity == "error"]
    assert [d.message.startswith(VLLM_TOO_LONG) for d in diags] == [True]
    doc["spec"]["containers"][0]["env"] = [{"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": "1"}]
    assert not [d for d in validate(load_text(yaml.safe_dump(doc), "pod.yaml")) if d.severity == "error"]


def test_max_tokens_is_read_as_vllms_pydantic_model_reads_it() -> None:
    with EmulatorThread(EmulatorConfig(model=MODEL, port=0, time_scale=100.0)) as e:
        url = e.url + "/v1/completions"
        r = httpx.post(url, json={"model": MODEL, "prompt": "a b", "max_tokens": "5"}, timeout=T)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 5  # lax int: "5" is 5
        r = httpx.post(url, json={"model": MODEL, "prompt": "a b", "max_tokens": "five"}, timeout=T)
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["code"] == 400 and err["message"] == (
            "1 validation error:\n  {'type': 'int_parsing', 'loc': ('body', 'max_tokens'), 'msg': 'Input should be "
            "a valid integer, unable to parse string as an integer', 'input': 'five'}")
        r = httpx.post(url, json={"model": MODEL, "prompt": "a b", "max_tokens": 0}, timeout=T)
        assert r.status_code == 400 and r.json()["error"]["message"] == "max_tokens must be at least 1, got 0."


# ---- kubetwin loadgen ----

def _trace(tmp: Path, model: str = MODEL) -> Path:
    return generator_trace(tmp, model)


def test_loadgen_says_a_base_url_without_v1_is_the_problem(tmp_path: Path) -> None:
    with EmulatorThread(EmulatorConfig(model=MODEL, port=0, time_scale=100.0)) as e:
        res = CliRunner().invoke(app, ["loadgen", str(_trace(tmp_path)), "--url", e.url, "--timeout", "10"])
        assert res.exit_code == 0, res.output
        summary = lg.run(_trace(tmp_path), lg.Options(e.url, timeout=10))
        n = summary["serving"]["overall"]["requests"]
        assert n > 0 and summary["loadgen"]["error_codes"] == {"404": n}
        assert summary["loadgen"]["problems"] == [
            f"{n} of {n} requests got 404 Not Found from {e.url}/completions: the base URL probably lacks /v1: "
            f"pass --url {e.url}/v1 (loadgen posts to BASE_URL/completions, as the openai SDK takes its base_url)"]
        assert f"loadgen: {n} of {n} requests got 404 Not Found" in res.output and f"--url {e.url}/v1" in res.output
        # vLLM's own 404 (an unknown model) is not a missing route
        unknown = lg.run(_trace(tmp_path, model="nope"), lg.Options(e.url + "/v1", timeout=10))
        assert unknown["loadgen"]["error_codes"] == {"404": unknown["serving"]["overall"]["requests"]}
        assert unknown["loadgen"]["problems"] == []


def test_a_stream_cut_mid_response_is_counted_as_stream_cut_not_200(tmp_path: Path) -> None:
    with EmulatorThread(EmulatorConfig(model=MODEL, port=0, time_scale=100.0, crash_after_tokens=2)) as e:
        out = tmp_path / "out"
        summary = lg.run(_trace(tmp_path), lg.Options(e.url + "/v1", timeout=10), out)
    o, n = summary["serving"]["overall"], summary["serving"]["overall"]["requests"]
    assert n > 0 and o["completed"] == 0 and o["failed_other"] == n
    assert summary["loadgen"]["error_codes"] == {"stream_cut": n}  # not "200", whatever its headers said
    assert f"{n} other (stream_cut {n})" in summary_line(summary)
    rows = (out / "requests.csv").read_text().splitlines()[1:]
    assert len(rows) == n and all(",stream_cut: the connection broke after 2 tokens: " in r for r in rows)
