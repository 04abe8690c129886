"""TrainingRuntime and ClusterTrainingRuntime: what the Trainer's runtime webhooks refuse beyond the CRD's schema
(kubeflow/trainer pkg/webhooks/trainingruntime_webhook.go validateReplicatedJobs, in its words; the TrainJob's own
refusals need its runtime and run across objects: validation/trainer.py)."""

from __future__ import annotations

from kubetwin.validation import trainer
from kubetwin.validation.kinds.base import KindChecks

TRAINING_RUNTIME = KindChecks(trainer.GROUP, "TrainingRuntime", checks=(trainer.runtime_webhook,))
CLUSTER_TRAINING_RUNTIME = KindChecks(trainer.GROUP, "ClusterTrainingRuntime", checks=(trainer.runtime_webhook,))
