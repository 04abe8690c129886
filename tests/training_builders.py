"""Builders for training-model tests: a fake network and a TrainingSpec from annotation values."""

from __future__ import annotations

from kubetwin.workloads.training_spec import TrainingSpec, parse

P = "training.kubetwin.io/"


class FakeNet:
    """bytes / bandwidth: `intra` B/s inside one node, `inter` B/s once a group spans nodes; no latency."""

    def __init__(self, intra: float = 1e12, inter: float = 1e10) -> None:
        self.intra, self.inter = intra, inter

    def topology(self, nodes: list[dict], gpus_per_node: list[int]) -> int:
        return len(nodes)

    def collective_time(self, op: str, nbytes: float, topo: int, group: str = "all") -> float:
        return nbytes / (self.intra if topo == 1 else self.inter)


def spec(**kw: str) -> TrainingSpec:
    """A 1B-parameter spec (1,000 steps, batch 8 x 1,000 tokens, MFU 0.5) with annotation overrides (tp="2", ...)."""
    ann = {"params": "1e9", "steps": "1000", "global-batch-size": "8", "sequence-length": "1000", "mfu": "0.5"}
    ann.update({k.replace("_", "-"): v for k, v in kw.items()})
    return parse({P + k: v for k, v in ann.items()})
