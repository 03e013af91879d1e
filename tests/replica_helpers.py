"""The vLLM stand-in of tests/serve_helpers.py, grown for replica tests (that file is unchanged).

Three additions, made by replacing lines of the stand-in's source (each replacement
is checked, so a change there fails here loudly instead of testing nothing):

* its chat answer says which replica answered and with which adapter:
  ``<model folder>@<port>:<adapter folder>`` (empty after the colon for the base);
* ``STAND_IN_FAIL_LOADS=1`` in one replica's environment makes that replica answer
  500 to every ``load_lora_adapter`` (a replica that cannot load the new version);
* the adapter each name serves is kept, from ``--lora-modules`` and from loads.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from serve_helpers import STAND_IN

_EDITS = (
    ('names = [opts["--served-model-name"]] + opts.get("lora", [])',
     'names = [opts["--served-model-name"]] + opts.get("lora", [])\n'
     'paths = {a.split("=")[0]: a.split("=", 1)[1] for a in args if "=" in a '
     'and not a.startswith("--")}'),
    ('            answer = os.path.basename(opts["--model"])',
     '            answer = (os.path.basename(opts["--model"]) + "@" + opts["--port"] + ":"\n'
     '                      + os.path.basename(paths.get(body["model"], "")))'),
    ('            if "broken" in body["lora_path"]:',
     '            if "broken" in body["lora_path"] or os.environ.get("STAND_IN_FAIL_LOADS"):'),
    ('            if name not in names:\n                names.append(name)',
     '            paths[name] = body["lora_path"]\n'
     '            if name not in names:\n                names.append(name)'),
)


def replica_stand_in_source() -> str:
    """The stand-in's source with the additions above."""
    source = STAND_IN
    for old, new in _EDITS:
        assert source.count(old) == 1, f"the stand-in changed; update replica_helpers: {old!r}"
        source = source.replace(old, new)
    return source


def replica_stand_in_python(folder: Path) -> Path:
    """An executable "python" in ``folder`` that runs the replica stand-in."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "replica_stand_in.py"
    script.write_text(replica_stand_in_source())
    python = folder / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python
