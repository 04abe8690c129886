"""Installs the training model into a run when a Pod, Job or JobSet carries training.kubetwin.io/* annotations:
the kubelet's duration hook (how long each training pod runs), the gang coordinator (rendezvous and collective
timeouts) and the DCGM exporter sampling its GPUs -- and the exporter for model servers' GPUs when the run serves."""

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
        ran and no gang failed its rendezvous or lost a rank (training.json then says why the gang stopped); model
        servers' GPUs get their DCGM series either way."""
        from kubetwin.workloads.training_explain import records

        training = records(self.model, self.store) if self.model is not None else {}
        if self.model is None or not self.model.inputs:
            if not self.dcgm.series:
                return Contribution(training=training) if training else Contribution()
            series, text = self.dcgm.finish()  # model servers' GPUs only
            return Contribution(timeseries={"dcgm": series}, prometheus=text, training=training or None)
        series, text = self.dcgm.finish()
        return Contribution(timeseries={"dcgm": series}, prometheus=text, training=training)


def install(store: Store, env: Environment, kubelet: Kubelet, manifests: list[Manifest], sample_interval: float,
            start_time: str, servers: Any = None) -> TrainingRun | None:
    """The training model and the DCGM exporter when a manifest trains; the exporter alone for `servers` (serving's
    data plane) when the run serves models without training."""
    from kubetwin.workloads import training_hook
    from kubetwin.workloads.dcgm import DcgmExporter

    trains = any(m.kind in ("Pod", "Job", "JobSet", "TrainJob", "PyTorchJob") for m in manifests) and \
        training_hook.wanted([m.obj for m in manifests])
    if not trains:
        if servers is None:
            return None
        dcgm = DcgmExporter(store, env, None, kubelet, sample_interval, start_time)
        dcgm.servers = servers
        return TrainingRun(None, dcgm, store)
    from kubetwin.workloads.gang import GangCoordinator

    model = training_hook.TrainingModel(store)
    model.gang = GangCoordinator(store, env, kubelet, model)
    kubelet.duration_hooks.append(model)
    dcgm = DcgmExporter(store, env, model, kubelet, sample_interval, start_time)
    dcgm.servers = servers
    return TrainingRun(model, dcgm, store)
