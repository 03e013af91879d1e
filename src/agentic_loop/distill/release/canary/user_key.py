"""The user key a request through the serving front is bucketed by, from any client.

Why three places: a client in any language must get sticky canary routing
with no code change. OpenAI's own ``user`` field is what most SDKs already
send; a header lets a gateway set it without touching bodies. First found
wins: ``x-agentic-loop-user``, then ``x-user-id``, then the JSON body's
``"user"``. No key: the request goes to the current version.

Example:
    >>> user_key({"x-user-id": "u7"}, b'{"user": "other"}')
    'u7'
    >>> user_key({}, b'{"model": "m", "user": "alice"}'), user_key({}, b"not json")
    ('alice', None)
    >>> json_body(b'{"model": "m"}'), json_body(b"[1]")
    ({'model': 'm'}, None)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["USER_HEADERS", "json_body", "user_key"]

#: The headers that carry a user key, in the order they are looked at.
USER_HEADERS = ("x-agentic-loop-user", "x-user-id")


def json_body(body: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object; None when it is not one (empty, another type, not JSON)."""
    if not body.lstrip().startswith(b"{"):
        return None
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def user_key(headers: Mapping[str, str], body: bytes | dict[str, Any] | None) -> str | None:
    """The request's user key (see the module doc); None when it has none.

    ``headers``: a case-insensitive mapping (Starlette's), or lower-case keys.
    ``body``: the raw body, or the JSON object already parsed from it.
    """
    for name in USER_HEADERS:
        value = headers.get(name)
        if value and value.strip():
            return value.strip()
    parsed = json_body(body) if isinstance(body, bytes) else body
    user = parsed.get("user") if parsed is not None else None
    if isinstance(user, str) and user.strip():
        return user.strip()
    return None
