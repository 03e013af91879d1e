"""The flywheel's status page and its server: what a person sees, escaped, and served on a socket.

The page is checked as HTML (tags balanced, one script, no external
asset) and by what it must show: nothing planted, a canary, a breach
(marked), a hostile version string (escaped). The server is a real uvicorn
on a free port, asked with httpx.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import httpx
import pytest

from agentic_loop.distill.flywheel.status import (
    ArmNumbers,
    AuditLine,
    FlywheelStatus,
    MonitorLine,
    RoundPoint,
)
from agentic_loop.distill.flywheel.status_page import AUDIT_SHOWN, render_status_page
from agentic_loop.distill.flywheel.status_server import PROMETHEUS_TYPE, StatusServer
from agentic_loop.distill.release.serve import ServeError
from agentic_loop.errors import ConfigError

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOSTILE = "<script>alert('x')</script>\"&"
_VOID = {"meta", "link", "br", "img", "input", "hr", "circle", "line", "rect", "polyline"}


class _Tags(HTMLParser):
    """Collects the tags, and fails on a closing tag that does not close the open one."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def parsed(page: str) -> _Tags:
    tags = _Tags()
    tags.feed(page)
    tags.close()
    assert tags.stack == [], f"tags left open: {tags.stack}"
    return tags


def canary_status(*, breached: bool = False, version: str = "v3") -> FlywheelStatus:
    return FlywheelStatus(
        registry="/srv/registry", updated_at=NOW, phase="canary", current="v2",
        lineage=["v2", "v1"], candidate=version, stage=1, fraction=0.25,
        stages=[0.05, 0.25, 0.5, 1.0], stage_started_at=NOW - timedelta(minutes=3),
        arms=[ArmNumbers(version="v2", role="current", runs=40, pass_rate=0.8,
                         pass_ci95=(0.65, 0.9), requests=52, error_rate=0.02,
                         error_ci95=(0.004, 0.1), p99_latency_s=1.25),
              ArmNumbers(version=version, role="candidate", runs=12, pass_rate=0.75,
                         pass_ci95=(0.47, 0.91), requests=14, error_rate=0.0,
                         error_ci95=(0.0, 0.21), p99_latency_s=1.5)],
        stage_reasons=["candidate has 12 runs of the 20 the stage needs"],
        rounds=[RoundPoint(round=1, version="v2", golden_pass_rate=0.7, ci95=(0.55, 0.82),
                           decision="promoted", at=NOW),
                RoundPoint(round=2, version=version, golden_pass_rate=0.78,
                           ci95=(0.64, 0.88), decision="canary")],
        monitors=[MonitorLine(version="v2", metric="pass_rate", value=0.8, baseline=0.79,
                              threshold="drop > 0.10", breached=False),
                  MonitorLine(version=version, metric="error_rate", value=0.31,
                              baseline=0.02, threshold="rise > 0.05", breached=breached)],
        audit=[AuditLine(at=NOW - timedelta(minutes=AUDIT_SHOWN + 5 - i), action="stage",
                         version=version, detail=f"entry {i}")
               for i in range(AUDIT_SHOWN + 5)],  # oldest first, as the log is
        trigger="new accepted runs >= 50", new_runs=7)


def test_an_empty_status_renders_a_whole_page_with_no_external_asset() -> None:
    page = render_status_page(FlywheelStatus(registry="r", updated_at=NOW, phase="starting"))
    tags = parsed(page)
    assert page.startswith("<!DOCTYPE html>")
    assert [t for t, _ in tags.seen].count("script") == 1
    assert not [a for _, a in tags.seen if "src" in a]  # nothing loaded from anywhere
    assert "http://" not in page and "https://" not in page and '"//' not in page
    for words in ("No round yet", "No canary", "No monitor has reported yet", "Nothing yet",
                  "starting"):
        assert words in page
    assert 'role="alert"' not in page and 'class="breach"' not in page


def test_a_canary_shows_the_stage_each_arm_with_intervals_and_the_reasons() -> None:
    page = render_status_page(canary_status(), refresh_s=2.5)
    parsed(page)
    assert 'id="current">v2</div>' in page and "replaced: v1" in page
    assert "stage 2 of 4" in page and "<strong>25.0%</strong>" in page
    assert '<span class="now">25.0%</span>' in page and '<span class="done">5.0%</span>' in page
    assert "80.0% <span class=\"muted\">[65.0%, 90.0%]</span>" in page  # current's pass rate
    assert "75.0% <span class=\"muted\">[47.0%, 91.0%]</span>" in page  # candidate's
    assert "1.25 s" in page and "1.5 s" in page
    assert "candidate has 12 runs of the 20 the stage needs" in page
    assert page.count('class="whisker"') >= 2 * 3 * 2 + 2 * 3  # arms x metrics + rounds
    assert "Audit (last 20, newest first)" in page and ">entry 4<" not in page
    assert page.index(">entry 24<") < page.index(">entry 5<")
    assert 'data-refresh-ms="2500"' in page and 'content="2"' in page  # script and noscript
    assert 'fetch("status.json"' in page  # relative: works behind a path prefix too


def test_a_breached_monitor_is_marked_red_and_announced() -> None:
    quiet = render_status_page(canary_status(breached=False))
    page = render_status_page(canary_status(breached=True))
    assert 'class="breach"' not in quiet and "BREACH" not in quiet
    rows = [r for r in page.split("<tr")[1:] if r.startswith(' class="breach"')]
    assert len(rows) == 1 and "error_rate" in rows[0] and "BREACH" in rows[0]
    assert "rise &gt; 0.05" in rows[0]
    assert '<p class="breach" role="alert">1 monitor breached: v3 error_rate</p>' in page


def test_every_string_from_files_is_escaped() -> None:
    status = canary_status(breached=True, version=HOSTILE).model_copy(update={
        "registry": HOSTILE, "current": HOSTILE, "lineage": [HOSTILE, HOSTILE],
        "stage_reasons": [HOSTILE], "trigger": HOSTILE, "last_error": HOSTILE,
        "audit": [AuditLine(at=NOW, action=HOSTILE, version=HOSTILE, detail=HOSTILE)]})
    page = render_status_page(status)
    tags = parsed(page)
    assert [t for t, _ in tags.seen].count("script") == 1  # only ours
    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;&amp;") >= 10


def test_a_refresh_period_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ConfigError, match="refresh_s=0"):
        render_status_page(FlywheelStatus(registry="r", updated_at=NOW, phase="idle"),
                           refresh_s=0)


def test_the_server_answers_the_page_json_metrics_and_health_on_a_real_socket() -> None:
    status = canary_status(breached=True)
    calls: list[int] = []

    def current() -> FlywheelStatus:
        calls.append(1)
        return status

    text = "# TYPE flywheel_requests_total counter\nflywheel_requests_total{version=\"v2\"} 52\n"
    with StatusServer(current, metrics=lambda: text, refresh_s=1) as server:
        assert server.url.startswith("http://127.0.0.1:") and not server.url.endswith(":0")
        page = httpx.get(server.url + "/")
        data = httpx.get(server.url + "/status.json")
        metrics = httpx.get(server.url + "/metrics")
        health = httpx.get(server.url + "/healthz")
    assert page.status_code == 200 and 'class="breach"' in page.text
    assert page.headers["cache-control"] == "no-store"
    assert FlywheelStatus.model_validate(data.json()) == status
    assert data.json()["arms"][1]["pass_ci95"] == [0.47, 0.91]
    assert metrics.headers["content-type"] == PROMETHEUS_TYPE and metrics.text == text
    assert health.json() == {"ok": True}
    assert len(calls) == 2  # asked on every request, never cached
    with pytest.raises(httpx.HTTPError):  # stopped: nothing listens any more
        httpx.get(server.url + "/healthz", timeout=2)


def test_no_metrics_is_a_404_and_a_failing_status_a_500_that_says_why() -> None:
    def broken() -> FlywheelStatus:
        raise OSError("state.json is unreadable")

    with StatusServer(broken) as server:
        metrics = httpx.get(server.url + "/metrics")
        page = httpx.get(server.url + "/")
        data = httpx.get(server.url + "/status.json")
        health = httpx.get(server.url + "/healthz")
    assert metrics.status_code == 404
    assert page.status_code == data.status_code == 500
    assert "state.json is unreadable" in page.text and "OSError" in data.text
    assert health.status_code == 200


def test_a_taken_port_is_a_serve_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = StatusServer(lambda: canary_status(), port=port)
        with pytest.raises(ServeError, match=f"127.0.0.1:{port}"):
            server.start(timeout=5)
