"""The studies: their declarations (:mod:`litrepro.studies.rlbp`, :mod:`litrepro.studies.waypoint`) and the
modules that sit beside the methods (``rlbp_budget``, ``rlbp_d3rlpy``).

:func:`registry` collects every declaration; ``python -m litrepro study NAME`` runs one
(:mod:`litrepro.studyrunner`).  Adding a study is one :class:`~litrepro.studyrunner.Study` in the method's
declaration module plus the module that holds its mechanics (``docs/running.md``, "Adding a study").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:                                  # pragma: no cover
    from litrepro.studyrunner import Study

#: The declaration modules, each with a ``STUDIES`` tuple.
DECLARATIONS = ("litrepro.studies.rlbp", "litrepro.studies.waypoint")


def registry() -> dict[str, "Study"]:
    """``{name: Study}`` over :data:`DECLARATIONS`; a name declared twice is an error."""
    out: dict[str, Study] = {}
    for module in DECLARATIONS:
        for study in importlib.import_module(module).STUDIES:
            if study.name in out:
                raise ValueError(f"study {study.name!r} is declared twice")
            out[study.name] = study
    return out


def declaration_hashes(name: str) -> dict[str, str]:
    """The hashes of study ``name``'s declaration: its jobs (and stage contexts), and its summary, apart.

    They stand in a study's ``source_hashes`` for the code that used to live in its script under
    ``studies/``; wording, figures and claims blocks in the declaration module are not hashed."""
    from litrepro.studyrunner import code_hash

    study = registry()[name]
    helpers = tuple(study.hashed_helpers)
    jobs = ([s.job for s in study.stages] + [s.context for s in study.stages if s.context]
            + [s.seeds for s in study.stages if s.seeds])            # which seeds a stage runs is computing code too
    out = {f"study {name} declaration: summary": code_hash(study.summarise, *helpers)}
    if jobs:
        out[f"study {name} declaration: jobs"] = code_hash(*jobs, *helpers)
    return out
