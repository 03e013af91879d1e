"""The one table: a rich table that fits the width it is printed at, never a squeezed column.

Why: rich shrinks columns to make a wide table fit a narrow terminal, down to
zero width when it must, so at 80 columns a table can lose its gate column or
print ``g…`` headers. :class:`FitTable` decides at render time, from the
console's width, what to show: every column at its full width when they fit;
otherwise each column gets at least its header's longest word (and its whole
value when it must not wrap) and long text wraps; still too wide, headers
switch to their short forms with a legend in the caption; still too wide,
the columns marked ``drop`` go, last first, and the caption says which. So
the same table reads in a wide terminal, at 80 columns and in a log file.

The CLI and the demo print every table through it (``tables`` sits on the
package's lowest floor, so any layer may import it).

Rates print one way everywhere, as percent (:func:`percent`).

Example:
    >>> import io
    >>> from rich.console import Console
    >>> table = FitTable("Rounds", [Col("round"), Col("model", wrap=True),
    ...                             Col("golden before", short="gold<"),
    ...                             Col("seconds", drop=1)])
    >>> table.add_row("1", "Qwen/Qwen2.5-0.5B-Instruct-" + "x" * 60, "17.0%", "412")
    >>> console = Console(width=40, record=True, file=io.StringIO())
    >>> console.print(table)
    >>> lines = console.export_text().splitlines()
    >>> max(len(line) for line in lines) <= 40
    True
    >>> "gold< = golden before" in " ".join(lines)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.table import Table

__all__ = ["Col", "FitTable", "percent"]

Justify = Literal["left", "right", "center"]


@dataclass(frozen=True)
class Col:
    """One column of a :class:`FitTable`.

    ``wrap``: long values may wrap onto more lines (text such as a task or a
    path); otherwise a value is never broken. ``short``: the header used when
    the full ones do not fit (the caption's legend spells it out). ``drop``:
    0 keeps the column always; higher numbers go first when the table still
    does not fit. ``min_width``: the narrowest it may wrap to.
    """

    header: str
    justify: Justify = "left"
    wrap: bool = False
    short: str | None = None
    drop: int = 0
    min_width: int = 0


class FitTable:
    """A table whose columns are decided at render time from the console's width.

    Build it like a rich ``Table`` (``add_row`` with strings, markup allowed),
    print it with ``console.print``; :meth:`build` gives the rich ``Table``
    for a given width. ``hidden_hint`` ends the caption line that names the
    columns left out (where to find them, e.g. ``"see improve.json"``).
    """

    def __init__(self, title: str | None, columns: Sequence[Col], *, caption: str | None = None,
                 hidden_hint: str = "widen the terminal to see them",
                 **table_options: Any) -> None:
        self.title = title
        self.columns = list(columns)
        self.caption = caption
        self.hidden_hint = hidden_hint
        self.table_options = table_options
        self.rows: list[list[RenderableType]] = []

    def add_row(self, *cells: RenderableType) -> None:
        """One row, a cell per column (``None`` for an empty cell)."""
        if len(cells) != len(self.columns):
            from agentic_loop.errors import ConfigError

            raise ConfigError(f"a row of {self.title!r} has {len(cells)} cells for "
                              f"{len(self.columns)} columns; pass one per column")
        self.rows.append(["" if c is None else c for c in cells])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.build(options.max_width, console)

    def build(self, width: int, console: Console | None = None) -> Table:
        """The rich ``Table`` that fits ``width`` columns (see the module docstring)."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console(width=width)
        probe = Table(**self.table_options)
        keep = list(range(len(self.columns)))
        values = [max([0] + [_cell_len(console, row[i]) for row in self.rows])
                  for i in range(len(self.columns))]
        short = False
        while True:
            natural = [max(values[i], len(self._header(i, short))) for i in range(len(values))]
            room = width - _overhead(probe, len(keep))
            floors = [self._floor(i, natural[i], short) for i in keep]
            if sum(natural[i] for i in keep) <= room or sum(floors) <= room:
                break
            if not short and any(self.columns[i].short for i in keep):
                short = True
                continue
            droppable = [i for i in keep if self.columns[i].drop]
            if not droppable:
                break  # nothing left to give up: rich squeezes what remains
            keep.remove(max(reversed(droppable), key=lambda i: self.columns[i].drop))
        widths = _share([natural[i] for i in keep], floors, room)
        table = Table(title=self.title, caption=self._caption(keep, short, width),
                      **self.table_options)
        for i, w in zip(keep, widths, strict=True):
            c = self.columns[i]
            table.add_column(self._header(i, short), justify=c.justify, width=w,
                             overflow="fold", no_wrap=not c.wrap)
        for row in self.rows:
            table.add_row(*(row[i] for i in keep))
        return table

    def _header(self, i: int, short: bool) -> str:
        c = self.columns[i]
        return c.short if short and c.short else c.header

    def _floor(self, i: int, natural: int, short: bool) -> int:
        c = self.columns[i]
        words = max(len(word) for word in self._header(i, short).split() or [""])
        return natural if not c.wrap else min(natural, max(words, c.min_width, 1))

    def _caption(self, keep: list[int], short: bool, width: int) -> str | None:
        parts = [self.caption] if self.caption else []
        if short:
            parts.append("; ".join(f"{c.short} = {c.header}" for i, c in enumerate(self.columns)
                                   if i in keep and c.short))
        hidden = [c.header for i, c in enumerate(self.columns) if i not in keep]
        if hidden:
            parts.append(f"not shown at {width} columns: {', '.join(hidden)} "
                         f"({self.hidden_hint})")
        return "\n".join(parts) or None


def percent(rate: float | None, interval: Sequence[float] | None = None, *,
            digits: int = 0) -> str:
    """A rate as the CLI prints every rate: percent, ``-`` when unknown.

    Whole percent by default; a rate under 1% (or over 99%) that is not
    exactly 0 (or 1) keeps one decimal, so a rare error never reads as none.
    ``digits`` asks for decimals (the monitor's error rates); ``interval``
    adds the 95% interval in brackets.

    >>> percent(0.3125), percent(0.004), percent(None), percent(1.0)
    ('31%', '0.4%', '-', '100%')
    >>> percent(0.17, (0.12, 0.234)), percent(1 / 60, digits=1)
    ('17% [12-23%]', '1.7%')
    """
    if rate is None:
        return "-"
    text = _pct(rate, digits)
    if interval is None:
        return text
    low, high = interval
    return f"{text} [{_pct(low, digits)[:-1]}-{_pct(high, digits)}]"


def _pct(rate: float, digits: int) -> str:
    if not digits and (0 < rate < 0.01 or 0.99 < rate < 1):
        digits = 1
    return f"{rate:.{digits}%}"


def _cell_len(console: Console, cell: RenderableType) -> int:
    """The width a cell needs on one line (markup read as the console reads it)."""
    from rich.measure import Measurement

    renderable = console.render_str(cell) if isinstance(cell, str) else cell
    return Measurement.get(console, console.options.update_width(10_000), renderable).maximum


def _overhead(table: Table, n: int) -> int:
    """Characters a table of ``n`` columns spends on borders and padding."""
    if n == 0:
        return 0
    _, right, _, left = table.padding
    pad = n * (left + right) - (0 if table.pad_edge else left + right)
    edges = (2 if table.show_edge else 0) + (n - 1) if table.box else 0
    return pad + edges


def _share(natural: list[int], floors: list[int], room: int) -> list[int]:
    """Column widths that fit ``room``: the widest columns give way first (as rich does).

    Every column is cut to one common level (never below its floor): the
    highest level that fits wins, and what is left of the room goes to the
    columns cut deepest, so short labels keep their whole width while long
    text wraps.
    """
    if sum(natural) <= room:
        return natural
    level = max(natural)
    while level > 0 and sum(max(f, min(n, level)) for n, f in zip(natural, floors, strict=True)
                            ) > room:
        level -= 1
    widths = [max(f, min(n, level)) for n, f in zip(natural, floors, strict=True)]
    left = room - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: widths[i] - natural[i]):
        if left <= 0:
            break
        give = min(natural[i] - widths[i], left)
        widths[i] += give
        left -= give
    return widths
