"""Import a real cluster's state (issue 36 item 1): `kubectl get -A -o yaml|json` dumps (`kubectl`), the
kube-scheduler-simulator's export (`simulator`) and `kwokctl snapshot save --format k8s` (`kwok`), read by one
module per format, detected from their content (`sources`), and turned into the twin's manifests (`convert`), which
`kubetwin import` writes and `kubetwin run` / `validate` take directly. docs/import.md."""
