"""Terminal escape and control sequences removed from text before it is stored.

Why: model outputs and user tasks end up in the archive, in reflections and
in training rows, and from there on people's terminals (``archive show``,
``less``, a CI log) and in the next model's weights. An escape sequence in
them can clear a screen, rewrite what a reviewer sees (``safe\\rrm -rf``),
set a terminal's title or hide a hyperlink (OSC 8), and a model trained on
them learns to emit them. Stored text therefore keeps only printable
characters, tabs and newlines: ANSI/VT sequences (CSI, OSC, DCS, APC, PM,
SOS and two-byte ``ESC x``) are removed whole, other C0 and C1 controls and
DEL are dropped, a carriage return becomes a newline (``\\r\\n`` one
newline), and Unicode direction overrides (the "Trojan Source" characters,
which make text display in an order other than the one stored) are dropped.
The raw trajectory keeps the original: JSON writes every control character
escaped (``\\u001b``), so the audit record is exact and still harmless to
print.

Example:
    >>> strip_control("\\x1b[31mred\\x1b[0m and \\x1b]0;title\\x07plain")
    'red and plain'
    >>> strip_control("ok\\rrm -rf /\\r\\nnext\\x00\\x7f")
    'ok\\nrm -rf /\\nnext'
    >>> strip_control("tabs\\tand\\nnewlines stay; é, 中文 and emoji 👍 too")
    'tabs\\tand\\nnewlines stay; é, 中文 and emoji 👍 too'
    >>> strip_control("user\\u202eexe.txt")
    'userexe.txt'
"""

from __future__ import annotations

import re

__all__ = ["has_control", "strip_control"]

# Escape sequences, removed whole, in their 7-bit (ESC x) and 8-bit (C1 control) forms:
#   OSC/DCS/SOS/PM/APC: ESC ] P X ^ _ or 0x9d 0x90 0x98 0x9e 0x9f, up to BEL or ST, or to the end;
#   CSI: ESC [ or 0x9b, parameters, intermediates, final byte;
#   other escapes: ESC, intermediate bytes (0x20-0x2f), one final byte.
_ESCAPE = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
)
# C0 controls but tab and newline (carriage returns are mapped first), DEL, C1 controls,
# and the bidirectional embedding/override/isolate controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NEWLINES = re.compile(r"\r\n?")


def strip_control(text: str) -> str:
    """``text`` without escape sequences and control characters; tabs and newlines kept.

    Idempotent, and the identity on text that has none (so applying it to
    records read back from disk changes nothing that was clean).
    """
    if not has_control(text):
        return text
    return _CONTROL.sub("", _ESCAPE.sub("", _NEWLINES.sub("\n", text)))


def has_control(text: str) -> bool:
    """True when :func:`strip_control` would change ``text``.

    >>> has_control("plain text\\n"), has_control("bell\\x07")
    (False, True)
    """
    return "\r" in text or _CONTROL.search(text) is not None
