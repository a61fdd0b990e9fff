"""``make waypoint-opd-calibration``: the OPD step's gradient norm and parameter change against the record.

    python studies/waypoint_opd_calibration.py [--seeds 42-57]

Runs ``litrepro.waypoint.opd_calibration`` (the notebook's Sections 2-4 under each explaining
arm) and writes ``rendered/waypoint_opd/opd_calibration.json``; when a z-score does not
recompute by a plain loop it writes nothing and exits 1.  About a second per seed and arm.
"""

from __future__ import annotations

import argparse
import sys
import time

from litrepro import atomic, recorded
from litrepro.seeding import seed_everything
from litrepro.waypoint import opd_calibration as oc
from litrepro.waypoint.config import WaypointConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-57", help="first-last, inclusive")
    args = parser.parse_args(argv)
    first, last = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(first, last + 1))
    import torch

    from litrepro.waypoint import experiment as wp

    seed_everything(first)                                     # deterministic algorithms, one thread
    corpus = wp.load_corpus(WaypointConfig())
    seed_file = recorded.load("waypoint_opd")
    if seed_file is None:
        print("the seed file is not found ($LITREPRO_SEEDS_DIR); nothing written", file=sys.stderr)
        return 1
    start = time.perf_counter()
    rows = [oc.run_seed(s, arm, corpus=corpus, device=torch.device("cpu")) for arm in oc.ARMS for s in seeds]
    summary = oc.summarise(rows, seed_file)
    try:
        oc.check_summary(rows, summary, seed_file)
    except ValueError as err:
        print(f"{err}; nothing written", file=sys.stderr)
        return 1
    data = {"seeds": seeds, "wall_seconds": round(time.perf_counter() - start, 1), "source_sha256": oc.source_hashes(),
            "per_seed": rows, "arms": summary}
    atomic.write_text(oc.PATH, atomic.dumps_json(data))
    for line in oc.findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {oc.PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
