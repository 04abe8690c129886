"""Twins of kube-controller-manager's workload controllers and of the kubelet."""
