"""What both explorers share: the left-to-right layout and the redraw timing."""

from __future__ import annotations

import time

from matplotlib.figure import Figure


#: Resolution of the explorers' pictures (the notebooks' PNGs use 100 dpi).
DPI = 80


def png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes at :data:`DPI`, without the version stamp."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


class Base:
    """Controls on the left, the picture to their right, one line of numbers under the picture.

    Subclasses set ``controls`` (name -> widget) and implement ``compute(**values)`` ->
    (Figure, numbers line).  ``interactive_output`` calls :meth:`_draw` when a control
    changes and renders what it displays into the picture's Output widget, in place.
    """

    controls: dict

    def __init__(self) -> None:
        import ipywidgets as w

        self.numbers = w.HTML(layout=w.Layout(margin="4px 0 0 0"))
        self.numbers.add_class("litrepro-numbers")
        self.last_redraw_s: float | None = None
        self.picture = w.interactive_output(self._draw, self.controls)
        self.picture.add_class("litrepro-picture")
        panel = w.VBox(list(self.controls.values()), layout=w.Layout(width="300px", min_width="300px"))
        self.widget = w.HBox([panel, w.VBox([self.picture, self.numbers])])

    def compute(self, **values) -> tuple[Figure, str]:
        raise NotImplementedError

    def _draw(self, **values) -> None:
        from IPython.display import Image, display

        start = time.perf_counter()
        fig, line = self.compute(**values)
        display(Image(data=png(fig), format="png"))
        self.last_redraw_s = time.perf_counter() - start
        self.numbers.value = f"<span>{line}</span>"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
