"""The one stable hash of a key into [0, 1): the canary's user buckets and the review draw.

Why one helper: a canary sends a user to the candidate when their key's bucket
lies below the rollout fraction (:func:`agentic_loop.distill.release.router.bucket_of`),
and the review queue fills its budget with the runs whose id hashes lowest
(:mod:`agentic_loop.distill.review.sampling`). Both need the same property: the
place of a key must be the same in every process, on every host and in any order
(Python's ``hash`` is salted per process), and a ``salt`` draws another,
equally stable, assignment. SHA-256 of ``"<salt>:<key>"``, its first 15 hex
digits (60 bits) read as a fraction of ``16**15``. The formula is frozen: a
canary in flight keeps every user in the bucket they were routed to.

Example:
    >>> unit_hash("user-1", "agentic-loop-canary")
    0.058860572962144135
    >>> unit_hash("user-1") == unit_hash("user-1") != unit_hash("user-1", salt="other")
    True
    >>> 0.0 <= unit_hash("") < 1.0
    True
"""

from __future__ import annotations

import hashlib

__all__ = ["unit_hash"]

#: 15 hex digits (60 bits); as a float the last ~2**-54 of the range rounds up to 1.0
#: (about one key in 10**16), which a fraction test ``< fraction`` treats as "above all".
_DIGITS = 15
_SPAN = 16 ** _DIGITS


def unit_hash(key: str, salt: str = "") -> float:
    """``key``'s place in [0, 1), the same on every host, in every process and order."""
    digest = hashlib.sha256(f"{salt}:{key}".encode()).hexdigest()
    return int(digest[:_DIGITS], 16) / _SPAN
