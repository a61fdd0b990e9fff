"""Re-draw the committed figures from the committed JSON, without re-running a study or a seed.

    python -m litrepro.replot [--only NAME ...] [--out FOLDER]      (make replot)

After a merge changes a figure's code (or a study's JSON arrives from another branch), this
brings every PNG in ``rendered/`` in line with the JSON beside it, in a few seconds:

* every declared study with figures (:attr:`litrepro.studyrunner.Study.figures`, from its committed
  outputs), one group per study, named as ``python -m litrepro study`` names it;
* the runner's cross-seed figures of each method (``pinterest_rlbp``: ``td_loss_*.png`` and
  ``ips_vs_truth.png``; ``waypoint_opd``: ``teacher_rl_reward.png`` and ``opd_comparison_*.png``),
  from ``seed-*.json``.

A figure whose JSON is absent is skipped with one line saying so; a JSON that is malformed, too large,
nested too deep (:mod:`litrepro.jsonbounds`) or lacks a field the figure reads, and a bad argument,
is one line and exit status 2.  ``--out`` writes the PNGs
to another folder (same sub-folders) instead of ``rendered/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure

from litrepro import jsonbounds, methods, plotting, study_args
from litrepro.errors import UsageError
from litrepro.paths import RENDERED


def _json(path: Path) -> dict | None:
    """The JSON at ``path`` (bounded; one line naming it when bad), or None when there is no file."""
    return jsonbounds.read(path) if path.exists() or path.is_symlink() else None


def _seed_results(method: str) -> list[dict]:
    from litrepro.summary import load_seed_results

    return load_seed_results(RENDERED, method)


def figures() -> dict[str, Callable[[], dict[str, Figure] | None]]:
    """``{group: builder}``; a builder returns ``{relative png path: figure}``, or None when its JSON is absent."""
    from litrepro.studyrunner import registry

    def study_figures(study):
        def build():
            outputs = {rel: _json(RENDERED / rel) for rel in study.outputs}
            if any(v is None for v in outputs.values()):
                return None
            return study.figures(outputs)
        return build

    def runner(method: str):
        def build():
            results = _seed_results(method)
            if not results:
                return None
            return {f"{method}/{name}": fig for name, fig in methods.get(method).plot_function()(results).items()}
        return build

    groups = {name: study_figures(s) for name, s in sorted(registry().items()) if s.committed and s.has_figures()}
    return {**groups, "pinterest_rlbp": runner("pinterest_rlbp"), "waypoint_opd": runner("waypoint_opd")}


def main(argv: list[str] | None = None) -> int:
    builders = figures()
    parser = study_args.OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(builders), help="re-draw only these groups")
    parser.add_argument("--out", type=Path, default=RENDERED, help="folder to write into (default: rendered/)")
    args = parser.parse_args(argv)
    drawn: dict[str, bytes] = {}
    for group in args.only or builders:
        try:
            figs = builders[group]()
        except UsageError as err:
            print(f"replot: error: {group}: {err}", file=sys.stderr)
            return 2
        except (KeyError, IndexError, TypeError, ValueError) as err:
            print(f"replot: error: {group}: its JSON lacks or mangles a field the figure reads "
                  f"({type(err).__name__}: {' '.join(str(err).split())[:100]})", file=sys.stderr)
            return 2
        if figs is None:
            print(f"{group}: its JSON is not in {RENDERED}; skipped", file=sys.stderr)
            continue
        for rel, fig in figs.items():
            drawn[rel] = plotting.png_bytes(fig)
            print(f"{group}: {rel}")
    try:
        write(drawn, args.out)
    except UsageError as err:
        print(f"replot: error: {err}", file=sys.stderr)
        return 2
    return 0


def write(pngs: dict[str, bytes], out: Path) -> None:
    """Every figure, atomically, through the output folder's rules (:class:`litrepro.outdir.OutDir`): the runner's
    own record then lists them, so a later study run or ``litrepro run`` may replace them, and a file that is
    neither litrepro's nor git's committed copy is refused, not overwritten."""
    from litrepro import outdir
    from litrepro.paths import ROOT

    out = outdir.absolute(out)
    outdir.check_path(out)
    outdir.inspect(out)
    with outdir.lock(out):
        folder = outdir.OutDir(out)
        folder.remove_partials()
        if out.resolve() == RENDERED.resolve():
            folder.adopt_git_tracked(ROOT)
        folder.check_replaceable(list(pngs))
        for rel, data in pngs.items():
            folder.write(rel, data)
        folder.compact()


if __name__ == "__main__":
    sys.exit(main())
