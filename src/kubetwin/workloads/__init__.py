"""Workload cost models shared by serving and training: storage read rates, collective communication."""
