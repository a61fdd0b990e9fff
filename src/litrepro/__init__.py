"""litrepro: literate, seeded reproductions of two ML methods.

Subpackages hold one method each (``rlbp``: RL-tuned PID bidding,
``waypoint``: on-policy distillation from waypoints).  The top-level modules
are the shared pipeline: parameter validation (``params``), seeding and
devices (``seeding``), the no-network guard (``guard``), results and
provenance (``report``, ``provenance``), the seed files' recorded figures
(``recorded``), plotting helpers (``plotting``), the batch runner
(``runner``, ``cli``) and cross-seed summaries (``summary``).
"""

__version__ = "0.1.0"
