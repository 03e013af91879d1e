"""Third-party noise stays out of the output unless --verbose (issue 31, point 5).

No model: ``train``'s trainer and ``eval``'s evaluation are replaced by fakes
that talk the way transformers, TRL and datasets do (a logger warning on a
stream handler of their own, a warning from a ``site-packages`` path, TRL's
printed ``{'loss': ...}`` dict); without ``--verbose`` none of it reaches the
output and the package's own lines and warnings still do; with it, all of it
does.
"""

from __future__ import annotations

import importlib
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from agentic_loop.architectures.settings import UncheckedConstraintsWarning
from agentic_loop.cli import app
from agentic_loop.cli.quiet import third_party_quiet

runner = CliRunner()
NOISE = ("noise from a library logger", "noise from a library warning")


def _talk_like_a_library() -> None:
    handler = logging.StreamHandler(sys.stderr)  # transformers' logger has its own handler
    library = logging.getLogger("datasets.arrow_dataset")
    library.addHandler(handler)
    try:
        library.warning(NOISE[0])
    finally:
        library.removeHandler(handler)
    warnings.warn_explicit(NOISE[1], UserWarning,
                           "/usr/lib/python3/site-packages/trl/trainer/sft_trainer.py", 321,
                           module="trl.trainer.sft_trainer")
    warnings.warn(UncheckedConstraintsWarning("ours: the task states constraints ..."),
                  stacklevel=1)


def _fake_train(data: Path, out: Path, **options: Any) -> Any:
    import transformers.trainer as hf_trainer

    _talk_like_a_library()
    # the callback a Trainer made now would add: TRL's dict log per step, or our bar
    hf_trainer.PrinterCallback().on_log(None, SimpleNamespace(is_local_process_zero=True),
                                        None, logs={"loss": 1.2345, "grad_norm": 0.5})
    stage = SimpleNamespace(method="sft", steps=3, train_loss=1.2345, tokens_per_s=100.0,
                            resumed_from=None)
    return SimpleNamespace(model_dir=out, skipped=False, stages=[stage], adapter=True,
                           spec=f"local:{out}")


@contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """Warnings printed as a plain run prints them (pytest records them otherwise)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings._showwarnmsg_impl = (  # type: ignore[attr-defined]
            lambda msg: sys.stderr.write(warnings._formatwarnmsg(msg)))  # type: ignore[attr-defined]
        yield


@pytest.mark.parametrize("verbose", [False, True])
def test_train_shows_library_noise_only_with_verbose(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     verbose: bool):
    monkeypatch.setattr(importlib.import_module("agentic_loop.distill.train"), "train",
                        _fake_train)
    args = ["train", "--data", str(tmp_path), "--out", str(tmp_path / "m")]
    with _warnings_on_stderr():
        result = runner.invoke(app, args + (["--verbose"] if verbose else []))
    assert result.exit_code == 0, result.output
    seen = result.stdout + result.stderr
    assert "Trained" in seen and "ours: the task states constraints" in seen
    for noise in (*NOISE, "'loss'", "site-packages/trl"):
        assert (noise in seen) is verbose, (noise, seen)


@pytest.mark.parametrize("verbose", [False, True])
def test_eval_shows_library_noise_only_with_verbose(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    verbose: bool):
    evaluation = importlib.import_module("agentic_loop.distill.eval")

    def fake_evaluate(*args: Any, **kwargs: Any) -> Any:
        _talk_like_a_library()
        return SimpleNamespace(arch=None, tasks=[], reasons=["single-shot: tie"], kl=None,
                               kl_note="", diversity={},
                               decision=SimpleNamespace(value="MANUAL_REVIEW"), plot=None)

    monkeypatch.setattr(evaluation, "evaluate_models", fake_evaluate)
    args = ["eval", "--baseline", "local", "--candidate", "local", "--golden", "g.jsonl",
            "--no-record", "--no-kl", "--plot", str(tmp_path / "eval.png")]
    with _warnings_on_stderr():
        result = runner.invoke(app, args + (["--verbose"] if verbose else []))
    assert result.exit_code == 0, result.output
    seen = result.stdout + result.stderr
    assert "decision: MANUAL_REVIEW" in seen
    for noise in NOISE:
        assert (noise in seen) is verbose, (noise, seen)


def test_the_quiet_block_puts_everything_back():
    library = logging.getLogger("transformers")
    before = library.level
    with third_party_quiet(verbose=False):
        assert library.level == logging.ERROR
    assert library.level == before
    import os

    assert "TQDM_DISABLE" not in os.environ or os.environ["TQDM_DISABLE"] != "1"
