"""The registry of methods: name -> config class, notebook, parameter file, plots."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from litrepro.errors import UnknownMethod
from litrepro.paths import NOTEBOOKS, PARAMETERS


@dataclass(frozen=True)
class Method:
    name: str
    config: str        # "module:Class"
    plots: str         # "module:function" building the summary PNGs

    @property
    def notebook(self) -> Path:
        return NOTEBOOKS / f"{self.name}.ipynb"

    @property
    def parameters(self) -> Path:
        return PARAMETERS / f"{self.name}.yaml"

    def config_class(self) -> type:
        module, cls = self.config.split(":")
        return getattr(importlib.import_module(module), cls)

    def summary_extras(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        """Method-specific keys merged into ``summary.json`` (e.g. a calibration table).

        By convention a method package may define ``summary_extras.extras(results)``
        (``litrepro.<package>.summary_extras``); without that module there are none.
        """
        module = self.config.split(":")[0].rsplit(".", 1)[0] + ".summary_extras"
        if importlib.util.find_spec(module) is None:
            return {}
        return importlib.import_module(module).extras(results)

    def plot_function(self):
        module, fn = self.plots.split(":")
        return getattr(importlib.import_module(module), fn)


METHODS = {
    "pinterest_rlbp": Method("pinterest_rlbp", "litrepro.rlbp.config:RLBPConfig", "litrepro.rlbp.plots:summary_plots"),
    "waypoint_opd": Method("waypoint_opd", "litrepro.waypoint.config:WaypointConfig",
                           "litrepro.waypoint.plots:summary_plots"),
}


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        shown = ascii(name) if len(name) <= 60 else f"{ascii(name)[:60]}..."
        raise UnknownMethod(f"unknown method {shown} (known: {', '.join(METHODS)})") from None


def notebook_defaults(path: Path) -> dict[str, Any]:
    """The literal assignments of the notebook's cell tagged ``parameters``."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{path}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    values = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            values[target.id] = ast.literal_eval(node.value)
    return values
