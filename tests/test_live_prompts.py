"""live.prompts: a trace's shared prefixes survive the trip to text and back (what makes live prefix caching and
prefix-aware routing comparable with the twin's)."""

from __future__ import annotations

from kubetwin.live.prompts import (
    VOCAB,
    block_hashes,
    chat_prompt,
    engine_request,
    prompt_text,
    tokens_of,
)


def test_a_prompt_has_one_word_per_token_from_the_vocabulary() -> None:
    text = prompt_text([11, 22], [512, 100])
    words = tokens_of(text)
    assert len(words) == 612 and all(w in VOCAB for w in words)
    assert len(set(words)) > 100  # not one word repeated: the hash drives the choice


def test_prompts_that_share_segments_share_text_and_block_hashes_exactly_there() -> None:
    a = prompt_text([1, 2, 3], [512, 512, 40])
    b = prompt_text([1, 2, 9], [512, 512, 40])  # same first two segments (prefix hashes), a different third
    wa, wb = tokens_of(a), tokens_of(b)
    assert wa[:1024] == wb[:1024] and wa[1024:] != wb[1024:]
    ha, _ = block_hashes(wa)
    hb, _ = block_hashes(wb)
    same = sum(1 for x, y in zip(ha, hb, strict=True) if x == y)
    assert ha[:64] == hb[:64] and same == 64  # 1,024 shared tokens = 64 blocks of 16; nothing after the fork


def test_block_hashes_chain_like_vllm_the_same_block_after_a_different_prefix_differs() -> None:
    block = ["the"] * 16
    h1, _ = block_hashes(block + block)
    h2, _ = block_hashes(["of"] * 16 + block)
    assert h1[0] != h1[1] and h1[1] != h2[1]


def test_engine_request_counts_tokens_and_keeps_a_partial_last_block() -> None:
    req = engine_request(7, 1.5, prompt_text([5], [40]), 32, model="m", priority=-1)
    assert (req.prompt_tokens, req.output_tokens, req.seg_tokens, req.priority) == (40, 32, (16, 16, 8), -1)
    assert sum(req.seg_tokens) == req.prompt_tokens and len(req.hashes) == 3


def test_chat_messages_are_their_text_contents_in_order() -> None:
    msgs = [{"role": "system", "content": "you are"}, {"role": "user", "content": [
        {"type": "text", "text": "a big"}, {"type": "image_url", "image_url": {"url": "x"}}]}]
    assert chat_prompt(msgs) == "you are a big"
    assert len(VOCAB) == 256


def test_the_live_prefix_index_sees_the_twins_blocks_on_the_wire() -> None:
    """GIE hashes a prompt's bytes in 64-byte blocks, reckoning 4 bytes per token (16 tokens per block, the twin's
    prefix index on trace segments). Every token is 4 bytes with its space, so two prompts sharing k 16-token blocks
    in the trace share exactly k of the gateway's blocks: the live picker scores the prefix the twin scores."""
    from kubetwin.serving.router.prefix_index import DEFAULT_BLOCK_TOKENS, prompt_segments

    a = prompt_text([1, 2, 3], [512, 512, 400])
    b = prompt_text([1, 2, 9], [512, 512, 400])
    assert len(a.encode()) == 4 * 1424 - 1  # one byte per letter, a space between tokens
    ha, _ = prompt_segments("m", a)
    hb, _ = prompt_segments("m", b)
    shared = next(i for i, (x, y) in enumerate(zip(ha, hb, strict=False)) if x != y)
    assert shared == 1024 // DEFAULT_BLOCK_TOKENS


def test_int_hash_chain_is_the_numpy_one() -> None:
    """block_hashes chains with traces.mix_int; it must give exactly traces.mix's values (the twin's segment hashes)."""
    import random

    from kubetwin.serving.traces.arrays import mix, mix_int

    rng = random.Random(7)
    for _ in range(2000):
        prev, value = rng.getrandbits(64), rng.getrandbits(40)
        assert mix_int(prev, value) == int(mix(prev, value))


def test_a_prompt_is_split_once_or_counted_in_slices() -> None:
    """tokens_or_count: a small prompt's tokens come back with their count (the request is built from them, not
    split again); one past the slice is only counted, in slices, with the same count as splitting it whole."""
    import asyncio

    from kubetwin.live.prompts import tokens_of, tokens_or_count

    small = "a bb  ccc\tdddd\n e"
    assert asyncio.run(tokens_or_count(small)) == (5, tokens_of(small))
    big = "word " * 3000 + "tail"
    n, tokens = asyncio.run(tokens_or_count(big, slice_chars=1000))
    assert tokens is None and n == len(tokens_of(big)) == 3001
