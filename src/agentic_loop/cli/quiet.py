"""Third-party noise stays out of the user's output unless ``--verbose``.

Why: training and model loading run transformers, TRL, datasets, accelerate
and PEFT, and each talks on its own: TRL prints a ``{'loss': ...}`` dict per
logged step, datasets and transformers draw tqdm bars (``Map: 100%|...``,
``Loading weights``), and warnings arrive as ``/path/site-packages/...py:123:
UserWarning: ...``. None of it is addressed to the user of ``agentic-loop``;
what they need is the package's own lines and one bar per long step that says
what it counts. :func:`third_party_quiet` wraps a command that trains or
evaluates: their loggers only pass errors, their progress bars are off (also in
processes the command starts: the switches are environment variables), their
warnings are dropped (the package's own warnings still show), and the
trainer's own progress (bar and dict logs) is replaced by one ``train steps``
bar. ``verbose=True`` changes nothing, so everything shows as before.

Example:
    >>> import logging, warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     with third_party_quiet(verbose=False):
    ...         warnings.warn_explicit("noise", UserWarning, "/x/site-packages/trl/t.py", 1,
    ...                                module="trl.t")
    >>> seen
    []
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

__all__ = ["NOISY_LIBRARIES", "QUIET_ENV", "VerboseFlag", "third_party_quiet"]

#: ``--verbose`` of the commands that train or evaluate.
VerboseFlag = Annotated[bool, typer.Option(
    "--verbose", help="Also show the libraries' own logs, progress bars and warnings "
                      "(transformers, TRL, datasets).")]

#: The libraries whose loggers are held to errors (their child loggers follow).
NOISY_LIBRARIES = ("transformers", "trl", "datasets", "accelerate", "peft", "torch",
                   "huggingface_hub", "sentence_transformers", "tokenizers", "filelock",
                   "urllib3", "httpx", "vllm", "presidio-analyzer", "spacy")
#: Switches the libraries read when imported (here or in a process the command starts).
QUIET_ENV = {"TRANSFORMERS_VERBOSITY": "error", "DATASETS_VERBOSITY": "error",
             "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
             "TQDM_DISABLE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
# (not ACCELERATE_LOG_LEVEL: accelerate applies it to the root logger, the user's own logs too)


@contextmanager
def third_party_quiet(verbose: bool, *, training: bool = False,
                      bar: Any = None) -> Iterator[None]:
    """Hold third-party logs, bars and warnings back for the ``with`` block, unless ``verbose``.

    ``training``: the block trains (transformers is imported to replace the
    trainer's progress, so pass it only where a model will load anyway).
    ``bar``: a rich ``Progress`` already on screen (rich shows one at a time),
    where the ``train steps`` line goes; without one, training gets its own.
    """
    if verbose:
        yield
        return
    saved_env = {name: os.environ.get(name) for name in QUIET_ENV}
    saved_levels = {name: logging.getLogger(name).level for name in ("", *NOISY_LIBRARIES)}
    os.environ.update(QUIET_ENV)
    restore_trainer = _replace_trainer_progress(bar) if training else (lambda: None)
    for name in NOISY_LIBRARIES:  # after the import above: a library sets its level on import
        logging.getLogger(name).setLevel(logging.ERROR)
    restore_bars = _library_bars_off()
    try:
        with warnings.catch_warnings():
            shown = warnings.showwarning
            warnings.showwarning = _only_ours(shown)
            yield
    finally:
        restore_trainer()
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        restore_bars()


def _only_ours(shown: Any) -> Any:
    """``warnings.showwarning`` that passes the package's warnings and drops the rest."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        ours = (category.__module__.startswith("agentic_loop")
                or os.path.abspath(filename).startswith(package + os.sep))
        if ours:
            shown(message, category, filename, lineno, file, line)

    return show


def _library_bars_off() -> Any:
    """Turn off the bars of libraries already imported (the environment covers later imports).

    Returns the function that turns back on, after the block, only the bars
    that were on before it.
    """
    switches = []  # (was on, turn on)
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        switches.append((hf_logging.is_progress_bar_enabled(), hf_logging.enable_progress_bar))
        hf_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        switches.append((datasets.is_progress_bar_enabled(), datasets.enable_progress_bars))
        datasets.disable_progress_bars()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        switches.append((not are_progress_bars_disabled(), enable_progress_bars))
        disable_progress_bars()

    def restore() -> None:
        for was_on, turn_on in switches:
            if was_on:
                turn_on()

    return restore


def _replace_trainer_progress(bar: Any) -> Any:
    """Trainers made in the block report steps on one rich line, not tqdm and dict logs.

    ``Trainer.__init__`` adds ``PrinterCallback`` (``disable_tqdm``) or
    ``DEFAULT_PROGRESS_CALLBACK`` by their names in ``transformers.trainer``;
    both names point at a callback that advances a ``train steps`` bar and
    prints nothing. Returns the function that puts them back. Nothing is
    imported when transformers is not installed.
    """
    try:
        import transformers.trainer as hf_trainer
        from transformers import TrainerCallback
    except ImportError:
        return lambda: None

    class TrainSteps(TrainerCallback):
        """Optimizer steps on a rich bar; logs are for TensorBoard/--verbose, not the screen."""

        def __init__(self) -> None:
            self.own: Any = None
            self.job: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not state.is_world_process_zero:
                return
            target = bar
            if target is None:
                from rich.errors import LiveError

                from agentic_loop.cli.common import progress_bar

                target = progress_bar(transient=True)
                try:
                    target.start()
                except LiveError:  # another display is on screen and was not handed over
                    return
                self.own = target
            self.job = target.add_task("training", total=state.max_steps or None,
                                       unit="train steps", completed=state.global_step)
            self.target = target

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.job is not None:
                self.target.update(self.job, completed=state.global_step)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.job is not None:
                self.target.update(self.job, completed=state.global_step)
            if self.own is not None:
                self.own.stop()
                self.own = None

    names = ("PrinterCallback", "DEFAULT_PROGRESS_CALLBACK")
    saved = {name: getattr(hf_trainer, name) for name in names}
    for name in names:
        setattr(hf_trainer, name, TrainSteps)

    def restore() -> None:
        for name, callback in saved.items():
            setattr(hf_trainer, name, callback)

    return restore
