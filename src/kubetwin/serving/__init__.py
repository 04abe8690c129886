"""LLM serving: model-server performance (vLLM-style engine), routing policies (the Gateway API Inference Extension's
endpoint picker and the routers users compare it with), KEDA, request traces and the serving data plane."""
