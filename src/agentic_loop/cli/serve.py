"""``agentic-loop serve``: the registry (or any model folder) behind vLLM until Ctrl-C.

Starts vLLM's OpenAI-compatible server (see
:mod:`agentic_loop.distill.release.serve`), prints the ``load_chat_model``
spec that talks to it, and waits. A registry is served under one stable
name (``--name``, default the registry folder's name) that promote and
rollback never change: the server follows the registry's ``current``
version (adapters are swapped in live; a merged model gets a new vLLM
behind the front proxy that holds the port, which holds requests meanwhile,
so none fails; :mod:`agentic_loop.distill.release.serve_watch`), and
records itself in ``<registry>/serving.json`` so ``promote``, ``rollback``
and ``load_chat_model("registry:<dir>")`` find it. A vLLM that is not
installed, does not start, or dies is a one-line error with exit code 2.

``--tensor-parallel-size``, ``--pipeline-parallel-size`` and
``--data-parallel-size`` go to vLLM as they are. ``--replicas N`` starts N
vLLM servers of the model, each on its own port (on GPUs its own devices),
behind vLLM's load balancer ``vllm-router`` (``make router``) on ``--port``
(:mod:`agentic_loop.distill.release.replicas`); an adapter change reaches every
replica or none, and a replica that fails one or dies is taken out.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["serve", "--help"])
    >>> result.exit_code, "--vllm-python" in result.output
    (0, True)
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, err_console
from agentic_loop.cli.release import DEFAULT_REGISTRY, REGISTRY_HELP, open_registry
from agentic_loop.errors import ConfigError

__all__ = ["serve_command"]


@app.command("serve")
def serve_command(
    version: Annotated[str, typer.Argument(
        help="Registry version to serve; the default, current, follows promote and "
             "rollback.")] = "current",
    registry: Annotated[Path, typer.Option("--registry", help=REGISTRY_HELP)] = DEFAULT_REGISTRY,
    model: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--model", help="Serve this model folder or spec instead of a registry version.")] = None,
    name: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--name", help="Model name clients send; it never changes (default: the registry "
                       "folder's name, or the model folder's).")] = None,
    port: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--port", help="Port (default: a free one).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    max_model_len: Annotated[int, typer.Option(
        "--max-model-len", help="Longest prompt + answer, in tokens.")] = 2048,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait for the server to be ready.")] = 300.0,
    poll: Annotated[float, typer.Option(
        "--poll", help="Seconds between checks of the registry's current version.")] = 2.0,
    eager: Annotated[bool, typer.Option(
        "--eager", help="Skip vLLM's torch.compile: ready in about 30 s instead of 100 on "
                        "2 CPU cores, about 1.2x fewer tokens/s.")] = False,
    swap: Annotated[str, typer.Option(
        "--swap", help="How a merged model replaces the served one: restart (requests wait "
                       "while vLLM restarts; none fails) or side-by-side (a new vLLM starts "
                       "beside the old: nothing waits, but it needs room for two).")] = "restart",
    vllm_python: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--vllm-python",
        help="The Python that has vLLM (default: .venv-vllm, found by itself).")] = None,
    tensor_parallel: Annotated[int, typer.Option(
        "--tensor-parallel-size", help="GPUs each layer is split over (vLLM's).")] = 1,
    pipeline_parallel: Annotated[int, typer.Option(
        "--pipeline-parallel-size", help="Pipeline stages (vLLM's).")] = 1,
    data_parallel: Annotated[int, typer.Option(
        "--data-parallel-size", help="Copies of the model inside one vLLM (vLLM's).")] = 1,
    replicas: Annotated[int, typer.Option(
        "--replicas", help="vLLM servers of the model behind vllm-router, behind "
                           "--port.")] = 1,
    balancer_policy: Annotated[str, typer.Option(
        "--balancer-policy", help="vllm-router's policy: cache_aware, round_robin, "
                                  "power_of_two, consistent_hash or random.")] = "cache_aware",
    vllm_router: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--vllm-router", help="The vllm-router executable (default: .venv-router, found by "
                              "itself).")] = None,
) -> None:
    """Serve the registry's current version through vLLM under one stable name until Ctrl-C.

    Example:

        agentic-loop serve --name agent --port 8000
    """
    from agentic_loop.distill.release import ServeError, serve, serve_registered
    from agentic_loop.distill.release.replicas import serve_replicas

    if replicas < 1:
        raise ConfigError(f"--replicas {replicas}: serve at least 1 replica")
    parallel: dict[str, Any] = {"tensor_parallel_size": tensor_parallel,
                "pipeline_parallel_size": pipeline_parallel,
                "data_parallel_size": data_parallel}
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)  # clean up on `kill` too
    try:
        with err_console.status("starting vLLM (up to 2 minutes on CPU)..."):
            if model is not None and replicas > 1:
                server: Any = serve_replicas(
                    model, replicas=replicas, name=name, port=port, host=host,
                    policy=balancer_policy, router=vllm_router, max_model_len=max_model_len,
                    timeout=timeout, python=vllm_python, eager=eager, **parallel)
            elif model is not None:
                server = serve(model, name=name, port=port, host=host,
                               max_model_len=max_model_len, timeout=timeout,
                               python=vllm_python, eager=eager, **parallel)
            else:
                server = serve_registered(open_registry(registry), version, name=name,
                                          port=port, host=host, max_model_len=max_model_len,
                                          timeout=timeout, poll_s=poll, python=vllm_python,
                                          eager=eager, swap=swap, **parallel,
                                          **({"replicas": replicas, "policy": balancer_policy,
                                              "router": vllm_router} if replicas > 1 else {}))
        what, also = "", ""
        if replicas > 1:
            what = f" on {replicas} replicas behind vllm-router"
        if model is None:
            follows = "follows promote and rollback" if server.follow else "fixed"
            what = f" ({server.version}, {follows})"
            also = f' or load_chat_model("registry:{escape(str(registry))}")'
        console.print(f"serving {escape(server.model)}{what} at {escape(server.base_url)}",
                      highlight=False)
        console.print(f'use it: load_chat_model("{escape(server.spec)}", '
                      f'model="{escape(server.model)}"){also}', highlight=False, soft_wrap=True)
        console.print("Ctrl-C stops it.", highlight=False)
        try:
            code = server.wait()
        finally:
            server.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code not in (0, -15, None):
        raise ServeError(f"vLLM exited with code {code}; see its log {server.log_path}")


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # wait() stops the server and removes serving.json
