"""Node provisioning: GKE node pools (the cluster autoscaler comes later)."""
