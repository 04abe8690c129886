"""The endpoint picker as Envoy's external processor (envoy.service.ext_proc.v3.ExternalProcessor), speaking the
Inference Extension's endpoint picker protocol (GIE docs/proposals/004-endpoint-picker-protocol/README.md; the
reference handler GIE pkg/epp/handlers/{server,request}.go):

- request_body_mode FULL_DUPLEX_STREAMED (Envoy sends the body chunks here and forwards only what comes back):
  request headers are held until the whole body has streamed in, then one cycle picks an endpoint and the answer is
  a HeadersResponse setting `x-gateway-destination-endpoint` (and Content-Length) with clear_route_cache, dynamic
  metadata `envoy.lb` / `x-gateway-destination-endpoint` with the same value, and the body streamed back unchanged
  in one StreamedBodyResponse with end_of_stream; a request without a body is answered at its headers;
- request_body_mode BUFFERED (`buffered`, the gateway's default, where Envoy times every message out): the headers
  are answered at once (Envoy waits for that before it sends the body), the whole body comes in one message, and the
  pick is a BodyResponse with the same header mutation, clear_route_cache and metadata;
- no endpoint: an ImmediateResponse 503 once the hold (holdTimeout, capped below Envoy's message_timeout) ends; a
  sheddable request under saturation: ImmediateResponse 429;
- the served endpoint is read back from the ext_proc request's metadata_context `envoy.lb` /
  `x-gateway-destination-endpoint-served` when the data plane sets it, else from the response header of that name
  (the bundled Envoy bootstrap adds it from %UPSTREAM_REMOTE_ADDRESS%);
- gRPC health: "", envoy.service.ext_proc.v3.ExternalProcessor, liveness and readiness all SERVING."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kubetwin.live.gateway.accesslog import AccessLog
from kubetwin.live.gateway.picker import DEST_HEADER, OBJECTIVE_HEADER, SERVED_HEADER, LivePicker
from kubetwin.live.requestbody import RequestError, decode_body_async, gateway_error_body, too_large

SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor"
LB_NAMESPACE = "envoy.lb"
HEALTH_SERVICES = ("", SERVICE, "liveness", "readiness")


def _headers(h: pb.HttpHeaders) -> dict[str, str]:
    out: dict[str, str] = {}
    for hv in h.headers.headers:
        out[hv.key.lower()] = hv.raw_value.decode("utf-8", "replace") if hv.raw_value else hv.value
    return out


def _set(key: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=key, raw_value=value.encode()))


def _immediate(status: int, message: str) -> pb.ProcessingResponse:
    return pb.ProcessingResponse(immediate_response=pb.ImmediateResponse(
        status=http_status_pb2.HttpStatus(code=status),
        headers=pb.HeaderMutation(set_headers=[_set("content-type", "application/json")]),
        body=gateway_error_body(status, message), details=message.replace(" ", "_")[:64]))


def _picked(endpoint: str, body: bytes, with_body: bool, buffered: bool = False) -> list[pb.ProcessingResponse]:
    """The headers answer (destination header, Content-Length, dynamic metadata) and, for a request with a body, the
    body streamed back unchanged (GIE populateRequestHeaderResponse / HandleRequestBody). `endpoint` may be a
    comma-separated list, best first (maxNumOfEndpoints). Buffered body mode (the headers were already answered
    with CONTINUE): one BodyResponse carrying the header mutation and clear_route_cache, the body left as Envoy
    buffered it (the Inference Extension's v1alpha1-era wiring, its test/e2e Envoy config; Envoy applies a body
    response's header mutation while the headers are still held, ext_proc.proto CommonResponse)."""
    sets = [_set(DEST_HEADER, endpoint)]
    md = struct_pb2.Struct()
    md.update({LB_NAMESPACE: {DEST_HEADER: endpoint}})
    if buffered and with_body:
        return [pb.ProcessingResponse(request_body=pb.BodyResponse(response=pb.CommonResponse(
            header_mutation=pb.HeaderMutation(set_headers=sets), clear_route_cache=True)), dynamic_metadata=md)]
    if with_body:
        sets.append(_set("content-length", str(len(body))))
    out = [pb.ProcessingResponse(
        request_headers=pb.HeadersResponse(response=pb.CommonResponse(
            header_mutation=pb.HeaderMutation(set_headers=sets), clear_route_cache=True)),
        dynamic_metadata=md)]
    if with_body:
        out.append(pb.ProcessingResponse(request_body=pb.BodyResponse(response=pb.CommonResponse(
            body_mutation=pb.BodyMutation(streamed_response=pb.StreamedBodyResponse(body=body, end_of_stream=True))))))
    return out


def _served(req: pb.ProcessingRequest) -> str:
    fm = req.metadata_context.filter_metadata
    if LB_NAMESPACE in fm:
        v = fm[LB_NAMESPACE].fields.get(SERVED_HEADER)
        if v is not None and v.string_value:
            return v.string_value
    return ""


class ExtProcServicer(pb_grpc.ExternalProcessorServicer):
    def __init__(self, picker: LivePicker, log: AccessLog, hold_cap: float, buffered: bool = False) -> None:
        self.picker, self.log, self.hold_cap, self.buffered = picker, log, hold_cap, buffered

    async def Process(self, request_iterator: AsyncIterator[pb.ProcessingRequest],  # noqa: N802 - gRPC's name
                      context: Any) -> AsyncIterator[pb.ProcessingResponse]:
        t0 = time.perf_counter()
        headers: dict[str, str] = {}
        chunks: list[bytes] = []
        size = 0
        req = None
        endpoint = ""
        status = 0
        error = ""
        m = self.picker.metrics
        try:
            async for msg in request_iterator:
                kind = msg.WhichOneof("request")
                if kind == "request_headers":
                    headers = _headers(msg.request_headers)
                    if msg.request_headers.end_of_stream:
                        out, req, endpoint, status, error = await self._route(headers, b"", with_body=False)
                        for r in out:
                            yield r
                    elif self.buffered:  # Envoy waits for this answer before it sends the buffered body
                        yield pb.ProcessingResponse(request_headers=pb.HeadersResponse())
                elif kind == "request_body":
                    if status:  # already answered (413): Envoy ends the stream; ignore what is still on the way
                        continue
                    chunks.append(msg.request_body.body)
                    size += len(msg.request_body.body)
                    if size > self.picker.cfg.maxRequestBodyBytes:  # answered now, the rest never held here
                        chunks.clear()
                        exc = too_large(self.picker.cfg.maxRequestBodyBytes)
                        status, error = exc.status, exc.message
                        yield _immediate(status, error)
                        continue
                    if msg.request_body.end_of_stream:
                        out, req, endpoint, status, error = await self._route(headers, b"".join(chunks), True)
                        for r in out:
                            yield r
                elif kind == "request_trailers":
                    if req is None and not status:  # the body ended with trailers
                        out, req, endpoint, status, error = await self._route(headers, b"".join(chunks), True)
                        for r in out:
                            yield r
                    yield pb.ProcessingResponse(request_trailers=pb.TrailersResponse())
                elif kind == "response_headers":
                    rh = _headers(msg.response_headers)
                    served = _served(msg) or rh.get(SERVED_HEADER, "")
                    if served and req is not None and served != endpoint:  # a retry went down the list
                        if endpoint:
                            self.picker.finished(req, endpoint)
                        self.picker.routed(req, served)
                    if served:
                        endpoint = served
                    try:
                        status = int(rh.get(":status", "0"))
                    except ValueError:
                        status = 0
                    yield pb.ProcessingResponse(response_headers=pb.HeadersResponse())
                elif kind == "response_body":  # only if a mode override asked for it: pass it on
                    yield pb.ProcessingResponse(response_body=pb.BodyResponse())
                elif kind == "response_trailers":
                    yield pb.ProcessingResponse(response_trailers=pb.TrailersResponse())
        finally:
            dur = time.perf_counter() - t0
            model = req.model if req is not None else ""
            if req is not None and endpoint:
                self.picker.finished(req, endpoint)
            if req is None and status:  # refused before routing: no model, no label slot (as standalone counts it)
                m.count_refused(status)
            elif req is not None:
                label = m.model_label(model)
                m.requests.labels(label, label).inc()
                if status >= 400 or error:
                    m.count_error(label, status)
                else:
                    m.duration.labels(label, label).observe(dur)
                self.log.write(objective=headers.get(OBJECTIVE_HEADER, ""), model=model,
                               priority=req.priority if req is not None else None, endpoint=endpoint or None,
                               status=status, ttft_ms=None, duration_ms=round(dur * 1e3, 3), retries=0,
                               error=error or None)

    async def _route(self, headers: dict[str, str], body: bytes, with_body: bool
                     ) -> tuple[list[pb.ProcessingResponse], Any, str, int, str]:
        try:  # the rule the emulator and the standalone gateway apply (live.requestbody)
            req = self.picker.request(await decode_body_async(body, self.picker.cfg.maxRequestBodyBytes), headers)
        except RequestError as exc:
            return [_immediate(exc.status, exc.message)], None, "", exc.status, exc.message
        p = await self.picker.pick(req, hold=self.hold_cap, n=self.picker.endpoints_per_pick)
        if p.endpoint is None:
            return [_immediate(p.status, p.reason)], req, "", p.status, p.reason
        return _picked(p.destination, body, with_body, self.buffered), req, p.endpoint, 0, ""


class ExtProcServer:
    """The gRPC server: the ext_proc service and the health services."""

    def __init__(self, picker: LivePicker, address: str, log: AccessLog, hold_cap: float,
                 buffered: bool = False, max_body: int = 0) -> None:
        self.picker, self.address = picker, address
        options: list[tuple[str, int]] = [("grpc.so_reuseport", 0)]
        if max_body:  # a buffered body arrives in one message: gRPC's 4 MiB default would refuse a larger one
            options.append(("grpc.max_receive_message_length", max_body + 64 * 1024))
        self.server = grpc.aio.server(options=options)
        pb_grpc.add_ExternalProcessorServicer_to_server(ExtProcServicer(picker, log, hold_cap, buffered), self.server)
        self.health = health.aio.HealthServicer() if hasattr(health, "aio") else health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = self.server.add_insecure_port(address)

    async def start(self) -> None:
        await self.server.start()
        for s in HEALTH_SERVICES:
            r = self.health.set(s, health_pb2.HealthCheckResponse.SERVING)
            if asyncio.iscoroutine(r):
                await r

    async def stop(self, grace: float) -> None:
        for s in HEALTH_SERVICES:
            r = self.health.set(s, health_pb2.HealthCheckResponse.NOT_SERVING)
            if asyncio.iscoroutine(r):
                await r
        await self.server.stop(grace)
