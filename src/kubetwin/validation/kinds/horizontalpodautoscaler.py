"""HorizontalPodAutoscaler: what the twin's HPA (autoscaler.hpa) refuses in its spec and metrics
(validation.serving)."""

from __future__ import annotations

from kubetwin.validation import serving
from kubetwin.validation.kinds.base import KindChecks

CHECKS = KindChecks("autoscaling", "HorizontalPodAutoscaler", checks=(serving.horizontal_pod_autoscaler,))
