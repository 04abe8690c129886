"""`kubetwin simulate -f job.yaml --from SNAPSHOT`: when would this start, where, when would it end, what would it cost,
and why would it wait -- asked of a cluster's state before the job is submitted (issue 36 item 3; kueue#15614's
"pre-submission admission simulator", kueue#13159's wait-time estimate).

The snapshot (any source `kubetwin import` reads, or plain manifests) is the state at t=0; the incoming objects are
created at t=0 on top of it (a `kubetwin.io/create-at` they carry moves them later); the twin runs for `duration`
and answers from what its own controllers did: Kueue's admission (the Workload's Admitted condition, its ClusterQueue
and flavors, the Pending message it waited with), the scheduler's binding (first and last pod bound, their nodes and
node pools, the last FailedScheduling message), the Job's completion, and its cost. With `runs` > 1 the same is
asked over that many seeds (the run-time distributions and routing randomness a scenario draws from its seed) and
the start time is given as P10 / P50 / P90.

Cost (a twin choice, stated): each of the incoming workload's pods is charged its node's hourly price times the
share of the node it requested (GPUs if it asked for any, else CPUs) for as long as it ran.
"""

from kubetwin.simulate.answer import Answer, Outcome, simulate

__all__ = ["Answer", "Outcome", "simulate"]
