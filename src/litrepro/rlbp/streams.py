"""Named random streams of ``pinterest_rlbp``: every stage draws from its own generator.

One rule derives every stream from the run's seed and the stream's name:

    stream_seed(seed, name) = int(sha256("pinterest_rlbp/<seed>/<name>")[:16 hex digits], 16) mod 2^63

(the first 8 bytes of the digest, big-endian, with the top bit cleared), and the stream
is ``torch.Generator().manual_seed(stream_seed(seed, name))``.  A stage asks
:class:`Streams` for a stream by name and gets a *fresh* generator at the stream's
start, so:

* a stage that drew once more changes only its own numbers, never another stage's;
* arms that must share draws take the same stream and get the same draws by
  construction (the permuted-reward control critic takes ``critic_minibatches`` like
  the critic; the value-only control actor and every lambda of the sweep take
  ``actor_init`` and ``actor_minibatches`` like the served actor; the sweep's policies
  are simulated on ``truth/learned`` like the served one; every critic backup takes
  the same streams), and the audit checks that they did.

The streams and who draws from them (:data:`STREAMS`; ``litrepro.rlbp.audit`` replays
each from its derivation):
"""

from __future__ import annotations

import hashlib

import torch

#: name -> the stage that draws from it (and what it draws).
STREAMS = {
    "world": "build_world: the campaigns (kinds, price scales, CTR logits, phases, budgets, margins, base bids)",
    "pid_demo": "pid_demo: the auctions of the demonstration day",
    "logged_days": "collect_logged_data: the auctions of the logged days",
    "behaviour": "collect_logged_data: the behaviour policy's actions (epsilon-greedy draws)",
    "eval_days": "draw_eval_days: the auctions of the evaluation days",
    "control_permutation": "fit_critic: the permutation of the control critic's rewards",
    "critic_init": "fit_critic: the critic's initial weights (the control starts from a copy)",
    "critic_minibatches": "fit_critic: minibatch rows of the critic and of its control (shared)",
    "actor_init": "fit_actor: the actor's initial weights (served, value-only control, every lambda)",
    "actor_minibatches": "fit_actor: minibatch rows of the actor (served, value-only control, every lambda)",
    "truth/learned": "evaluate_policies, lambda_sweep: the learned policy's sampled actions on the evaluation days",
    "truth/behaviour": "evaluate_policies: the behaviour policy's actions on the evaluation days",
    "truth/fixed_gain": "evaluate_policies: the fixed-gain policy (draws nothing)",
    "headroom": "headroom: the constant actions (draw nothing)",
}
__doc__ += "".join(f"\n* ``{k}``: {v}" for k, v in STREAMS.items()) + "\n"

#: How many integers of each stream the run records as its first draws.
FIRST_DRAWS = 3


def stream_seed(seed: int, name: str) -> int:
    """The rule of the module docstring: a 63-bit seed from sha256 of ``pinterest_rlbp/<seed>/<name>``."""
    digest = hashlib.sha256(f"pinterest_rlbp/{int(seed)}/{name}".encode()).hexdigest()
    return int(digest[:16], 16) % 2**63


def first_draws(generator: torch.Generator, n: int = FIRST_DRAWS) -> list[int]:
    """The first ``n`` integers in [0, 2^31) a fresh stream yields (integers: the same on every CPU)."""
    return torch.randint(2**31, (n,), generator=generator).tolist()


class Streams:
    """The run's named streams; :meth:`generator` hands out a fresh generator per request.

    ``derivations`` records, per name requested, the derived seed and the stream's first
    draws (:func:`first_draws` of a separate fresh generator, so recording draws nothing
    from the stage's own); the run reports it as ``random_streams``.
    """

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.derivations: dict[str, dict] = {}

    def generator(self, name: str) -> torch.Generator:
        if name not in STREAMS:
            raise KeyError(f"unknown random stream {name!r} (known: {', '.join(STREAMS)})")
        seed = stream_seed(self.seed, name)
        if name not in self.derivations:
            self.derivations[name] = {"seed": seed,
                                      "first_draws": first_draws(torch.Generator().manual_seed(seed))}
        return torch.Generator().manual_seed(seed)

    def initial_seed(self) -> int:
        return self.seed


def as_streams(generator) -> Streams:
    """A stage's ``generator`` argument as :class:`Streams`.

    A :class:`Streams` is used as is.  A ``torch.Generator`` (older callers, tests) stands
    for the streams of its *initial seed* (``generator.initial_seed()``, the seed it was
    last seeded with); its current state is not used, so a stage's draws never depend
    on what another stage drew before it.
    """
    if isinstance(generator, Streams):
        return generator
    if isinstance(generator, torch.Generator):
        return Streams(generator.initial_seed())
    raise TypeError(f"expected litrepro.rlbp.streams.Streams or torch.Generator, got {type(generator).__name__}")
