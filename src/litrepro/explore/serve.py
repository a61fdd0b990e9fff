"""``make explore``: the explorers under Voilà on 127.0.0.1, behind a token, with no request to another host.

Access control: Voilà serves pages and starts kernels, which run code as the
user who serves them, for anyone who can reach its port, and any local user
can reach a port on 127.0.0.1.  So the server requires a token: a fresh random
one (``secrets.token_urlsafe(32)``) per start, handed to Voilà through the
``JUPYTER_TOKEN`` environment variable (readable only by this user, unlike a
command line, which every local user can read in ``/proc``) and printed here,
in the addresses, for the user to open.  A request without it is refused.

Kernels on private sockets (issue 33): by default Jupyter kernels listen on TCP ports of 127.0.0.1,
which every local user can connect to (IOPub, the executed code and its outputs, needs no key to
subscribe).  The server's kernels use IPC transport instead, with their Unix sockets in a private
(0700) folder made for this start (:func:`private_kernel_dir`), exactly as the runner's kernels do
(:mod:`litrepro.kernels`): a kernelspec written there starts each kernel with litrepro's launcher,
whose subprocess-output pipe is also a socket in that folder instead of ipykernel's TCP port.  The
folder is removed when the server stops.

No other host: Voilà's own templates link Font Awesome from cdn.jsdelivr.net.
The explorers use no icon font, so the server uses litrepro's template
(``jupyter/voila/templates/litrepro``), Voilà's ``lab`` template without those
links; a page then loads with no network.  ``tests/test_browser.py``
records every request a page makes and fails on one to another host.

Usage: ``python -m litrepro.explore.serve [--port 8866] [--root notebooks/]``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from litrepro.paths import NOTEBOOKS

#: A JUPYTER_PATH entry holding ``voila/templates/litrepro``.
JUPYTER_DATA = Path(__file__).resolve().parent / "jupyter"
TEMPLATE = "litrepro"
EXPLORERS = {"pinterest_rlbp": "explore_pinterest_rlbp.ipynb", "waypoint_opd": "explore_waypoint_opd.ipynb"}


def new_token() -> str:
    return secrets.token_urlsafe(32)


def private_kernel_dir() -> Path:
    """A new private (0700) folder for this server's kernel sockets and kernelspec, short enough for
    socket paths (107 bytes), with ``jupyter/kernels/python3/kernel.json`` that starts litrepro's launcher."""
    from litrepro.kernels import PIPE_ENV

    base = next((b for b in (os.environ.get("XDG_RUNTIME_DIR", ""), tempfile.gettempdir(), "/tmp")
                 if b and os.path.isabs(b) and len(b) < 60 and os.path.isdir(b)), None)
    folder = Path(tempfile.mkdtemp(prefix="litrepro-explore-", dir=base))
    spec = folder / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", "from litrepro.kernels import launch; launch()", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python", "env": {PIPE_ENV: f"auto:{folder}"},
        "metadata": {"debugger": False}}))
    return folder


def voila_command(root: Path, port: int, *extra: str, kernels: Path | None = None) -> list[str]:
    """Voilà on ``root`` at 127.0.0.1:``port`` with litrepro's template; the token comes from the environment.

    ``kernels`` (a :func:`private_kernel_dir`): the kernels' sockets and connection files go there (IPC, no
    TCP port).  ``static_path`` is jupyter_server's static folder: its ``/logout`` page needs one, and Voilà
    sets none (``/logout`` answered 500)."""
    import jupyter_server

    voila = Path(sys.executable).with_name("voila")
    ipc = (["--KernelManager.transport=ipc", f"--KernelManager.ip={kernels / 'k'}",
            f"--Voila.connection_dir_root={kernels}"] if kernels is not None else [])
    static = Path(jupyter_server.__file__).resolve().parent / "static"
    return [str(voila), str(root), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
            f"--VoilaConfiguration.template={TEMPLATE}", "--Voila.auto_token=True",
            f"--Voila.tornado_settings=static_path={static}", *ipc, *extra]


def voila_environment(token: str, env: dict[str, str] | None = None, kernels: Path | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) with the token and litrepro's template folder on JUPYTER_PATH
    (and, with ``kernels``, its kernelspec folder first)."""
    out = dict(os.environ if env is None else env)
    out["JUPYTER_TOKEN"] = token
    out.pop("JUPYTER_TOKEN_FILE", None)
    first = [str(kernels / "jupyter")] if kernels is not None else []
    out["JUPYTER_PATH"] = os.pathsep.join([*first, str(JUPYTER_DATA), *filter(None, [out.get("JUPYTER_PATH", "")])])
    return out


def addresses(port: int, token: str) -> dict[str, str]:
    """The explorers' addresses, token included."""
    return {name: f"http://127.0.0.1:{port}/voila/render/{notebook}?token={token}" for name, notebook in EXPLORERS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m litrepro.explore.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8866)
    parser.add_argument("--root", type=Path, default=NOTEBOOKS, help="folder of the explorer notebooks")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        print(f"litrepro: error: --port {args.port}: expected 1..65535", file=sys.stderr)
        return 2
    token = new_token()
    print("litrepro explorers (Ctrl-C stops the server; the token in each address is the access key):")
    for name, url in addresses(args.port, token).items():
        print(f"  {name}: {url}")
    sys.stdout.flush()
    kernels = private_kernel_dir()
    cmd = voila_command(args.root, args.port, "--show_tracebacks=True", kernels=kernels)
    try:
        proc = subprocess.Popen(cmd, env=voila_environment(token, kernels=kernels))
        try:
            return proc.wait()
        except KeyboardInterrupt:                # Voila got the same SIGINT; give it time to stop its kernels
            try:
                return proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                return proc.wait()
    finally:
        shutil.rmtree(kernels, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
