"""Kueue's store-facing side, as kueue-controller-manager runs it (kubernetes-sigs/kueue pkg/controller): `core`
(the manager: job reconciler, workload controller and the scheduler loop over the pure admission core in
`kubetwin.kueue`), `podsready` (waitForPodsReady), `queuestatus` (ClusterQueue and LocalQueue status),
`localqueue` (the LocalQueue reconciler's Active condition), `jobframework` (Job/JobSet integrations), `pods` (the
plain Pod integration, pkg/controller/jobs/pod), `admissionchecks` (Kueue's side of admission checks),
`provisioning` (the ProvisioningRequest check controller, pkg/controller/admissionchecks/provisioning) and
`workload` (the one Workload status writer). Only these modules read or write the store."""
