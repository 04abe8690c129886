"""KEDA's ScaledObject: what the twin's KEDA (autoscaler.keda) refuses in its spec and triggers
(validation.serving)."""

from __future__ import annotations

from kubetwin.validation import serving
from kubetwin.validation.kinds.base import KindChecks

CHECKS = KindChecks("keda.sh", "ScaledObject", checks=(serving.scaled_object,))
