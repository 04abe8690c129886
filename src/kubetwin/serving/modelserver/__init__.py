"""Model servers in pods: `recognize` (vLLM and TGI containers found in a pod spec, their command lines read into
EngineArgs by `vllm_args` and `tgi_args` in the servers' own parser words, what both share in `server_args`),
`modelspec` (open models' shapes from their config.json), `perf` (an iteration's time, the engine's StepModel),
`sizing` (vLLM's start-up checks on the device the pod has, and the engine built from them) and `coldstart` (image
pull, weight load and engine init as a kubelet startup hook)."""
