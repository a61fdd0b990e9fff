"""Does a figure fit its canvas?  :func:`outside_canvas`, used by ``tests/test_figures.py``.

Kept apart from :mod:`litrepro.plotting`, which every method's provenance hashes.
"""

from __future__ import annotations

from matplotlib.figure import Figure


def outside_canvas(fig: Figure, tolerance: float = 1.0) -> list[str]:
    """What of ``fig`` is drawn outside its canvas or clipped away; empty when everything is inside.

    The figure is drawn once (so constrained layout runs), then with the canvas's renderer:
    - every visible, non-empty text (titles, labels, tick labels, legends, annotations)
      must have its window extent inside the figure's bbox;
    - every marker of a visible line (markers, error-bar caps) must sit inside the
      figure's bbox, and, when the line is clipped to its axes, inside the axes too: a
      marker outside its axes is not drawn, which hides a point as surely as the edge of
      the canvas does.
    ``tolerance`` is in pixels.  Returns one line per offending artist.
    """
    from matplotlib.lines import Line2D
    from matplotlib.transforms import Bbox
    from matplotlib.text import Text

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)                      # a figure built without pyplot has no renderer of its own
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox

    def inside(bb, outer) -> bool:
        return (bb.x0 >= outer.x0 - tolerance and bb.y0 >= outer.y0 - tolerance
                and bb.x1 <= outer.x1 + tolerance and bb.y1 <= outer.y1 + tolerance)

    tick_texts, drawn = set(), set()               # tick labels outside the view limits exist but are not drawn
    for ax in fig.axes:
        for axis in ax._axis_map.values():
            for tick in axis.majorTicks + axis.minorTicks:
                tick_texts.update({id(tick.label1), id(tick.label2)})
            for tick in axis._update_ticks():
                drawn.update({id(tick.label1), id(tick.label2)})
    problems = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or text.axes is not None and not text.axes.get_visible():
            continue
        if id(text) in tick_texts and id(text) not in drawn:
            continue
        bb = text.get_window_extent(renderer)
        if bb.width and not inside(bb, box):
            problems.append(f"text {text.get_text()!r} at {tuple(round(v) for v in bb.extents)} outside the canvas")
    for line in fig.findobj(Line2D):
        if not line.get_visible() or line.get_marker() in (None, "", "None", " ") or line.axes is None:
            continue
        xy = line.get_transform().transform(line.get_xydata())                        # (n, 2) pixels
        half = line.get_markersize() * fig.dpi / 72 / 2
        for (x, y) in xy:
            if not (x == x and y == y):                                               # NaN: not drawn
                continue
            mark = Bbox.from_extents(x - half, y - half, x + half, y + half)
            clip = line.axes.bbox if line.get_clip_on() else box
            if not inside(mark, box) or not inside(Bbox.from_extents(x, y, x, y), clip):
                problems.append(f"marker of {line.get_label()!r} at ({x:.0f}, {y:.0f}) outside "
                                f"{'the canvas' if not inside(mark, box) else 'its axes'}")
                break
    return problems
