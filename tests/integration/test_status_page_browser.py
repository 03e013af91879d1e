"""The flywheel's status page in a real headless Chromium (Debian's package): it renders,
refreshes by itself, shows a breach, and writes nothing to the console.

Chromium runs once per page with ``--dump-dom`` (the DOM after the scripts
ran) and ``--virtual-time-budget`` (timers run through that much page time
before the dump, so the page's poll of ``status.json`` happens). Its console
reaches us through ``--enable-logging=stderr``: each message is a line with
``CONSOLE`` in it, whatever its level (this build does not print the level),
so the check is strict: the page must write nothing at all, and it is built
not to. (The page without JavaScript is the server's HTML, checked in
tests/unit/test_status_page.py: this Chromium still runs scripts under
``--disable-javascript``, and ``--blink-settings=scriptEnabled=false`` makes
``--dump-dom`` print nothing.) Two pages of the test's own, one calling ``console.error`` and one
throwing, prove that the check sees both.

When Chromium is not installed the tests are skipped with the reason; under
CI (``CI`` set) that is a failure instead, so CI always runs them
(``make browser`` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentic_loop.distill.flywheel.status import (
    ArmNumbers,
    AuditLine,
    FlywheelStatus,
    MonitorLine,
    RoundPoint,
)
from agentic_loop.distill.flywheel.status_server import StatusServer, ThreadedApp

pytestmark = pytest.mark.slow

#: A console message in Chromium's stderr log, e.g. ``[..:INFO:CONSOLE:1] "boom", source: ..``.
CONSOLE = re.compile(r":CONSOLE[:(]\d+")


#: The header's freshness mark: rendered "status of <time>", the script writes "live · ...".
LIVE = re.compile(r'<span id="live"[^>]*>([^<]*)</span>')


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    reason = "Chromium is not installed (`make browser` installs Debian's chromium package)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests, but {reason}")
    pytest.skip(reason)


@dataclass
class Visit:
    dom: str
    console: list[str]


def visit(url: str, profile: Path, *, budget_ms: int = 3000) -> Visit:
    """Load ``url`` in headless Chromium; the DOM once ``budget_ms`` of page time ran, and the
    console lines."""
    command = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
               f"--virtual-time-budget={budget_ms}", "--dump-dom", url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    return Visit(done.stdout, [line for line in done.stderr.splitlines() if CONSOLE.search(line)])


class PlantedStatus:
    """A canary whose candidate's error rate is breached from the second request on: the first
    request renders the page without it, so seeing it proves the page refreshed itself."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> FlywheelStatus:
        self.calls += 1
        now = datetime.now(UTC)
        return FlywheelStatus(
            registry="/srv/registry", updated_at=now, phase="canary", current="v2-current",
            lineage=["v2-current", "v1-first"], candidate="v3-candidate", stage=1,
            fraction=0.25, stages=[0.05, 0.25, 0.5, 1.0], stage_started_at=now,
            arms=[ArmNumbers(version="v2-current", role="current", runs=40, pass_rate=0.8,
                             pass_ci95=(0.65, 0.9), requests=52, error_rate=0.02,
                             error_ci95=(0.004, 0.1), p99_latency_s=1.2),
                  ArmNumbers(version="v3-candidate", role="candidate", runs=12,
                             pass_rate=0.5, pass_ci95=(0.25, 0.75), requests=14,
                             error_rate=0.31, error_ci95=(0.13, 0.58), p99_latency_s=1.9)],
            stage_reasons=["candidate error rate 31.0% > current 2.0% + 5.0%"],
            rounds=[RoundPoint(round=1, version="v2-current", golden_pass_rate=0.7,
                               ci95=(0.55, 0.82), decision="promoted", at=now),
                    RoundPoint(round=2, version="v3-candidate", golden_pass_rate=0.74,
                               ci95=(0.6, 0.85), decision="canary", at=now)],
            monitors=[MonitorLine(version="v3-candidate", metric="error_rate", value=0.31,
                                  baseline=0.02, threshold="rise > 0.05",
                                  breached=self.calls > 1)],
            audit=[AuditLine(at=now, action="stage", version="v3-candidate",
                             detail="stage 2 (25%) began")],
            trigger="new accepted runs >= 50", new_runs=3)


def breach_rows(dom: str) -> list[str]:
    return [row for row in dom.split("<tr")[1:] if row.startswith(' class="breach"')]


def test_the_page_refreshes_into_a_planted_breach_with_no_console_message(
        tmp_path: Path) -> None:
    planted = PlantedStatus()
    with StatusServer(planted, refresh_s=0.5) as server:
        seen = visit(server.url + "/", tmp_path / "profile")
    assert seen.console == []
    assert planted.calls >= 3  # the page, then the script's status.json and page again
    dom = seen.dom
    assert 'id="current">v2-current</div>' in dom and "v1-first" in dom
    assert "stage 2 of 4" in dom
    assert '<tr class="arm-current">' in dom and '<tr class="arm-candidate">' in dom
    assert "31.0% <span class=\"muted\">[13.0%, 58.0%]</span>" in dom  # the candidate's errors
    rows = breach_rows(dom)
    assert len(rows) == 1 and "error_rate" in rows[0] and "BREACH" in rows[0]
    assert "1 monitor breached: v3-candidate error_rate" in dom
    # the script's own mark on the header: it ran, and its poll of status.json succeeded
    live = LIVE.search(dom)
    assert live is not None and live[1].startswith("live · status of 20")


BAD_PAGES = {
    "/logs-an-error": "<p>fine</p><script>console.error('planted failure')</script>",
    "/throws": "<p>fine</p><script>null.crash()</script>",
}


def _bad_pages() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    def page(request: Request) -> HTMLResponse:
        return HTMLResponse(f"<!DOCTYPE html><html><body>{BAD_PAGES[request.url.path]}"
                            "</body></html>")

    return Starlette(routes=[Route(path, page) for path in BAD_PAGES])


def test_the_console_check_sees_an_error_and_an_uncaught_exception(tmp_path: Path) -> None:
    server = ThreadedApp(_bad_pages(), "127.0.0.1", 0, name="bad pages").start()
    try:
        logged = visit(server.url + "/logs-an-error", tmp_path / "a", budget_ms=500)
        thrown = visit(server.url + "/throws", tmp_path / "b", budget_ms=500)
    finally:
        server.stop()
    assert "<p>fine</p>" in logged.dom and "<p>fine</p>" in thrown.dom
    assert len(logged.console) == 1 and "planted failure" in logged.console[0]
    assert len(thrown.console) == 1 and "Uncaught TypeError" in thrown.console[0]
