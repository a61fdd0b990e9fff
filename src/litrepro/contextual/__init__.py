"""``contextual``: a second market for ``pinterest_rlbp`` where the best PID gain depends on the state
(our reconstruction), its oracles, sequential off-policy estimators, a ``gymnasium`` environment and
the study that runs the learned bidder there.  The seed runs never use it.

Modules: :mod:`~litrepro.contextual.market` (the market), :mod:`~litrepro.contextual.oracle` (what a
gain policy could win, and the state-dependence decomposition), :mod:`~litrepro.contextual.ope`
(estimators of a sequential policy's value), :mod:`~litrepro.contextual.env` (``gymnasium.Env``) and
:mod:`~litrepro.contextual.study` (the per-seed job and its summary).
"""
