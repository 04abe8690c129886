"""The scheduler's plugin registry: the plugins beyond the node-only ones (plugins.Profile) and their profile order.

kube-scheduler builds a profile's plugins from the in-tree registry (pkg/scheduler/framework/plugins/registry.go
NewInTreeRegistry) in the default profile's MultiPoint order (pkg/scheduler/apis/config/v1/default_plugins.go
getDefaultPlugins: VolumeRestrictions, VolumeBinding, InterPodAffinity; applyFeatureGates adds DynamicResources
before DefaultPreemption); the GPU placement policy (open-gpu-share in the FGD paper's simulator) comes last, when a
scenario names one. The scheduler core (scheduler.py) names none of them: it calls each at the extension points it
implements (framework.py), watches the resources their `events_to_register` name, and moves the pods they rejected
with their QueueingHints. A new plugin is one module with a `framework.Plugin` subclass and one line here (or
`registered(factory)` for a with-block: tests/test_plugging_in.py).

One twin order differs from the profile's: InterPodAffinity's PreFilter runs first (`FIRST`). It never rejects, so
the order is unobservable in kube-scheduler, while the twin's first pod with terms switches its cache of bound pods
on there.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kubetwin.devices.dra.allocator import Features
from kubetwin.scheduler import dra, gpushare, interpodaffinity, volumebinding
from kubetwin.scheduler.framework import Plugin
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.scheduler.nodetable import NodeTable
from kubetwin.store.store import Store


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin factory may use (framework.Handle): the API server, the DRA feature gates, the scenario's GPU
    placement policy, the scheduler's seeded generator, its node table and its NodeInfos by name."""

    store: Store
    features: Features
    gpu_policy: str | None
    rng: random.Random
    table: NodeTable
    nodes: dict[str, NodeInfo]


Factory = Callable[[Handle], Plugin | None]  # None: the plugin is off for this scenario


REGISTRY: list[Factory] = [
    lambda h: volumebinding.VolumeRestrictions(h.store),
    lambda h: volumebinding.VolumeBinding(h.store),
    lambda h: interpodaffinity.InterPodAffinity(h.nodes, interpodaffinity.namespace_labels(h.store)),
    lambda h: dra.DynamicResources(h.store, h.features),
    lambda h: gpushare.GpuSharePlacement(h.table, h.gpu_policy, h.rng, h.store) if h.gpu_policy else None,
]

FIRST: dict[str, tuple[str, ...]] = {"pre_filter": (interpodaffinity.NAME,)}  # see the module docstring


def build(handle: Handle) -> list[Plugin]:
    """The profile's plugins, constructed in the registry's order (their own watches register in that order)."""
    return [p for p in (factory(handle) for factory in REGISTRY) if p is not None]


@contextmanager
def registered(factory: Factory) -> Iterator[Factory]:
    """A plugin added to the registry for the duration of a with-block (last in the profile)."""
    REGISTRY.append(factory)
    try:
        yield factory
    finally:
        REGISTRY.remove(factory)
