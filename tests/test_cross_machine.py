"""What a notebook prints holds on another machine: render under one torch kernel set, check under another.

nbval compares stored outputs as text.  Another CPU runs other SIMD kernels, whose
float results differ in the last bits; the notebooks print at a precision (and zero
contracts as bounds) that such noise cannot flip.  The closest this machine comes to
a second machine is forcing torch's CPU kernel set with ``ATEN_CPU_CAPABILITY`` and
changing the thread count, so: execute with ``default`` kernels and 1 thread, then let
nbval re-execute and compare with ``avx2`` (or ``avx512``) kernels and 2 threads.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CORPUS, TINY
from litrepro.paths import NOTEBOOKS, ROOT


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return handle.read()
    except OSError:
        return ""


OTHER = "avx512" if "avx512f" in _cpu_flags() else "avx2"


def _overrides(method: str) -> dict:
    import yaml

    return {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in TINY[method])}


@pytest.mark.parametrize("method", ["pinterest_rlbp", "waypoint_opd"])
def test_rendered_under_one_kernel_set_passes_nbval_under_another(method, tmp_path):
    if method == "waypoint_opd" and not (CORPUS and os.path.isfile(CORPUS)):
        pytest.skip("LITREPRO_CORPUS does not point at the Hamlet corpus")
    executed = tmp_path / f"{method}.ipynb"
    render_env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}
    code = ("import papermill as pm, sys, json; "
            "pm.execute_notebook(sys.argv[1], sys.argv[2], parameters=json.loads(sys.argv[3]), "
            "kernel_name='python3', progress_bar=False, cwd=sys.argv[4])")
    import json

    proc = subprocess.run([sys.executable, "-c", code, str(NOTEBOOKS / f"{method}.ipynb"), str(executed),
                           json.dumps({"seed": 5, **_overrides(method)}), str(NOTEBOOKS)],
                          env=render_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_env = {**os.environ, "ATEN_CPU_CAPABILITY": OTHER, "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-current-env", "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
                           str(executed)], env=check_env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
