"""The twin's serving policies live (issue 20): the same router, KEDA and HPA code that `kubetwin run` simulates,
in front of real OpenAI-compatible servers on loopback or a network.

`emulator` is a vLLM stand-in whose timing is the twin's engine model running on the wall clock, `gateway` the
endpoint picker as an Envoy ext_proc server or a standalone proxy, `loadgen` a RequestTrace replayed against any
OpenAI-compatible URL. Optional: `pip install kubetwin[live]`.
"""
