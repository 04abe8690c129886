"""Each kind's own checks: one module per kind, one registry line per module (issue 33 item 5).

Kueue lays its admission webhooks out this way: one file per kind (pkg/webhooks/clusterqueue_webhook.go,
resourceflavor_webhook.go, workload_webhook.go, cohort_webhook.go) and one `Setup` that lists them, one line a kind
(pkg/webhooks/webhooks.go, kubernetes-sigs/kueue@ef35b8752e9d246b1f47e22871bef3e0f464483e). Here a kind's
module builds one `KindChecks` (kinds.base) and `REGISTRY` below lists it; `validation.validate.validate_one`
looks the object's (group, kind) up and calls what the entry carries, each at its place in the API server's order:

- `first`: the kind's own answer before any schema (a kind the twin reads without a shipped schema, or a decoding
  problem of what was written); None to go on with the generic checks.
- `checks`: once the object passed its schema. For a built-in kind after the API server's field rules, each
  whatever they found (its validation aggregates every field error); for a CRD or twin kind only while nothing so
  far is an error, as a validating webhook never sees an object the schema refused.
- `when_clean`: for an object with no finding at all, what the run does with it, in place of the generic
  "not simulated" and storage notices (a non-empty answer is the whole answer).

A kind the registry does not list gets the generic checks only. A plug-in adds its kind's checks with
`REGISTRY.register(entry)` (or `registered(entry)` for a with-block), as `api.kinds.REGISTRY` takes its definition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kubetwin.validation.kinds import (
    clusterqueue,
    configmap,
    configuration,
    daemonset,
    gcpdatasource,
    horizontalpodautoscaler,
    job,
    jobset,
    lws,
    node,
    nodepool,
    pytorchjob,
    requesttrace,
    reservation,
    scaledobject,
    sweep,
    trainingruntime,
    workload,
)
from kubetwin.validation.kinds.base import KindChecks, KindChecksRegistry

__all__ = ["REGISTRY", "KindChecks", "registered"]

# One line a kind, as Kueue's webhooks.Setup: a new kind's checks are its module and its line here.
REGISTRY = KindChecksRegistry((
    configmap.CHECKS,
    daemonset.CHECKS,
    job.CHECKS,
    horizontalpodautoscaler.CHECKS,
    gcpdatasource.CHECKS,
    configuration.CHECKS,
    workload.CHECKS,
    clusterqueue.CHECKS,
    jobset.CHECKS,
    lws.CHECKS,
    node.CHECKS,
    trainingruntime.TRAINING_RUNTIME,
    trainingruntime.CLUSTER_TRAINING_RUNTIME,
    pytorchjob.CHECKS,
    scaledobject.CHECKS,
    nodepool.CHECKS,
    requesttrace.CHECKS,
    reservation.CHECKS,
    sweep.CHECKS,
))


@contextlib.contextmanager
def registered(entry: KindChecks) -> Iterator[KindChecks]:
    """Register a kind's checks for the duration of a with-block (tests, plug-ins tried out)."""
    previous = REGISTRY.register(entry)
    try:
        yield entry
    finally:
        REGISTRY.restore(entry.group, entry.kind, previous)
