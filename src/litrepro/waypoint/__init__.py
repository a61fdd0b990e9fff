"""``waypoint_opd``: on-policy distillation of a student from a teacher's RL waypoints."""

from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.model import BytePolicy
from litrepro.waypoint.opd import ZeroGateError, opd_loss, straightness_gate

__all__ = ["BytePolicy", "WaypointConfig", "ZeroGateError", "opd_loss", "straightness_gate"]
