"""Kubernetes' shared rules, below every other kubetwin package (as k8s.io/apimachinery, client-go and
component-helpers sit below every controller upstream): quantities and units, owner references, the work queue,
generateName, label selectors, status conditions, node affinity, taints and tolerations. It imports nothing else from
kubetwin (an import-linter contract)."""
