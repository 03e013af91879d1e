"""``agentic-loop serve``: a registered version (or any model folder) behind vLLM until Ctrl-C.

Starts vLLM's OpenAI-compatible server (see
:mod:`agentic_loop.distill.release.serve`), prints the ``load_chat_model``
spec that talks to it, and waits. A vLLM that is not installed, does not
start, or dies is a one-line error with exit code 2.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["serve", "--help"])
    >>> result.exit_code, "--vllm-python" in result.output
    (0, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, err_console
from agentic_loop.cli.release import DEFAULT_REGISTRY, REGISTRY_HELP, open_registry

__all__ = ["serve_command"]


@app.command("serve")
def serve_command(
    version: Annotated[str, typer.Argument(
        help="Registry version to serve (default: current).")] = "current",
    registry: Annotated[Path, typer.Option("--registry", help=REGISTRY_HELP)] = DEFAULT_REGISTRY,
    model: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--model", help="Serve this model folder or spec instead of a registry version.")] = None,
    name: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--name", help="Model name clients send (default: <name>-<version>).")] = None,
    port: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--port", help="Port (default: a free one).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    max_model_len: Annotated[int, typer.Option(
        "--max-model-len", help="Longest prompt + answer, in tokens.")] = 2048,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait for the server to be ready.")] = 300.0,
    vllm_python: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--vllm-python",
        help="The Python that has vLLM (default: .venv-vllm, found by itself).")] = None,
) -> None:
    """Serve a registered model through vLLM's OpenAI-compatible server until Ctrl-C.

    Example:

        agentic-loop serve v3 --port 8000
    """
    from agentic_loop.distill.release import ServeError, serve, serve_registered

    with err_console.status("starting vLLM (about a minute on CPU)..."):
        if model is not None:
            server = serve(model, name=name, port=port, host=host, max_model_len=max_model_len,
                           timeout=timeout, python=vllm_python)
        else:
            kw = {"name": name} if name else {}
            server = serve_registered(open_registry(registry), version, port=port, host=host,
                                      max_model_len=max_model_len, timeout=timeout,
                                      python=vllm_python, **kw)
    console.print(f"serving {escape(server.model)} at {escape(server.base_url)}", highlight=False)
    console.print(f'use it: load_chat_model("{escape(server.spec)}", '
                  f'model="{escape(server.model)}")', highlight=False, soft_wrap=True)
    console.print("Ctrl-C stops it.", highlight=False)
    code = server.wait()
    if code not in (0, -15, None):
        raise ServeError(f"vLLM exited with code {code}; see its log {server.log_path}")
