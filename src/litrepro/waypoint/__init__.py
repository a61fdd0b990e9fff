"""``waypoint_opd``: on-policy distillation of a student from a teacher's RL waypoints.

Public names are imported on first use, so reading the config does not import torch.
"""

import importlib

_PUBLIC = {"WaypointConfig": "config", "BytePolicy": "model", "ZeroGateError": "opd", "opd_loss": "opd",
           "straightness_gate": "opd"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"litrepro.waypoint.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module 'litrepro.waypoint' has no attribute {name!r}")
