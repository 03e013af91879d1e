"""Errors raised while resolving or loading a model. Each names the input and the fix."""

from __future__ import annotations

__all__ = ["ModelError", "ModelLoadError", "ModelSpecError", "StructuredOutputError"]


class ModelError(RuntimeError):
    """Base class of model errors."""


class ModelSpecError(ModelError, ValueError):
    """A model spec string could not be understood."""


class ModelLoadError(ModelError):
    """A model (or its server) could not be reached or loaded."""


class StructuredOutputError(ModelError):
    """The model's answer did not validate against the requested schema."""
