"""Interactive explorers of the two methods, built on ipywidgets.

Scope: each explorer lays out its controls, one picture and one line of numbers,
left to right, and redraws the picture in place (``ipywidgets.interactive_output``)
when a control moves.  The numbers come from the same ``litrepro`` functions the
method notebooks call; the explorers only choose what to cache and what to draw.

Responsiveness: the expensive stages are cached per seed with ``functools.lru_cache``
on frozen keys (:mod:`litrepro.explore.rlbp`: the world, the logged data, the critic
and the actors of every lambda on the slider; :mod:`litrepro.explore.waypoint`: the
pretrained teacher, its RL and the arms' curves).  Moving a cheap control (lambda,
top-k, campaign kind; the gate kind, the OPD steps shown) reuses them.
``benchmarks/explore.py`` measures both kinds of redraw.
"""

from __future__ import annotations


def rlbp_explorer(**kwargs):
    from litrepro.explore.rlbp import Explorer

    return Explorer(**kwargs)


def waypoint_explorer(**kwargs):
    from litrepro.explore.waypoint import Explorer

    return Explorer(**kwargs)
