"""A kube-scheduler framework in miniature: queue, PreFilter/Filter/Score/Reserve/Bind plugins."""
