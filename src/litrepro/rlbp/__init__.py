"""``pinterest_rlbp``: RL that picks PID controller gains in an auto-bidding system.

Public entry points: :func:`pid_terms`, :func:`ordinary_ips` and the
notebook-section functions of :mod:`litrepro.rlbp.experiment`.  They are
imported on first use, so reading the config (the batch runner does) does not
import torch.
"""

import importlib

_PUBLIC = {"RLBPConfig": "config", "action_grid": "pid", "pid_terms": "pid", "ordinary_ips": "ope", "snips": "ope"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"litrepro.rlbp.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module 'litrepro.rlbp' has no attribute {name!r}")
