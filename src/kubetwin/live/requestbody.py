"""Request bodies on the wire, decoded and checked once for every live server: the vLLM emulator
(live.emulator.server), the standalone gateway (live.gateway.standalone) and the Envoy mode's ext_proc picker
(live.gateway.extproc) all call `decode_body` / `check_length`, so a hostile body gets the same 4xx everywhere and
never reaches code that would raise (a 500, a dropped connection, a retry on another replica).

The rules and their words:
- a body over the cap: 413 (`DEFAULT_MAX_BODY_BYTES`, a twin choice: vLLM itself sets none, uvicorn reads any body;
  the cap is the emulator's --max-request-body-bytes and the gateway's maxRequestBodyBytes); a Content-Length that is
  not a non-negative integer: 400;
- a body that is not JSON, not UTF-8, nested deeper than `MAX_JSON_DEPTH`, or not an object: 400 in pydantic's
  words, as vLLM's FastAPI validation handler answers (vllm/entrypoints/openai/api_server.py
  validation_exception_handler: RequestValidationError -> ErrorResponse with HTTP 400);
- a string holding a lone UTF-16 surrogate ("\\ud800": valid JSON, but no UTF-8 text can carry it): 400, pydantic's
  string_unicode error (pydantic-core cannot turn such a str into Rust's UTF-8 String);
- `model` present but not a string: 400, pydantic's string_type error.
Messages name the field and the rule, never a Python exception.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # 32 MiB: 60x a 131,072-token prompt of the twin's 4-byte words
# pydantic-core's JSON parser (jiter) stops at 200 levels ("recursion limit exceeded"); an OpenAI body needs < 10
MAX_JSON_DEPTH = 200
THREAD_BYTES = 1 << 20  # bodies from 1 MiB are decoded on a worker thread (the event loop keeps serving streams)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")

JSON_INVALID = "JSON decode error"  # pydantic json_invalid
NOT_AN_OBJECT = "Input should be a valid dictionary or object to extract fields from"  # pydantic model_type
NOT_A_STRING = "Input should be a valid string"  # pydantic string_type
NOT_UNICODE = "Input should be a valid string, unable to parse raw data as a unicode string"  # string_unicode


class RequestError(Exception):
    """A request refused before it is served: the HTTP status and the message to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def too_large(limit: int) -> RequestError:
    return RequestError(413, f"Request body too large: the limit is {limit} bytes.")


def check_length(value: str | bytes | None, limit: int) -> int:
    """The Content-Length header's value as an int (0 when absent); 400 when it is not a non-negative decimal
    integer (RFC 9110 8.6), 413 when it is over `limit`."""
    if value is None:
        return 0
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        raise RequestError(400, "Invalid Content-Length header.")
    n = int(text)
    if n > limit:
        raise too_large(limit)
    return n


def _walk(obj: Any, strings: bool) -> str | None:
    """Why the decoded body breaks a rule (depth over MAX_JSON_DEPTH, a lone surrogate), or None. Iterative, so no
    body can exhaust the stack."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        if isinstance(o, dict):
            if depth > MAX_JSON_DEPTH:
                return f"{JSON_INVALID}: nesting deeper than {MAX_JSON_DEPTH} levels"
            for k, v in o.items():
                if strings and not k.isascii():
                    stack.append((k, depth))
                stack.append((v, depth + 1))
        elif isinstance(o, list):
            if depth > MAX_JSON_DEPTH:
                return f"{JSON_INVALID}: nesting deeper than {MAX_JSON_DEPTH} levels"
            stack.extend((v, depth + 1) for v in o)
        elif strings and isinstance(o, str) and not o.isascii():
            try:
                o.encode("utf-8")
            except UnicodeEncodeError:
                return NOT_UNICODE
    return None


def decode_body(raw: bytes, limit: int = DEFAULT_MAX_BODY_BYTES) -> dict[str, Any]:
    """The JSON object of a request body (RequestError when it breaks a rule of the module docstring). An empty body
    is an empty object (a GET)."""
    if len(raw) > limit:
        raise too_large(limit)
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except RecursionError:
        raise RequestError(400, f"{JSON_INVALID}: nesting deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError:
        raise RequestError(400, f"{JSON_INVALID}: the body is not UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError: its msg/position are JSON's, not Python's
        msg = getattr(exc, "msg", "invalid JSON")
        pos = getattr(exc, "pos", None)
        raise RequestError(400, f"{JSON_INVALID}: {msg}" + (f" at byte {pos}" if pos is not None else "")) from None
    # the walk is needed only when the body could break a rule: more brackets than the depth limit, or a \ud8..\udf
    # escape (raw UTF-8 cannot carry a surrogate: json.loads refuses it as undecodable)
    deep = raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH
    strings = _SURROGATE_ESCAPE.search(raw) is not None
    if deep or strings:
        why = _walk(body, strings)
        if why is not None:
            raise RequestError(400, why)
    if not isinstance(body, dict):
        raise RequestError(400, NOT_AN_OBJECT)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(400, f"model: {NOT_A_STRING}")
    return body


async def decode_body_async(raw: bytes, limit: int = DEFAULT_MAX_BODY_BYTES) -> dict[str, Any]:
    """decode_body, on a worker thread for a big body so the event loop keeps relaying other streams meanwhile."""
    if len(raw) < THREAD_BYTES:
        return decode_body(raw, limit)
    return await asyncio.to_thread(decode_body, raw, limit)


def error_json(status: int, message: str, kind: str) -> dict[str, Any]:
    """vLLM's ErrorResponse body (vllm/entrypoints/openai/protocol.py ErrorResponse / ErrorInfo)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


# A response that began with a success status and broke off mid-body: loadgen's error code for it and the gateway's
# error_code label (never the success status it began with)
STREAM_CUT = "stream_cut"

# The gateway's own answers (standalone and Envoy mode alike): OpenAI-style error types for what it refuses itself
GATEWAY_ERROR_KINDS = {429: "rate_limit_error", 503: "service_unavailable"}


def gateway_error_body(status: int, message: str) -> bytes:
    """The JSON error body either gateway answers with when the reply is its own (no replica's)."""
    kind = GATEWAY_ERROR_KINDS.get(status, "error")
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
