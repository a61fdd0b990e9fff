"""``pinterest_rlbp``: RL that picks PID controller gains in an auto-bidding system.

Public entry points: :func:`pid_terms`, :func:`ordinary_ips` and the
notebook-section functions of :mod:`litrepro.rlbp.experiment`.
"""

from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.ope import ordinary_ips, snips
from litrepro.rlbp.pid import action_grid, pid_terms

__all__ = ["RLBPConfig", "action_grid", "ordinary_ips", "pid_terms", "snips"]
