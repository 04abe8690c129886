"""Kubernetes' shared rules, below every other kubetwin package (as k8s.io/apimachinery, client-go and
component-helpers sit below every controller upstream): quantities and units. It imports nothing else from kubetwin
(an import-linter contract)."""
