"""Replicas of one served version behind vllm-router, changed all together or not at all.

:mod:`.balancer` starts and feeds vLLM's own load balancer (why that one:
its docstring); :mod:`.replica_set` runs N vLLM servers behind it and puts an
adapter live on every replica in service, taking out the ones that fail it
or die.

Example:
    >>> from agentic_loop.distill.release.replicas import router_command
    >>> router_command("vllm-router", port=9000, workers=["http://127.0.0.1:9001"],
    ...                policy="round_robin")[7:9]
    ['--policy', 'round_robin']
"""

from agentic_loop.distill.release.replicas.balancer import (
    BalancerError,
    RouterNotInstalledError,
    VLLMRouter,
    find_vllm_router,
    router_command,
    start_router,
)
from agentic_loop.distill.release.replicas.replica_set import (
    REPLICAS_FILE,
    Replica,
    ReplicaSet,
    replica_devices,
    serve_replicas,
)

__all__ = [
    "REPLICAS_FILE",
    "BalancerError",
    "Replica",
    "ReplicaSet",
    "RouterNotInstalledError",
    "VLLMRouter",
    "find_vllm_router",
    "replica_devices",
    "router_command",
    "serve_replicas",
    "start_router",
]
