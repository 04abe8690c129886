"""Prompts on the wire: how a trace's token counts and shared prefixes become text, and how text becomes the
engine's Request again.

A trace knows each prompt only as token counts and prefix-segment hashes (Mooncake's 512-token hash_ids, a
generator's shared system prompt). To replay it against a real OpenAI-compatible server, `prompt_text` writes one
word per token, each segment's words drawn from that segment's hash alone: two prompts that share their first k
segments share the text of those segments exactly, so a real server's prefix cache, a real endpoint picker's prefix
index and the emulator all see the prefix the trace meant. The words come from a fixed list of common three-letter
English words (a twin choice, see VOCAB), which real tokenizers (Llama 3, GPT) read as one token each, so counts stay
close on a real server and a token is the 4 bytes the endpoint picker's prefix index assumes.

The emulator reads text back with `engine_request`: its tokenizer splits on white space (one word, one token: a twin
assumption, exact for the text `prompt_text` writes) and hashes the tokens in vLLM's 16-token blocks, each block's
hash chained to its parent's as vLLM's prefix cache does (vllm/v1/core/kv_cache_utils.py hash_block_tokens), so the
twin's engine caches them as it would cache a trace's segments.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable, Sequence

import numpy as np

from kubetwin.serving.traces.arrays import mix_int, splitmix64
from kubetwin.serving.types import BLOCK_TOKENS, Request

# 256 common three-letter English words (a twin choice): with its separating space every token is 4 bytes on the
# wire, the 4 characters per token the Inference Extension's prefix plugin reckons with (serving.router.
# prefix_index AVERAGE_CHARS_PER_TOKEN), so its 64-byte blocks are the twin's 16-token blocks and a live picker sees
# the prefix the twin's picker sees; most real tokenizers read each word with its leading space as one token.
# Index = a byte of the segment hash mixed with the word's position.
VOCAB = tuple("""
the and for are but not you all any can had her was one our out day get has him his how man new now old see two
way who boy did its let put say she too use act add age ago aid aim air arm art ask bad bag bar bed big bit box bus
buy car cat cup cut die dog dry due ear eat egg end eye far fat few fit fix fly fun gas god gun guy hat hit hot ice
ill job key kid lab law lay leg lie lot low mad map may men mix net nor odd off oil own pay per pet pop pot ran raw
red rid row run sad saw sea set shy sir sit six sky son sun tax tea ten tie tip toe top toy try van war web wet why
win yes yet zoo ash bay bee bet bid bin bow cab cap cow cry dam dig dot elf fan fee fig fog fox fur gap gem gym ham
hay hen hip hop hug hum ink inn jam jar jaw jet joy kit lap lid lip log mat mud mug nap nut oak oar owl pad pan paw
pea pen pie pig pin pit pub rag rat ray rib rim rod rug sap sip sow spa spy sum tab tag tan tap tar tin ton tub tug
vet vow wax wig wit yak yam zip ant ape bat bug bun cub cod den dew doe dug ebb eel emu era eve ewe fad fin gal gel
""".split()[:256])
assert len(VOCAB) == 256 and len(set(VOCAB)) == 256 and {len(w) for w in VOCAB} == {3}, "256 distinct 3-letter words"
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


COUNT_SLICE_CHARS = 1 << 20  # count_tokens' slice: ~250k words, ~10 ms of str.split


async def tokens_or_count(text: str, slice_chars: int = COUNT_SLICE_CHARS) -> tuple[int, list[str] | None]:
    """A prompt's token count, and its tokens when it is small enough to split at once (so the request is built
    from them without splitting again); a bigger one is counted by count_tokens, in slices, without the list."""
    if len(text) <= slice_chars:
        tokens = tokens_of(text)
        return len(tokens), tokens
    return await count_tokens(text, slice_chars), None


async def count_tokens(text: str, slice_chars: int = COUNT_SLICE_CHARS) -> int:
    """len(tokens_of(text)) without the list, in bounded slices with the event loop served between them: a 50 MB
    prompt (over any max_model_len, so never hashed) costs the loop ~10 ms at a time, not seconds (issue 34)."""
    n = len(text)
    if n <= slice_chars:
        return len(text.split())
    count = 0
    prev_word = False  # the previous slice ended inside a word
    for i in range(0, n, slice_chars):
        part = text[i:i + slice_chars]
        count += len(part.split())
        if prev_word and not part[0].isspace():
            count -= 1  # one word cut in two by the slice boundary
        prev_word = not part[-1].isspace()
        await asyncio.sleep(0)
    return count


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
    for i in range(0, len(tokens), block):  # int hashing: 87k tokens' engine_request ~22 ms (numpy scalars: 92)
        chunk = tokens[i:i + block]
        value = zlib.crc32(" ".join(chunk).encode()) | (len(chunk) << 32)
        prev = mix_int(prev, value)
        hashes.append(prev)
        sizes.append(len(chunk))
    return tuple(hashes), tuple(sizes)


def engine_request(rid: int, arrival: float, prompt: str, max_tokens: int, model: str = "", lora: str | None = None,
                   priority: int = 0, tokens: list[str] | None = None) -> Request:
    """The engine's Request for a prompt received over HTTP (`tokens`: the prompt already split, when it was)."""
    tokens = tokens_of(prompt) if tokens is None else tokens
    hashes, sizes = block_hashes(tokens)
    return Request(rid, arrival, len(tokens), max_tokens, hashes, sizes, model=model, lora=lora, priority=priority)

