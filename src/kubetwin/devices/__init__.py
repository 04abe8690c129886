"""Devices on nodes: GPU sharing (open-gpu-share milli-GPUs), and the fragmentation measure FGD uses."""
