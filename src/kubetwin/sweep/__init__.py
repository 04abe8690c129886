"""`kubetwin sweep`: run a scenario over a grid (or a random / Bayesian sample) of configurations (issue 21).

cases: the Sweep's axes applied to the base scenario; worker: one case and seed through the runner; backends:
in-process, a process pool, Ray; results: results.csv / results.parquet; execute: the resumable driver; goals:
objective, constraints and Pareto fronts; export: the winning configuration as manifests; emitjob: a Kubernetes
Indexed Job; report: report.html.
"""
