"""``agentic-loop registry list|show|register|promote|rollback|history``: version models.

One command group for the registry's operations, as ``archive`` is for an
archive and :class:`~agentic_loop.distill.release.Registry` is in Python:

* ``register`` adds a trained model folder as the next version (not served
  until promoted); ``promote`` makes a version current; ``rollback`` returns
  to the version that was current before (a stack, however many promotions
  ago); each of the two puts the new current version live on the
  registry's server, when one runs.
* ``list`` shows the versions (current marked); ``show`` one version in
  full (JSON); ``history`` the audit log.

The old spellings (``agentic-loop register|promote|rollback``,
``agentic-loop registry [--history]``) still run for one release, with a
``deprecated: use ...`` line on stderr (:mod:`agentic_loop.cli.release`).

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["registry", "list", "--registry", "/no/such/reg"])
    >>> result.exit_code, "no versions" in result.output
    (0, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, deprecated
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from agentic_loop.distill.release import Registry
    from agentic_loop.distill.release.registry_audit import GateRecord

__all__ = ["DEFAULT_REGISTRY", "REGISTRY_HELP", "history_command", "list_command",
           "open_registry", "promote_command", "register_command", "registry_app",
           "rollback_command", "show_command"]

REGISTRY_HELP = "Model registry folder."
DEFAULT_REGISTRY = Path("runs/registry")

RegistryDir = Annotated[Path, typer.Option("--registry", help=REGISTRY_HELP)]
Reason = Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer needs Optional here
    "--reason", help="Why (kept in the audit log).")]

registry_app = typer.Typer(
    help="Version trained models: register, promote, roll back, list, show, history.\n\n"
         "Example: agentic-loop registry register runs/m1 && agentic-loop registry promote v1",
    no_args_is_help=False, invoke_without_command=True)
app.add_typer(registry_app, name="registry")


@registry_app.callback()
def registry_group(
    ctx: typer.Context,
    registry: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--registry", hidden=True, help="Deprecated here: pass it after the command.")] = None,
    history: Annotated[bool, typer.Option(
        "--history", hidden=True, help="Deprecated: `agentic-loop registry history`.")] = False,
) -> None:
    """The model registry's operations.

    Example:

        agentic-loop registry list --registry runs/registry
    """
    if ctx.invoked_subcommand is not None:
        if registry is not None:  # `registry --registry R list`: R for the command
            ctx.default_map = {name: {"registry": registry} for name in
                               ("list", "show", "register", "promote", "rollback", "history")}
        if history:
            raise ConfigError("--history is a command now: `agentic-loop registry history`; "
                              "drop --history")
        return
    # the old spelling: `agentic-loop registry [--registry R] [--history]`
    command = "history" if history else "list"
    deprecated(f"registry {command}")
    where = registry or DEFAULT_REGISTRY
    (history_command if history else list_command)(registry=where)


def open_registry(path: Path) -> Registry:
    """The registry in ``path`` (its errors reach the one CLI handler)."""
    from agentic_loop.distill.release import Registry

    return Registry(path)


@registry_app.command("register")
def register_command(
    model_dir: Annotated[Path, typer.Argument(
        help="A model (or LoRA adapter) folder, e.g. from `agentic-loop train`.")],
    registry: RegistryDir = DEFAULT_REGISTRY,
    name: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--name", help="Its name (default: the folder's).")] = None,
    notes: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--notes", help="Free text kept with it.")] = None,
    copy: Annotated[bool, typer.Option(
        "--copy", help="Copy the weights into the registry.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Register it even if the same model (same weights and config) is "
                        "registered already.")] = False,
) -> None:
    """Add a model folder to the registry as its next version (not served until promoted).

    Example:

        agentic-loop registry register runs/m1 --registry runs/registry
    """
    entry = open_registry(registry).register(model_dir, name=name, notes=notes, copy=copy,
                                             force=force)
    console.print(f"registered {entry.version} ({escape(entry.path)}); promote it with "
                  f"`agentic-loop registry promote {entry.version}`", highlight=False,
                  soft_wrap=True)


@registry_app.command("promote")
def promote_command(
    version: Annotated[str, typer.Argument(help="The version to serve, e.g. v3.")],
    registry: RegistryDir = DEFAULT_REGISTRY,
    reason: Reason = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Promote it even if its last gate decision was ROLLBACK or "
                        "MANUAL_REVIEW (the override goes to the audit log).")] = False,
) -> None:
    """Make a registered version current (the one replaced becomes the rollback target).

    A version the gate did not PROMOTE is refused without --force.

    Example:

        agentic-loop registry promote v3 --reason "gate PROMOTE, reviewed"
    """
    reg = open_registry(registry)
    before = reg.current
    entry = reg.promote(version, reason=reason, force=force)
    was = before.version if before else "none"
    console.print(f"current: {entry.version} (was {was})", highlight=False)
    last = reg.history()[-1:] if before is None or before.version != entry.version else []
    if last and last[0].override is not None:
        forced = escape(last[0].override.describe())
        console.print(f"[yellow]forced past the gate's {forced}[/]; recorded in the audit log",
                      highlight=False, soft_wrap=True)
    _sync_served(reg)


@registry_app.command("rollback")
def rollback_command(registry: RegistryDir = DEFAULT_REGISTRY, reason: Reason = None) -> None:
    """Go back to the version that was current before the last promote.

    Example:

        agentic-loop registry rollback --reason "complaints about v4"
    """
    reg = open_registry(registry)
    before = reg.current
    entry = reg.rollback(reason=reason)
    was = before.version if before else "-"
    console.print(f"current: {entry.version} (rolled back from {was})", highlight=False)
    _sync_served(reg)


def _sync_served(reg: Registry) -> None:
    """Put the new current version live on the registry's server, and say what happened."""
    from agentic_loop.distill.release import sync_served

    console.print(f"serving: {escape(sync_served(reg))}", highlight=False, soft_wrap=True)


@registry_app.command("list")
def list_command(registry: RegistryDir = DEFAULT_REGISTRY) -> None:
    """List registered versions, the current one marked with *.

    Example:

        agentic-loop registry list --registry runs/registry
    """
    from agentic_loop.distill.release.registry_audit import version_gate

    reg = open_registry(registry)
    current = reg.current
    versions = reg.versions()
    if not versions:
        console.print(f"no versions in {escape(str(reg.root))}; add one with "
                      "`agentic-loop registry register MODEL_DIR`", highlight=False,
                      soft_wrap=True)
        return
    table = FitTable(f"Versions in {escape(str(reg.root))}", [
        Col(""), Col("version"), Col("name", wrap=True, min_width=10), Col("method"),
        Col("kind", drop=3), Col("last gate", short="gate"),
        Col("registered", wrap=True, min_width=10, drop=2),
        Col("path", wrap=True, min_width=12, drop=1)], title_justify="left",
        caption="* = current", caption_justify="left",
        hidden_hint="`agentic-loop registry show VERSION` shows all")
    for v in versions:
        gate = version_gate(v)
        table.add_row("*" if current and v.version == current.version else "", v.version,
                      escape(v.name), escape(v.card.method) if v.card else "-",
                      "adapter" if v.adapter else "model", gate.decision if gate else "-",
                      v.registered_at, escape(v.path))
    console.print(table)


@registry_app.command("show")
def show_command(
    version: Annotated[Optional[str], typer.Argument(  # noqa: UP045
        help="The version, e.g. v3 (default: the current one).")] = None,
    registry: RegistryDir = DEFAULT_REGISTRY,
) -> None:
    """Print one version in full as JSON: path, digest, kind, its model card.

    Example:

        agentic-loop registry show v3
    """
    reg = open_registry(registry)
    entry = reg.get(version) if version is not None else reg.current
    if entry is None:
        raise ConfigError(f"no version is current in {reg.root}; name one "
                          "(`agentic-loop registry show v1`) or promote one first")
    console.print_json(entry.model_dump_json())


@registry_app.command("history")
def history_command(registry: RegistryDir = DEFAULT_REGISTRY) -> None:
    """The audit log: every register, promote, rollback and data removal, who and why.

    Example:

        agentic-loop registry history --registry runs/registry
    """
    reg = open_registry(registry)
    table = FitTable(f"History of {escape(str(reg.root))}", [
        Col("at", wrap=True, min_width=10), Col("action"), Col("version", wrap=True),
        Col("previous", short="prev", wrap=True), Col("user", wrap=True, drop=1),
        Col("reason", wrap=True, min_width=20)], title_justify="left", caption_justify="left")
    for e in reg.history():
        table.add_row(e.at, e.action, e.version, e.previous or "-", e.user or "-",
                      escape(_reason(e.reason, e.override)))
    console.print(table)


def _reason(reason: str | None, override: GateRecord | None) -> str:
    """An audit line's reason, saying so when a promote was forced past the gate."""
    forced = f"forced past the gate's {override.decision}" if override is not None else ""
    if not forced or forced in (reason or ""):
        return reason or ""
    return f"{reason} ({forced})" if reason else forced
