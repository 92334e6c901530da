"""The SVG charts: well-formed, labelled for screen readers, every text escaped, and a table with
the same numbers as the drawing."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from django.template import Context, Template

from editor import charts
from editor.charts import Chart, Series

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(\"x\")</script> & 'friends'"


def parse(chart: Chart) -> ET.Element:
    root = ET.fromstring(chart.svg)
    assert root.tag == f"{SVG}svg"
    return root


def titles(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}title")]


def every_chart(label: str = "a") -> list[Chart]:
    return [
        charts.stacked_bars(
            key="stacked",
            title=label,
            description=label,
            categories=[label, "b"],
            series=[Series(label, (1, 2)), Series("other", (3, None))],
        ),
        charts.line_chart(
            key="line",
            title=label,
            description=label,
            categories=[label, "b"],
            series=[Series(label, (0.5, 1.5))],
            fmt=charts.amount,
        ),
        charts.grouped_hbars(
            key="grouped",
            title=label,
            description=label,
            categories=[label],
            series=[Series(label, (1200,))],
            fmt=charts.duration_ms,
        ),
        charts.share_hbars(
            key="share", title=label, description=label, rows=[(label, [(label, 3), ("b", 1)])]
        ),
    ]


def test_every_chart_is_well_formed_svg_named_by_its_title_and_description() -> None:
    for chart in every_chart():
        root = parse(chart)

        assert root.get("role") == "img"
        assert root.get("aria-labelledby") == f"{chart.key}-title {chart.key}-desc"
        assert root.find(f"{SVG}title").get("id") == f"{chart.key}-title"  # type: ignore[union-attr]
        assert root.find(f"{SVG}desc").get("id") == f"{chart.key}-desc"  # type: ignore[union-attr]
        assert not chart.empty


def test_it_escapes_every_label_it_draws() -> None:
    for chart in every_chart(HOSTILE):
        root = parse(chart)  # would not parse with a raw < or &

        assert "<script>" not in chart.svg
        assert HOSTILE in titles(root)
        assert all(cell for row in chart.table.rows for cell in row)


def test_a_stacked_bar_holds_each_series_with_its_exact_value_and_a_total_in_the_table() -> None:
    chart = charts.stacked_bars(
        key="runs",
        title="Runs",
        description="Runs per day",
        categories=["2026-11-01", "2026-11-02"],
        axis_labels=["Nov 1", "Nov 2"],
        series=[Series("completed", (2, 0), "#12805c"), Series("failed", (1, 4))],
    )
    root = parse(chart)

    assert "2026-11-01 · completed: 2" in titles(root)
    assert "2026-11-02 · failed: 4" in titles(root)
    # A zero draws nothing.
    assert not [t for t in titles(root) if t.startswith("2026-11-02 · completed")]
    assert chart.table.head == ("Day", "completed", "failed", "Total")
    assert chart.table.rows == (("2026-11-01", "2", "1", "3"), ("2026-11-02", "0", "4", "4"))
    assert "Nov 1" in [t.text for t in root.iter(f"{SVG}text")]


def test_the_tallest_bar_reaches_the_top_of_a_round_scale() -> None:
    chart = charts.stacked_bars(
        key="runs",
        title="Runs",
        description="",
        categories=["a", "b"],
        series=[Series("n", (3, 7))],
    )
    root = parse(chart)

    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert ticks == ["0", "2", "4", "6", "8"]
    heights = sorted(
        float(r.get("height", 0))
        for r in root.iter(f"{SVG}rect")
        if r.find(f"{SVG}title") is not None
    )
    assert heights[1] / heights[0] == pytest.approx(7 / 3, rel=0.01)


def test_horizontal_bars_can_keep_a_scale_that_ends_at_a_given_maximum() -> None:
    def widths(values: tuple[float, ...], maximum: float = 0) -> list[float]:
        chart = charts.grouped_hbars(
            key="rates",
            title="Rates",
            description="",
            categories=[str(v) for v in values],
            series=[Series("rate", values)],
            maximum=maximum,
        )
        bars = [r for r in parse(chart).iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
        return [float(r.get("width", 0)) for r in bars]

    # 20 and 10 are drawn as short as beside a bar of 100, not stretched to the largest.
    assert widths((20, 10), maximum=100) == widths((100, 20, 10))[1:]
    assert widths((20, 10))[0] > widths((20, 10), maximum=100)[0]


def test_the_share_of_each_part_is_drawn_and_tabulated() -> None:
    chart = charts.share_hbars(
        key="branches",
        title="Branches",
        description="",
        rows=[("write", [("great", 3), ("broken", 1)]), ("review", [("approved", 2)])],
        category_label="Step",
        part_label="Branch",
    )
    root = parse(chart)

    assert "write · great: 3 of 4 (75%)" in titles(root)
    assert chart.table.rows == (
        ("write", "great", "3", "75%"),
        ("write", "broken", "1", "25%"),
        ("review", "approved", "2", "100%"),
    )


def test_a_chart_with_nothing_to_show_says_it_is_empty() -> None:
    chart = charts.stacked_bars(
        key="runs", title="Runs", description="", categories=["a"], series=[Series("n", (0,))]
    )
    lines = charts.line_chart(key="cost", title="Cost", description="", categories=["a"], series=[])
    shares = charts.share_hbars(key="b", title="B", description="", rows=[])

    assert chart.empty and lines.empty and shares.empty
    parse(lines)
    parse(shares)


def test_a_template_includes_the_svg_as_it_is_and_escapes_the_table() -> None:
    chart = every_chart(HOSTILE)[0]
    template = Template("{{ chart }}|{% for cell in chart.table.head %}{{ cell }}{% endfor %}")

    html = template.render(Context({"chart": chart}))

    svg, _, table = html.partition("|")
    assert svg == chart.svg
    assert "<script>" not in table and "&lt;script&gt;" in table


def test_table_links_go_with_their_rows() -> None:
    chart = charts.grouped_hbars(
        key="latency",
        title="Latency",
        description="",
        categories=["writer", "judge"],
        series=[Series("p50", (10, 20))],
        links=["/actors/writer/", ""],
    )

    assert chart.table.linked_rows() == [
        ("/actors/writer/", ("writer", "10")),
        ("", ("judge", "20")),
    ]


@pytest.mark.parametrize("key", ["", "Runs", "a b", "1x", 'x"y'])
def test_a_key_that_cannot_be_an_id_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="chart key"):
        charts.stacked_bars(key=key, title="", description="", categories=[], series=[])


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0 ms"), (340, "340 ms"), (2400, "2.4 s"), (210_000, "3.5 min"), (4_320_000, "1.2 h")],
)
def test_durations_read_in_the_unit_that_suits_them(ms: float, text: str) -> None:
    assert charts.duration_ms(ms) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (1e-7, "0"),
        (0.0042, "0.0042"),
        (0.5, "0.5"),
        (12.5, "12.50"),
        (1234.5, "1,234.50"),
    ],
)
def test_amounts_keep_the_precision_small_costs_need(value: float, text: str) -> None:
    assert charts.amount(value) == text
