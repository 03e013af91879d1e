"""The flywheel's status page: one self-contained HTML document a person reads instead of JSON.

Why: the service decides by itself when to ramp, promote or roll back, and a
person has to see *why* at a glance: which version serves and what it
replaced, where the canary stands with each arm's numbers and intervals, how
the rounds went, which monitor broke. The page is rendered on the server, so
it reads fine without JavaScript (a ``<noscript>`` refresh reloads it), and
it carries no external asset (no CDN: the machine may be offline): inline
CSS; inline SVG drawn here (the rounds' curve with its whiskers, the arms'
bars with their intervals; a chart library would need a CDN, a PNG a route
and a refresh of its own); and a small inline script that polls
``status.json`` every ``refresh_s`` seconds and, when anything but the time
changed, fetches the page again and swaps its ``#status`` part in place (no
reload, no flicker). The script never writes to the console: a failed poll
only marks the page as stale.

Versions, reasons, thresholds and audit details come from files, so every
string goes through :func:`html.escape`.

Example:
    >>> from datetime import datetime, timezone
    >>> from agentic_loop.distill.flywheel.status import FlywheelStatus, MonitorLine
    >>> status = FlywheelStatus(
    ...     registry="reg", updated_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    ...     phase="idle", current="<v1>", monitors=[MonitorLine(
    ...         version="<v1>", metric="error_rate", value=0.3, baseline=0.01,
    ...         threshold="rise > 0.05", breached=True)])
    >>> page = render_status_page(status, refresh_s=2)
    >>> page.startswith("<!DOCTYPE html>"), "&lt;v1&gt;" in page, "<v1>" in page
    (True, True, False)
    >>> 'class="breach"' in page and 'role="alert"' in page, 'data-refresh-ms="2000"' in page
    (True, True)
    >>> from agentic_loop.distill.flywheel.status import RoundPoint
    >>> svg = rounds_svg([RoundPoint(round=1, version="v<2>", golden_pass_rate=0.5,
    ...                              ci95=(0.3, 0.7), decision="promoted")])
    >>> svg.startswith("<svg") and "v&lt;2&gt;" in svg and "v<2>" not in svg
    True
"""

from __future__ import annotations

from datetime import datetime
from html import escape

from agentic_loop.distill.flywheel.status import (
    ArmNumbers,
    FlywheelStatus,
    MonitorLine,
    RoundPoint,
)
from agentic_loop.errors import ConfigError

__all__ = ["AUDIT_SHOWN", "arms_svg", "decision_class", "render_status_page", "rounds_svg"]

#: How many audit entries the page lists (the newest).
AUDIT_SHOWN = 20

_CSS = """
:root { --ink:#1d2430; --muted:#6b7280; --line:#e5e7eb; --bg:#f7f8fa; --card:#fff;
  --current:#1f6feb; --candidate:#e8590c; --good:#2f9e44; --bad:#d32f2f; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--ink); background:var(--bg); }
header { display:flex; flex-wrap:wrap; gap:12px; align-items:baseline; padding:14px 24px;
  background:var(--ink); color:#fff; }
header h1 { font-size:18px; margin:0; } header .reg { color:#cbd5e1; font-family:monospace; }
#live { margin-left:auto; color:#cbd5e1; font-size:12px; } #live.stale { color:#ffb4b4; }
main { display:grid; grid-template-columns:repeat(auto-fit,minmax(420px,1fr)); gap:16px;
  padding:16px 24px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:12px 16px; overflow-x:auto; }
.wide { grid-column:1/-1; }
h2 { font-size:15px; margin:0 0 8px; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line); }
th { color:var(--muted); font-weight:600; font-size:12px; }
.muted { color:var(--muted); } .mono { font-family:ui-monospace,monospace; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px;
  font-weight:600; background:#e5e7eb; color:var(--ink); }
.phase-canary { background:#fff4e6; color:var(--candidate); }
.phase-round { background:#e7f0ff; color:var(--current); }
.phase-stopped { background:#fde7e7; color:var(--bad); }
.version { font-family:ui-monospace,monospace; font-size:20px; font-weight:700; }
.lineage { color:var(--muted); font-family:ui-monospace,monospace; }
.stages { display:flex; gap:4px; margin:6px 0; } .stages span { flex:1; text-align:center;
  padding:3px 0; border-radius:4px; background:#eef1f5; font-size:12px; }
.stages span.done { background:#d3f9d8; } .stages span.now { background:var(--candidate);
  color:#fff; font-weight:700; }
tr.breach td { background:#fde7e7; color:var(--bad); font-weight:600; }
p.breach, p.error { background:#fde7e7; color:var(--bad); border:1px solid #f5c2c2;
  border-radius:6px; padding:8px 12px; margin:0 0 12px; font-weight:600; }
.good { color:var(--good); } .bad { color:var(--bad); } .other { color:var(--muted); }
.chart { max-width:100%; height:auto; }
.chart .grid { stroke:var(--line); } .chart .axis, .chart .value { font-size:11px;
  fill:var(--muted); } .chart .value { fill:var(--ink); }
.chart .curve { fill:none; stroke:#94a3b8; stroke-width:2; }
.chart .whisker { stroke:var(--ink); stroke-width:1.5; }
.chart .round.good circle { fill:var(--good); } .chart .round.bad circle { fill:var(--bad); }
.chart .round.other circle { fill:#94a3b8; }
.chart .bar.current { fill:var(--current); opacity:.75; }
.chart .bar.candidate { fill:var(--candidate); opacity:.75; }
td.current { color:var(--current); font-weight:600; }
td.candidate { color:var(--candidate); font-weight:600; }
"""

# Polls status.json; when anything but updated_at changed, fetches this page again and swaps
# #status in place. It never writes to the console: a failed poll marks #live as stale.
_SCRIPT = """
(function () {
  var root = document.getElementById("status");
  var live = document.getElementById("live");
  var every = Number(root.getAttribute("data-refresh-ms")) || 5000;
  var seen = null, busy = false;
  function mark(ok, when) {
    live.className = ok ? "" : "stale";
    var at = String(when).replace("T", " ").replace(/\\.\\d+/, "");
    live.textContent = ok ? "live · status of " + at : "stale · last poll failed";
  }
  function swap() {
    return fetch(location.href, {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error("page " + r.status); }
      return r.text();
    }).then(function (html) {
      var next = new DOMParser().parseFromString(html, "text/html").getElementById("status");
      if (next) { root.replaceWith(next); root = next; }
    });
  }
  function tick() {
    if (busy) { return; }
    busy = true;
    fetch("status.json", {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error("status " + r.status); }
      return r.json();
    }).then(function (s) {
      var when = s.updated_at;
      delete s.updated_at;
      var key = JSON.stringify(s);
      var changed = key !== seen;
      seen = key;
      return (changed ? swap() : Promise.resolve()).then(function () { mark(true, when); });
    }).catch(function () { mark(false, ""); }).then(function () { busy = false; });
  }
  tick();
  setInterval(tick, every);
})();
"""


# -- the pictures: the rounds' curve and the arms' bars, as inline SVG -------------

_W, _H = 640, 220  # the rounds' curve
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 16, 14, 34


def decision_class(decision: str | None) -> str:
    """``good``, ``bad`` or ``other``: the colour class of a gate decision's words.

    >>> decision_class("promoted"), decision_class("rejected: worse"), decision_class(None)
    ('good', 'bad', 'other')
    """
    words = (decision or "").lower()
    if any(w in words for w in ("reject", "roll", "fail", "breach", "worse")):
        return "bad"
    if any(w in words for w in ("promot", "accept", "pass", "canary", "deploy")):
        return "good"
    return "other"


def _pct_of(value: float) -> str:
    return f"{100 * value:.1f}%"


def rounds_svg(rounds: list[RoundPoint]) -> str:
    """Golden pass rate per round (0-100%), its 95% interval as a whisker, the decision coloured."""
    if not rounds:
        return '<p class="muted">No round yet.</p>'
    inner_w, inner_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    step = inner_w / max(len(rounds), 1)

    def x_of(i: int) -> float:
        return _LEFT + step * (i + 0.5)

    def y_of(rate: float) -> float:
        return _TOP + inner_h * (1.0 - min(max(rate, 0.0), 1.0))

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {_W} {_H}" width="{_W}" '
             f'height="{_H}" aria-label="golden pass rate per round">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = y_of(tick)
        parts.append(f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" '
                     f'y2="{y:.1f}"/><text class="axis" x="{_LEFT - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{int(tick * 100)}%</text>')
    path = [(x_of(i), y_of(r.golden_pass_rate)) for i, r in enumerate(rounds)
            if r.golden_pass_rate is not None]
    if len(path) > 1:
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in path)
        parts.append(f'<polyline class="curve" points="{points}"/>')
    for i, r in enumerate(rounds):
        x = x_of(i)
        parts.append(f'<text class="axis" x="{x:.1f}" y="{_H - _BOTTOM + 16}" '
                     f'text-anchor="middle">{r.round}</text>')
        if r.golden_pass_rate is None:
            continue
        tip = escape(f"round {r.round}: {r.version or '-'}, golden {_pct_of(r.golden_pass_rate)}"
                     + (f" [{_pct_of(r.ci95[0])}, {_pct_of(r.ci95[1])}]" if r.ci95 else "")
                     + f", {r.decision or 'no decision'}")
        parts.append(f'<g class="round {decision_class(r.decision)}"><title>{tip}</title>')
        if r.ci95 is not None:
            lo, hi = y_of(r.ci95[0]), y_of(r.ci95[1])
            parts.append(f'<line class="whisker" x1="{x:.1f}" y1="{lo:.1f}" x2="{x:.1f}" '
                         f'y2="{hi:.1f}"/><line class="whisker" x1="{x - 5:.1f}" y1="{lo:.1f}" '
                         f'x2="{x + 5:.1f}" y2="{lo:.1f}"/><line class="whisker" '
                         f'x1="{x - 5:.1f}" y1="{hi:.1f}" x2="{x + 5:.1f}" y2="{hi:.1f}"/>')
        parts.append(f'<circle cx="{x:.1f}" cy="{y_of(r.golden_pass_rate):.1f}" r="5"/></g>')
    parts.append(f'<text class="axis" x="{_W / 2:.0f}" y="{_H - 4}" text-anchor="middle">'
                 "round (dot colour: the gate's decision)</text></svg>")
    return "".join(parts)


def _bar(y: float, label: str, rate: float | None, ci: tuple[float, float] | None,
         role: str, width: int, left: int) -> str:
    inner = width - left - 160
    text = "-" if rate is None else _pct_of(rate)
    out = [f'<text class="axis" x="{left - 6}" y="{y + 12:.1f}" text-anchor="end">'
           f"{escape(label)}</text>"]
    if rate is not None:
        out.append(f'<rect class="bar {role}" x="{left}" y="{y:.1f}" '
                   f'width="{inner * min(max(rate, 0.0), 1.0):.1f}" height="16"/>')
    if ci is not None:
        lo, hi = (left + inner * min(max(v, 0.0), 1.0) for v in ci)
        out.append(f'<line class="whisker" x1="{lo:.1f}" y1="{y + 8:.1f}" x2="{hi:.1f}" '
                   f'y2="{y + 8:.1f}"/><line class="whisker" x1="{lo:.1f}" y1="{y + 3:.1f}" '
                   f'x2="{lo:.1f}" y2="{y + 13:.1f}"/><line class="whisker" x1="{hi:.1f}" '
                   f'y1="{y + 3:.1f}" x2="{hi:.1f}" y2="{y + 13:.1f}"/>')
        text += f" [{_pct_of(ci[0])}, {_pct_of(ci[1])}]"
    out.append(f'<text class="value" x="{left + inner + 6}" y="{y + 12:.1f}">'
               f"{escape(text)}</text>")
    return "".join(out)


def arms_svg(arms: list[ArmNumbers]) -> str:
    """Each arm's pass rate and error rate as bars (0-100%) with their 95% intervals."""
    if not arms:
        return ""
    width, left, row = 640, 190, 24
    metrics = (("pass rate", "pass_rate", "pass_ci95"), ("error rate", "error_rate", "error_ci95"))
    height = row * len(arms) * len(metrics) + 10 * len(metrics)
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" aria-label="pass and error rate of each arm">']
    y = 4.0
    for name, rate, ci in metrics:
        for arm in arms:
            label = f"{name} · {arm.role} {arm.version}"
            parts.append(f'<g class="arm {arm.role}"><title>{escape(label)}</title>'
                         + _bar(y, label[:30], getattr(arm, rate), getattr(arm, ci), arm.role,
                                width, left) + "</g>")
            y += row
        y += 10
    parts.append("</svg>")
    return "".join(parts)


# -- the page's sections ---------------------------------------------------------

def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" <span class=\"muted\">[{_pct(ci[0])}, {_pct(ci[1])}]</span>"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _when(at: datetime | None) -> str:
    return "–" if at is None else at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _header(status: FlywheelStatus) -> str:
    return (f'<header><h1>Flywheel</h1><span class="reg">{_e(status.registry)}</span>'
            f'<span id="live">status of {_e(_when(status.updated_at))}</span></header>')


def _summary(status: FlywheelStatus) -> str:
    parts = []
    breached = [m for m in status.monitors if m.breached]
    if breached:
        names = ", ".join(f"{m.version} {m.metric}" for m in breached)
        parts.append(f'<p class="breach" role="alert">{len(breached)} monitor'
                     f'{"s" if len(breached) > 1 else ""} breached: {_e(names)}</p>')
    if status.last_error:
        parts.append(f'<p class="error" role="alert">last error: {_e(status.last_error)}</p>')
    return f'<div class="wide" id="alerts">{"".join(parts)}</div>' if parts else ""


def _serving(status: FlywheelStatus) -> str:
    current = (f'<div class="version" id="current">{_e(status.current)}</div>'
               if status.current else '<div class="version muted" id="current">none</div>')
    replaced = status.lineage[1:] if status.lineage[:1] == [status.current] else status.lineage
    lineage = (" ← ".join(_e(v) for v in replaced) if replaced else "no earlier version")
    trigger = _e(status.trigger) if status.trigger else '<span class="muted">–</span>'
    return (f'<section><h2>Serving</h2>{current}<div class="lineage">replaced: {lineage}</div>'
            f'<table><tr><th>phase</th><td><span class="badge phase-{_e(status.phase)}" '
            f'id="phase">{_e(status.phase)}</span></td></tr>'
            f"<tr><th>trigger</th><td>{trigger}</td></tr>"
            f"<tr><th>new runs since the watermark</th><td>{status.new_runs}</td></tr>"
            f"</table></section>")


def _stages(status: FlywheelStatus) -> str:
    if not status.stages:
        return ""
    cells = []
    for i, fraction in enumerate(status.stages):
        cls = ("now" if i == status.stage else
               "done" if status.stage is not None and i < status.stage else "")
        cells.append(f'<span class="{cls}">{_pct(fraction)}</span>')
    return f'<div class="stages">{"".join(cells)}</div>'


def _arm_row(arm: ArmNumbers) -> str:
    p99 = "–" if arm.p99_latency_s is None else f"{arm.p99_latency_s:.3g} s"
    return (f'<tr class="arm-{_e(arm.role)}"><td class="{_e(arm.role)}">{_e(arm.role)}</td>'
            f'<td class="mono">{_e(arm.version)}</td><td>{arm.runs}</td>'
            f"<td>{_pct(arm.pass_rate)}{_ci(arm.pass_ci95)}</td><td>{arm.requests}</td>"
            f"<td>{_pct(arm.error_rate)}{_ci(arm.error_ci95)}</td><td>{p99}</td></tr>")


def _canary(status: FlywheelStatus) -> str:
    if status.candidate is None:
        return ('<section class="wide" id="canary"><h2>Canary</h2>'
                '<p class="muted">No canary: every request goes to the current version.</p>'
                "</section>")
    where = (f"stage {status.stage + 1} of {len(status.stages)}"
             if status.stage is not None and status.stages else "stage –")
    rows = "".join(_arm_row(a) for a in status.arms)
    reasons = "".join(f"<li>{_e(r)}</li>" for r in status.stage_reasons)
    return (f'<section class="wide" id="canary"><h2>Canary: <span class="mono">'
            f"{_e(status.candidate)}</span></h2>"
            f'<p><strong id="stage">{where}</strong> · candidate share '
            f"<strong>{_pct(status.fraction)}</strong> · started "
            f"{_e(_when(status.stage_started_at))}</p>{_stages(status)}"
            f"<table><tr><th>arm</th><th>version</th><th>runs</th><th>pass rate [95% CI]</th>"
            f"<th>requests</th><th>error rate [95% CI]</th><th>p99 latency</th></tr>{rows}"
            f"</table>{arms_svg(status.arms)}"
            + (f'<h2>Why the stage stands</h2><ul id="reasons">{reasons}</ul>' if reasons else "")
            + "</section>")


def _rounds(status: FlywheelStatus) -> str:
    rows = "".join(
        f'<tr><td>{r.round}</td><td class="mono">{_e(r.version or "–")}</td>'
        f"<td>{_pct(r.golden_pass_rate)}{_ci(r.ci95)}</td>"
        f'<td class="{decision_class(r.decision)}">{_e(r.decision or "–")}</td>'
        f"<td>{_e(_when(r.at))}</td></tr>" for r in reversed(status.rounds[-10:]))
    table = (f"<table><tr><th>round</th><th>version</th><th>golden pass [95% CI]</th>"
             f"<th>decision</th><th>at</th></tr>{rows}</table>" if rows else "")
    return f'<section id="rounds"><h2>Rounds</h2>{rounds_svg(status.rounds)}{table}</section>'


def _monitor_row(m: MonitorLine) -> str:
    state = "BREACH" if m.breached else "ok"
    attrs = ' class="breach"' if m.breached else ""
    return (f'<tr{attrs}><td class="mono">{_e(m.version)}</td><td>{_e(m.metric)}</td>'
            f"<td>{_num(m.value)}</td><td>{_num(m.baseline)}</td><td>{_e(m.threshold)}</td>"
            f"<td>{state}</td></tr>")


def _monitors(status: FlywheelStatus) -> str:
    if not status.monitors:
        body = '<p class="muted">No monitor has reported yet.</p>'
    else:
        body = ("<table><tr><th>version</th><th>metric</th><th>value</th><th>baseline</th>"
                "<th>threshold</th><th>state</th></tr>"
                + "".join(_monitor_row(m) for m in status.monitors) + "</table>")
    return f'<section class="wide" id="monitors"><h2>Monitors</h2>{body}</section>'


def _audit(status: FlywheelStatus) -> str:
    shown = list(reversed(status.audit[-AUDIT_SHOWN:]))
    if not shown:
        return ('<section class="wide" id="audit"><h2>Audit</h2>'
                '<p class="muted">Nothing yet.</p></section>')
    rows = "".join(
        f'<tr><td class="mono">{_e(_when(a.at))}</td><td>{_e(a.action)}</td>'
        f'<td class="mono">{_e(a.version or "–")}</td><td>{_e(a.detail)}</td></tr>'
        for a in shown)
    return (f'<section class="wide" id="audit"><h2>Audit (last {len(shown)}, newest first)'
            f"</h2><table><tr><th>at</th><th>action</th><th>version</th><th>detail</th></tr>"
            f"{rows}</table></section>")


def render_status_page(status: FlywheelStatus, *, refresh_s: float = 5.0) -> str:
    """The whole HTML document for ``status``; it polls ``status.json`` every ``refresh_s`` s."""
    if not refresh_s > 0:
        raise ConfigError(f"refresh_s={refresh_s!r}: the status page needs a refresh period "
                          "> 0 seconds; pass e.g. refresh_s=5")
    refresh_ms = max(int(refresh_s * 1000), 200)
    body = (_summary(status) + _serving(status) + _rounds(status) + _canary(status)
            + _monitors(status) + _audit(status))
    title = f"Flywheel · {status.current or 'no version'} · {status.phase}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title>"
            '<link rel="icon" href="data:,">'
            f'<noscript><meta http-equiv="refresh" content="{max(round(refresh_s), 1)}">'
            f"</noscript><style>{_CSS}</style></head><body>{_header(status)}"
            f'<main id="status" data-refresh-ms="{refresh_ms}">{body}</main>'
            f"<script>{_SCRIPT}</script></body></html>\n")
