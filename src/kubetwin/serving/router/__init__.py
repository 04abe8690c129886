"""Routing policies for LLM serving: the Gateway API Inference Extension's endpoint picker (EPP) as the real one
schedules, and the routers users compare it with, as presets. Independent of the simulator so the live gateway can
use the same code."""

from kubetwin.serving.router.epp import (
    CycleState,
    EppRouter,
    PrefixOracle,
    Profile,
    UtilizationDetector,
    build_router,
)
from kubetwin.serving.router.prefix_index import ApproxPrefixIndex, prompt_segments, request_blocks
from kubetwin.serving.router.presets import (
    EPP_DEFAULT_CONFIG,
    EPP_V1_0_CONFIG,
    LOAD_CONFIG,
    PRECISE_CONFIG,
    PRESETS,
    DynamoKVRouter,
    LegacyV03Router,
    Preset,
    ProductionStackPrefixRouter,
    ProductionStackSessionRouter,
    RandomRouter,
    RoundRobinRouter,
    Router,
    ServiceRandomRouter,
    SGLangCacheAwareRouter,
    make_router,
)

__all__ = [
    "ApproxPrefixIndex",
    "CycleState",
    "DynamoKVRouter",
    "EPP_DEFAULT_CONFIG",
    "EPP_V1_0_CONFIG",
    "EppRouter",
    "LOAD_CONFIG",
    "LegacyV03Router",
    "PRECISE_CONFIG",
    "PRESETS",
    "Preset",
    "PrefixOracle",
    "ProductionStackPrefixRouter",
    "ProductionStackSessionRouter",
    "Profile",
    "RandomRouter",
    "RoundRobinRouter",
    "Router",
    "SGLangCacheAwareRouter",
    "ServiceRandomRouter",
    "UtilizationDetector",
    "build_router",
    "make_router",
    "prompt_segments",
    "request_blocks",
]
