"""Prompts on the wire: how a trace's token counts and shared prefixes become text, and how text becomes the
engine's Request again.

A trace knows each prompt only as token counts and prefix-segment hashes (Mooncake's 512-token hash_ids, a
generator's shared system prompt). To replay it against a real OpenAI-compatible server, `prompt_text` writes one
word per token, each segment's words drawn from that segment's hash alone: two prompts that share their first k
segments share the text of those segments exactly, so a real server's prefix cache, a real endpoint picker's prefix
index and the emulator all see the prefix the trace meant. The words come from a fixed list of common English words
(a twin choice), most of which real tokenizers (Llama 3, GPT) read as one token each, so counts stay close on a real
server.

The emulator reads text back with `engine_request`: its tokenizer splits on white space (one word, one token: a twin
assumption, exact for the text `prompt_text` writes) and hashes the tokens in vLLM's 16-token blocks, each block's
hash chained to its parent's as vLLM's prefix cache does (vllm/v1/core/kv_cache_utils.py hash_block_tokens), so the
twin's engine caches them as it would cache a trace's segments.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import numpy as np

from kubetwin.serving.traces import mix, splitmix64
from kubetwin.serving.types import BLOCK_TOKENS, Request

# 256 short common English words (a twin choice); index = a byte of the segment hash mixed with the word's position.
VOCAB = tuple("""
the of and to in is it you that he was for on are with as his they be at one have this from or had by hot word but
what some we can out other were all there when up use your how said an each she which do their time if will way
about many then them write would like so these her long make thing see him two has look more day could go come did
number sound no most people my over know water than call first who may down side been now find any new work part
take get place made live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean before move right boy old
too same tell does set three want air well also play small end put home read hand port large spell add even land
here must big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer school grow study
still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start
might story saw far sea draw left late run while press close night real life few north open seem together next white
children begin got walk example ease paper group always music those both mark often letter until mile river car feet
care second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch
""".split()[:256])
assert len(VOCAB) == 256 and len(set(VOCAB)) == 256, "VOCAB must hold 256 distinct words"
_U64 = np.uint64


def segment_words(h: int, n: int) -> list[str]:
    """The n words of a segment whose prefix hash is h: word j from splitmix64(h + j)'s low byte."""
    if n <= 0:
        return []
    with np.errstate(over="ignore"):
        idx = splitmix64(np.arange(n, dtype=_U64) + _U64(h)) & _U64(0xFF)
    return [VOCAB[i] for i in idx.tolist()]


def prompt_text(hashes: Sequence[int], seg_tokens: Sequence[int]) -> str:
    """A prompt of sum(seg_tokens) words whose segments' text depends only on their prefix hashes."""
    return " ".join(w for h, n in zip(hashes, seg_tokens, strict=True) for w in segment_words(int(h), int(n)))


def output_text(n: int, seed: int = 0) -> list[str]:
    """n generated tokens as words (what the emulator streams back)."""
    return segment_words(seed, n)


def tokens_of(text: str) -> list[str]:
    """The emulator's tokenizer: white-space separated words (see the module docstring)."""
    return text.split()


def chat_prompt(messages: Iterable[dict]) -> str:
    """The prompt of a chat completion as the emulator reads it: the messages' text contents in order, joined by a
    space (no chat-template tokens: a twin assumption). Content parts of type text are taken, others ignored."""
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return " ".join(p for p in parts if p)


def block_hashes(tokens: Sequence[str], block: int = BLOCK_TOKENS) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(hashes, seg_tokens): one segment per `block`-token block (the last may be partial), each hash chained to the
    previous block's as vLLM's prefix cache chains its block hashes."""
    hashes: list[int] = []
    sizes: list[int] = []
    prev = 0
    for i in range(0, len(tokens), block):
        chunk = tokens[i:i + block]
        value = zlib.crc32(" ".join(chunk).encode()) | (len(chunk) << 32)
        prev = int(mix(prev, value))
        hashes.append(prev)
        sizes.append(len(chunk))
    return tuple(hashes), tuple(sizes)


def engine_request(rid: int, arrival: float, prompt: str, max_tokens: int, model: str = "", lora: str | None = None,
                   priority: int = 0) -> Request:
    """The engine's Request for a prompt received over HTTP."""
    tokens = tokens_of(prompt)
    hashes, sizes = block_hashes(tokens)
    return Request(rid, arrival, len(tokens), max_tokens, hashes, sizes, model=model, lora=lora, priority=priority)

