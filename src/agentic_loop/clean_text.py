"""Text safe to store and to show: terminal escapes, control characters and lone surrogates removed.

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
The architectures clean every draft as they record it; a trajectory log
written directly keeps what it was given, and JSON writes every control
character escaped (``\\u001b``), so the raw record is exact for audit and
still harmless to print.

A surrogate *pair* (text decoded with ``surrogatepass``) is joined into
the character it encodes; a lone one cannot be written as UTF-8 and is
dropped, so a run is never lost to an encoding error.

Example:
    >>> clean_text("\\x1b[31mred\\x1b[0m and \\x1b]0;title\\x07plain")
    'red and plain'
    >>> clean_text("ok\\rrm -rf /\\r\\nnext\\x00\\x7f")
    'ok\\nrm -rf /\\nnext'
    >>> clean_text("tabs\\tand\\nnewlines stay; é, 中文 and emoji 👍 too")
    'tabs\\tand\\nnewlines stay; é, 中文 and emoji 👍 too'
    >>> clean_text("user\\u202eexe.txt"), clean_text("a\\ud800b \\ud83d\\ude00")
    ('userexe.txt', 'ab 😀')
"""

from __future__ import annotations

import re

__all__ = ["clean_text", "fix_surrogates", "has_control"]

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
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without escape sequences, control characters and lone surrogates.

    Tabs and newlines stay. Idempotent, and the identity on text that has
    none of them (so cleaning records read back from disk changes nothing
    that was clean).
    """
    text = fix_surrogates(text)
    if not has_control(text):
        return text
    return _CONTROL.sub("", _ESCAPE.sub("", _NEWLINES.sub("\n", text)))


def fix_surrogates(text: str) -> str:
    """Surrogate pairs joined, lone surrogates dropped (the rest of ``text`` untouched).

    >>> fix_surrogates("\\ud83d\\ude00 and \\udc80")
    '😀 and '
    """
    if not _SURROGATES.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")


def has_control(text: str) -> bool:
    """True when :func:`clean_text` would change ``text``.

    >>> has_control("plain text\\n"), has_control("bell\\x07")
    (False, True)
    """
    return "\r" in text or _CONTROL.search(text) is not None
