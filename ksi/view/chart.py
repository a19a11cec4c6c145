"""The geometry of a small line chart, drawn as inline SVG by the report template.

No charting library and no CDN: a report must open from ``file://`` with no
network. This module only computes coordinates (where each point, line and
tick goes); ``templates/chart.svg.j2`` turns them into SVG elements, so no
markup is written here. Values are fractions in [0, 1] shown as percentages:
the generations chart puts each generation's solve rate and the cumulative
solved share on one axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs


@attrs.frozen
class Point:
    x: float
    y: float
    #: What hovering the point says (an SVG ``<title>``).
    label: str


@attrs.frozen
class Series:
    name: str
    #: A CSS class of the template's stylesheet (its colour).
    css_class: str
    points: tuple[Point, ...]

    @property
    def path(self) -> str:
        """The SVG path through the points (``M x y L x y ...``)."""
        return " ".join(
            f"{'M' if i == 0 else 'L'}{p.x:.1f} {p.y:.1f}" for i, p in enumerate(self.points)
        )


@attrs.frozen
class Tick:
    #: Pixel position along its axis.
    pos: float
    label: str


@attrs.frozen
class LineChart:
    width: int
    height: int
    left: float
    top: float
    right: float
    bottom: float
    series: tuple[Series, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_title: str
    y_title: str


def percent_line_chart(
    xs: Sequence[int],
    series: Sequence[tuple[str, str, Sequence[float]]],
    *,
    x_title: str = "generation",
    y_title: str = "% of tasks",
    width: int = 640,
    height: int = 260,
) -> LineChart:
    """A chart of ``series`` (name, css class, one value in [0, 1] per x) over ``xs``.

    Points are evenly spaced in the order of ``xs`` (a single x sits in the
    middle); values outside [0, 1] are clamped, so a bad figure cannot draw
    outside the frame.
    """
    for name, _, values in series:
        if len(values) != len(xs):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(xs)} x values")
    left, top, right, bottom = 48.0, 16.0, width - 16.0, height - 40.0

    def x_at(i: int) -> float:
        if len(xs) == 1:
            return (left + right) / 2
        return left + (right - left) * i / (len(xs) - 1)

    def y_at(value: float) -> float:
        return bottom - (bottom - top) * min(1.0, max(0.0, value))

    drawn = tuple(
        Series(
            name,
            css,
            tuple(
                Point(x_at(i), y_at(v), f"{name}, {x_title} {x}: {v:.0%}")
                for i, (x, v) in enumerate(zip(xs, values, strict=True))
            ),
        )
        for name, css, values in series
    )
    return LineChart(
        width=width,
        height=height,
        left=left,
        top=top,
        right=right,
        bottom=bottom,
        series=drawn,
        x_ticks=tuple(Tick(x_at(i), str(x)) for i, x in enumerate(xs)),
        y_ticks=tuple(Tick(y_at(q / 4), f"{q * 25}%") for q in range(5)),
        x_title=x_title,
        y_title=y_title,
    )
