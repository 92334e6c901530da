"""Draw charts as SVG on the server, each with a table of the same numbers.

Pure Python, no script in the browser: a page includes a chart's SVG (`{{ chart }}`: it says it
is HTML already, through `__html__`, and every label in it is escaped here) and its `table`,
so the figures read without JavaScript and with a screen reader. Every bar, segment and point carries a <title>
with its exact value, which browsers show on hover.

Four shapes cover the stats pages:
- `stacked_bars`: a value per day split by series (runs by outcome, tokens in and out);
- `line_chart`: series over days (cost per currency);
- `grouped_hbars`: a few values per named row (latency p50 and p95 per step);
- `share_hbars`: each row's parts as shares of 100% (the branches a step took).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

Format = Callable[[float], str]

WIDTH = 720
_FONT = 12
# Roughly how wide a character of the 12px labels is, to lay out legends and cut long labels.
_CHAR_WIDTH = 6.6
# Row labels are cut to fit left of the plot by a wider average letter than elsewhere: names
# of actors run to wide letters ("mathematician"), and a label too long is clipped, not cut.
_WIDE_CHAR_WIDTH = 7.6
_LEFT_AXIS = 56  # room for the value labels of vertical charts
_ROW_LABEL = 170  # room for the row labels of horizontal charts
_PALETTE = (
    "#2f5bea",
    "#12805c",
    "#c4320a",
    "#b54708",
    "#7a5af8",
    "#0e9384",
    "#dd2590",
    "#667085",
    "#1570ef",
    "#f79009",
)
_KEY = re.compile(r"[a-z][a-z0-9-]*")
# A table cell with no value.
NO_VALUE = "\N{EN DASH}"


def integer(value: float) -> str:
    """Format a count: `1,234`."""
    return f"{round(value):,}"


def duration_ms(value: float) -> str:
    """Format milliseconds for people: `340 ms`, `2.4 s`, `3.5 min`, `1.2 h`."""
    if value < 1000:
        return f"{round(value)} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    if value < 3_600_000:
        return f"{value / 60_000:.1f} min"
    return f"{value / 3_600_000:.1f} h"


def amount(value: float) -> str:
    """Format a sum of money with the precision small model costs need: `0.0042`, `12.50`."""
    if value == 0:
        return "0"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.6f}".rstrip("0").rstrip(".")


class Markup(str):
    """Text that is HTML already, every label in it escaped: templates include it as it is."""

    def __html__(self) -> str:
        return self


@dataclass(frozen=True)
class Series:
    """One named run of values, one per category (None: nothing to show there)."""

    name: str
    values: tuple[float | None, ...]
    color: str = ""


@dataclass(frozen=True)
class Table:
    """The chart's numbers as rows of text, for an HTML table.

    `links`, when given, holds an address per row for its first cell ("" for none).
    """

    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    links: tuple[str, ...] = ()

    def linked_rows(self) -> list[tuple[str, tuple[str, ...]]]:
        """Return each row with the address of its first cell ("" when it has none)."""
        links = self.links or ("",) * len(self.rows)
        return list(zip(links, self.rows, strict=True))


@dataclass(frozen=True)
class Chart:
    """A drawn chart: its SVG, the table of its numbers, and whether it has anything to show."""

    key: str
    title: str
    description: str
    svg: Markup
    table: Table
    empty: bool

    def __html__(self) -> str:
        """Return the SVG: safe to include as it is, every text in it was escaped."""
        return self.svg

    def __str__(self) -> str:
        # Templates turn a value into text before escaping it: Markup survives that.
        return self.svg


# -- the shapes ------------------------------------------------------------------------------


def stacked_bars(
    *,
    key: str,
    title: str,
    description: str,
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Format = integer,
    category_label: str = "Day",
    axis_labels: Sequence[str] = (),
) -> Chart:
    """Draw one bar per category, split into the series' values stacked on each other.

    `axis_labels` are shorter names of the categories for the axis (the table has the full ones).
    """
    series = _colored(series)
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(categories))]
    table = _series_table(
        category_label, categories, series, fmt, extra=[("Total", [fmt(t) for t in totals])]
    )
    canvas = _Canvas(key, title, description, [s for s in series if any(s.values)])
    axis = canvas.value_axis(max(totals, default=0), fmt)
    band = canvas.band(len(categories))
    bar = max(band * 0.7, 1.0)
    for i, category in enumerate(categories):
        x = canvas.plot_left + i * band + (band - bar) / 2
        base = canvas.plot_top + canvas.plot_height
        for s in series:
            value = s.values[i]
            if not value:
                continue
            height = axis.length(value)
            base -= height
            canvas.rect(x, base, bar, height, s.color, f"{category} · {s.name}: {fmt(value)}")
    canvas.category_axis(axis_labels or categories)
    return canvas.chart(table, empty=not any(totals))


def line_chart(
    *,
    key: str,
    title: str,
    description: str,
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Format = integer,
    category_label: str = "Day",
    axis_labels: Sequence[str] = (),
) -> Chart:
    """Draw each series as a line over the categories, with a marked point per value."""
    series = _colored(series)
    values = _values(series)
    table = _series_table(category_label, categories, series, fmt)
    canvas = _Canvas(key, title, description, series)
    axis = canvas.value_axis(max(values, default=0), fmt)
    band = canvas.band(len(categories))
    bottom = canvas.plot_top + canvas.plot_height
    for s in series:
        points = [
            (canvas.plot_left + (i + 0.5) * band, bottom - axis.length(v), categories[i], v)
            for i, v in enumerate(s.values)
            if v is not None
        ]
        if len(points) > 1:
            canvas.polyline([(x, y) for x, y, _, _ in points], s.color)
        for x, y, category, value in points:
            canvas.point(x, y, s.color, f"{category} · {s.name}: {fmt(value)}")
    canvas.category_axis(axis_labels or categories)
    return canvas.chart(table, empty=not any(values))


def grouped_hbars(
    *,
    key: str,
    title: str,
    description: str,
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Format = integer,
    category_label: str = "",
    extra: Sequence[tuple[str, Sequence[str]]] = (),
    links: Sequence[str] = (),
    maximum: float = 0,
) -> Chart:
    """Draw a row per category with one horizontal bar per series.

    `extra` adds columns to the table only (e.g. how many values a percentile was taken of);
    `links` gives the table's category cells an address each; `maximum` is where the scale
    ends at least (a rate's 100%), so bars of small values do not fill the row.
    """
    series = _colored(series)
    values = _values(series)
    table = _series_table(category_label, categories, series, fmt, extra=extra, links=links)
    bar = 12.0
    row = bar * len(series) + 10
    canvas = _Canvas(
        key,
        title,
        description,
        series,
        left=_ROW_LABEL,
        right=72,  # the value written after the longest bar
        plot_height=row * len(categories),
    )
    top = max(maximum, *values) if values else maximum
    axis = _Axis(top, height=canvas.plot_width, integers=fmt is integer)
    for i, category in enumerate(categories):
        y = canvas.plot_top + i * row + 5
        canvas.row_label(category, y + row / 2 - 5)
        for j, s in enumerate(series):
            value = s.values[i]
            if value is None:
                continue
            width = max(axis.length(value), 1.0)
            label = f"{category} · {s.name}: {fmt(value)}"
            canvas.rect(canvas.plot_left, y + j * bar, width, bar - 2, s.color, label)
            canvas.text(canvas.plot_left + width + 4, y + j * bar + bar - 3, fmt(value), "start")
    return canvas.chart(table, empty=not values)


def share_hbars(
    *,
    key: str,
    title: str,
    description: str,
    rows: Sequence[tuple[str, Sequence[tuple[str, int]]]],
    category_label: str = "",
    part_label: str = "",
) -> Chart:
    """Draw a 100% bar per row, split into its parts' shares (labelled when there is room)."""
    table_rows: list[tuple[str, ...]] = []
    for category, parts in rows:
        total = sum(n for _, n in parts)
        for name, n in parts:
            table_rows.append((category, name, integer(n), _percent(n, total)))
    table = Table(head=(category_label, part_label, "Times", "Share"), rows=tuple(table_rows))
    bar = 22.0
    row = bar + 12
    canvas = _Canvas(
        key, title, description, [], left=_ROW_LABEL, plot_height=row * len(rows), right=12
    )
    for i, (category, parts) in enumerate(rows):
        y = canvas.plot_top + i * row + 6
        canvas.row_label(category, y + bar / 2)
        total = sum(n for _, n in parts)
        x = canvas.plot_left
        for j, (name, n) in enumerate(parts):
            if not total or not n:
                continue
            width = canvas.plot_width * n / total
            color = _PALETTE[j % len(_PALETTE)]
            share = _percent(n, total)
            canvas.rect(x, y, width, bar, color, f"{category} · {name}: {n} of {total} ({share})")
            text = f"{name} {share}"
            if len(text) * _CHAR_WIDTH + 8 < width:
                canvas.text(x + 4, y + bar / 2 + 4, text, "start", fill="#fff")
            x += width
    return canvas.chart(table, empty=not any(n for _, parts in rows for _, n in parts))


# -- drawing ---------------------------------------------------------------------------------


class _Axis:
    """A value scale from 0 to a round maximum, with its tick values."""

    def __init__(self, maximum: float, *, height: float, integers: bool) -> None:
        step = _nice_step(maximum / 4 if maximum > 0 else 1)
        if integers:
            step = max(step, 1.0)
        self.top = step * max(math.ceil(maximum / step), 1) if maximum > 0 else step * 4
        self.ticks = [step * k for k in range(round(self.top / step) + 1)]
        self.height = height

    def length(self, value: float) -> float:
        return self.height * max(value, 0) / self.top


def _nice_step(rough: float) -> float:
    """Return the smallest 1, 2, 2.5 or 5 times a power of ten that is at least `rough`."""
    magnitude = 10.0 ** math.floor(math.log10(rough))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= rough)


class _Canvas:
    """The SVG being drawn: a legend on top, then the plot area."""

    def __init__(
        self,
        key: str,
        title: str,
        description: str,
        legend: Sequence[Series],
        *,
        left: float = _LEFT_AXIS,
        right: float = 16,
        plot_height: float = 180,
    ) -> None:
        if not _KEY.fullmatch(key):
            raise ValueError(f"a chart key is lowercase letters, digits and '-', not {key!r}")
        self.key, self.title, self.description = key, title, description
        self.parts: list[str] = []
        legend_rows = self._legend(legend, left)
        self.plot_left = left
        self.plot_top = 12 + legend_rows * 20
        self.plot_width = WIDTH - left - right
        self.plot_height = plot_height
        self.bottom_room = 30.0

    def _legend(self, legend: Sequence[Series], left: float) -> int:
        if not legend:
            return 0
        x, rows = left, 1
        for s in legend:
            width = 18 + len(s.name) * _CHAR_WIDTH + 14
            if x + width > WIDTH and x > left:
                x, rows = left, rows + 1
            y = 4 + (rows - 1) * 20
            self.parts.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="12" height="12" rx="2" '
                f'fill="{escape(s.color)}"/>'
            )
            self.text(x + 16, y + 12, s.name, "start")
            x += width
        return rows

    def value_axis(self, maximum: float, fmt: Format) -> _Axis:
        """Draw a vertical scale from 0 to `maximum` or a little more, and return it."""
        axis = _Axis(maximum, height=self.plot_height, integers=fmt is integer)
        bottom = self.plot_top + self.plot_height
        for tick in axis.ticks:
            y = bottom - axis.length(tick)
            self.parts.append(
                f'<line x1="{self.plot_left:.1f}" y1="{y:.1f}" x2="{self.plot_left + self.plot_width:.1f}" '
                f'y2="{y:.1f}" stroke="#eaecf0"/>'
            )
            self.text(self.plot_left - 6, y + 4, fmt(tick), "end")
        return axis

    def band(self, count: int) -> float:
        """Return the width each of `count` categories has along the horizontal axis."""
        return self.plot_width / max(count, 1)

    def category_axis(self, categories: Sequence[str]) -> None:
        bottom = self.plot_top + self.plot_height
        self.parts.append(
            f'<line x1="{self.plot_left:.1f}" y1="{bottom:.1f}" '
            f'x2="{self.plot_left + self.plot_width:.1f}" y2="{bottom:.1f}" stroke="#98a2b3"/>'
        )
        if not categories:
            return
        band = self.band(len(categories))
        room = max(int(self.plot_width // 64), 1)
        every = max(math.ceil(len(categories) / room), 1)
        longest = max(int(band * every / _CHAR_WIDTH) - 1, 3)
        for i in range(0, len(categories), every):
            x = self.plot_left + (i + 0.5) * band
            self.text(x, bottom + 16, _shorten(categories[i], longest), "middle")

    def row_label(self, label: str, y: float) -> None:
        short = _shorten(label, int((self.plot_left - 10) / _WIDE_CHAR_WIDTH))
        title = f"<title>{escape(label)}</title>" if short != label else ""
        self.parts.append(
            f'<text x="{self.plot_left - 8:.1f}" y="{y + 4:.1f}" text-anchor="end" '
            f'font-size="{_FONT}">{title}{escape(short)}</text>'
        )

    def rect(self, x: float, y: float, w: float, h: float, color: str, label: str) -> None:
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
            f'fill="{escape(color)}"><title>{escape(label)}</title></rect>'
        )

    def point(self, x: float, y: float, color: str, label: str) -> None:
        self.parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{escape(color)}">'
            f"<title>{escape(label)}</title></circle>"
        )

    def polyline(self, points: Sequence[tuple[float, float]], color: str) -> None:
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{escape(color)}" stroke-width="2"/>'
        )

    def text(self, x: float, y: float, text: str, anchor: str, *, fill: str = "#475467") -> None:
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{_FONT}" '
            f'fill="{fill}">{escape(text)}</text>'
        )

    def chart(self, table: Table, *, empty: bool) -> Chart:
        height = self.plot_top + self.plot_height + self.bottom_room
        title_id, desc_id = f"{self.key}-title", f"{self.key}-desc"
        svg = Markup(
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{self.key}" role="img" '
            f'viewBox="0 0 {WIDTH} {height:.0f}" width="100%" '
            f'aria-labelledby="{title_id} {desc_id}" font-family="system-ui, sans-serif">'
            f'<title id="{title_id}">{escape(self.title)}</title>'
            f'<desc id="{desc_id}">{escape(self.description)}</desc>'
            + "".join(self.parts)
            + "</svg>"
        )
        return Chart(self.key, self.title, self.description, svg, table, empty)


def _series_table(
    category_label: str,
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Format,
    *,
    extra: Sequence[tuple[str, Sequence[str]]] = (),
    links: Sequence[str] = (),
) -> Table:
    """Return a row per category: its value in each series, then its `extra` columns."""
    return Table(
        head=(category_label, *(s.name for s in series), *(name for name, _ in extra)),
        rows=tuple(
            (
                c,
                *(_cell(s.values[i], fmt) for s in series),
                *(column[i] for _, column in extra),
            )
            for i, c in enumerate(categories)
        ),
        links=tuple(links),
    )


def _values(series: Sequence[Series]) -> list[float]:
    return [v for s in series for v in s.values if v is not None]


def _colored(series: Sequence[Series]) -> list[Series]:
    return [
        s if s.color else Series(s.name, s.values, _PALETTE[i % len(_PALETTE)])
        for i, s in enumerate(series)
    ]


def _cell(value: float | None, fmt: Format) -> str:
    return NO_VALUE if value is None else fmt(value)


def _percent(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else NO_VALUE


def _shorten(text: str, longest: int) -> str:
    return text if len(text) <= longest else text[: max(longest - 1, 1)] + "…"
