"""Model servers in pods: `recognize` (vLLM, TGI and Triton containers found in a pod spec, their command lines read
into EngineArgs by `vllm_args`, `tgi_args` and `triton_args` in the servers' own parser words, what they share in
`server_args`; Triton's config.pbtxt through `pbtxt`), `modelspec` (open models' shapes from their config.json),
`perf` (an iteration's time, the engine's StepModel), `sizing` (vLLM's start-up checks on the device the pod has, and
the engine built from them) and `coldstart` (image pull, weight load and engine init as a kubelet startup hook)."""
