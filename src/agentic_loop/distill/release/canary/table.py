"""Which version answers a request at the serving front: the arm table of a canary or shadow.

Why a frozen value: the front reads the table once per request, from a
callable the serve process owns, while the serve process replaces it when
``canary.json`` or ``current`` changes. One immutable object per change
means a request never sees half of an update.

A user key's bucket is :func:`~agentic_loop.distill.release.router.bucket_of`
of the raw key and the salt: buckets below ``fraction`` belong to the
candidate, so one user always lands on the same version, and another
process (or language) can tell which users a canary reaches.

Example:
    >>> table = ArmTable(current="v1", candidate="v2", candidate_model="agent-v2", fraction=0.5)
    >>> sorted({table.arm_of(f"user-{i}") for i in range(20)})
    ['candidate', 'current']
    >>> table.arm_of(None), table.version("candidate"), table.model_for("current")
    ('current', 'v2', None)
    >>> ArmTable(current="v1").arm_of("user-1")  # no candidate: everyone gets current
    'current'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentic_loop.distill.release.canary.state import CanaryState
from agentic_loop.distill.release.router import DEFAULT_SALT, bucket_of
from agentic_loop.errors import ConfigError

__all__ = ["Arm", "ArmTable"]

Arm = Literal["current", "candidate"]


@dataclass(frozen=True)
class ArmTable:
    """The versions a front routes between, and how.

    ``current_model`` / ``candidate_model``: the name put in a request body's
    ``"model"`` for that arm (None: the body goes as it came).
    ``candidate_backend``: ``http://host:port`` of the candidate's server
    (None: the backend the front routes to now). ``served_name``: only
    requests that ask for this model (the stable name) are split; requests
    for another name (None: none) go to current untouched. ``state``: the
    canary file this table was made from (answered at the arms route).
    """

    current: str
    candidate: str | None = None
    current_model: str | None = None
    candidate_model: str | None = None
    candidate_backend: str | None = None
    fraction: float = 0.0
    mode: Literal["canary", "shadow"] = "canary"
    salt: str = DEFAULT_SALT
    served_name: str | None = None
    state: CanaryState | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ConfigError(f"ArmTable fraction={self.fraction!r}: pass a share in [0, 1]")
        if self.mode not in ("canary", "shadow"):
            raise ConfigError(f"ArmTable mode={self.mode!r}: pass 'canary' or 'shadow'")

    @classmethod
    def from_state(cls, state: CanaryState, *, current: str, candidate_model: str | None,
                   served_name: str | None = None,
                   candidate_backend: str | None = None) -> ArmTable:
        """The table that runs ``state`` against ``current``."""
        return cls(current=current, candidate=state.candidate, candidate_model=candidate_model,
                   candidate_backend=candidate_backend, fraction=state.fraction,
                   mode=state.mode, salt=state.salt, served_name=served_name, state=state)

    def arm_of(self, key: str | None) -> Arm:
        """The arm a user key belongs to (no key, or no candidate: current)."""
        if key is None or self.candidate is None:
            return "current"
        return "candidate" if bucket_of(key, self.salt) < self.fraction else "current"

    def version(self, arm: Arm) -> str:
        """The version id of ``arm``."""
        return self.candidate if arm == "candidate" and self.candidate else self.current

    def model_for(self, arm: Arm) -> str | None:
        """The body ``"model"`` for ``arm`` (None: leave the body as it is)."""
        return self.candidate_model if arm == "candidate" else self.current_model

    def splits(self, model: object) -> bool:
        """True when a request for ``model`` is routed by this table's candidate."""
        return self.candidate is not None and self.fraction > 0 and (
            self.served_name is None or model == self.served_name)
