"""Installs the training model into a run when a Pod, Job or JobSet carries training.kubetwin.io/* annotations:
the kubelet's duration hook (how long each training pod runs), the gang coordinator (rendezvous and collective
timeouts) and the DCGM exporter sampling its GPUs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetwin.api.loader import Manifest
from kubetwin.controllers.kubelet import Kubelet
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.store import Store


@dataclass
class TrainingRun:
    model: Any  # workloads.training_hook.TrainingModel
    dcgm: Any  # workloads.dcgm.DcgmExporter
    store: Store

    def contribute(self, until: float) -> Contribution:
        """timeseries.json "dcgm", the DCGM exporter's series and training.json; nothing when no training pod
        ran and no gang failed its rendezvous or lost a rank (training.json then says why the gang stopped)."""
        from kubetwin.workloads.training_explain import records

        training = records(self.model, self.store)
        if not self.model.inputs:
            return Contribution(training=training) if training else Contribution()
        series, text = self.dcgm.finish()
        return Contribution(timeseries={"dcgm": series}, prometheus=text, training=training)


def install(store: Store, env: Environment, kubelet: Kubelet, manifests: list[Manifest], sample_interval: float,
            start_time: str) -> TrainingRun | None:
    if not any(m.kind in ("Pod", "Job", "JobSet") for m in manifests):
        return None
    from kubetwin.workloads import training_hook

    if not training_hook.wanted([m.obj for m in manifests]):
        return None
    from kubetwin.workloads.dcgm import DcgmExporter
    from kubetwin.workloads.gang import GangCoordinator

    model = training_hook.TrainingModel(store)
    model.gang = GangCoordinator(store, env, kubelet, model)
    kubelet.duration_hooks.append(model)
    return TrainingRun(model, DcgmExporter(store, env, model, kubelet, sample_interval, start_time), store)
