"""``make explore``: the explorers under Voilà on 127.0.0.1, behind a token, with no request to another host.

Access control: Voilà serves pages and starts kernels, which run code as the
user who serves them, for anyone who can reach its port, and any local user
can reach a port on 127.0.0.1.  So the server requires a token: a fresh random
one (``secrets.token_urlsafe(32)``) per start, handed to Voilà through the
``JUPYTER_TOKEN`` environment variable (readable only by this user, unlike a
command line, which every local user can read in ``/proc``) and printed here,
in the addresses, for the user to open.  A request without it is refused.

No other host: Voilà's own templates link Font Awesome from cdn.jsdelivr.net.
The explorers use no icon font, so the server uses litrepro's template
(``jupyter/voila/templates/litrepro``), Voilà's ``lab`` template without those
links; a page then loads offline as fast as online.  ``tests/test_browser.py``
records every request a page makes and fails on one to another host.

Usage: ``python -m litrepro.explore.serve [--port 8866] [--root notebooks/]``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

from litrepro.paths import NOTEBOOKS

#: A JUPYTER_PATH entry holding ``voila/templates/litrepro``.
JUPYTER_DATA = Path(__file__).resolve().parent / "jupyter"
TEMPLATE = "litrepro"
EXPLORERS = {"pinterest_rlbp": "explore_pinterest_rlbp.ipynb", "waypoint_opd": "explore_waypoint_opd.ipynb"}


def new_token() -> str:
    return secrets.token_urlsafe(32)


def voila_command(root: Path, port: int, *extra: str) -> list[str]:
    """Voilà on ``root`` at 127.0.0.1:``port`` with litrepro's template; the token comes from the environment."""
    voila = Path(sys.executable).with_name("voila")
    return [str(voila), str(root), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
            f"--VoilaConfiguration.template={TEMPLATE}", "--Voila.auto_token=True", *extra]


def voila_environment(token: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) with the token and litrepro's template folder on JUPYTER_PATH."""
    out = dict(os.environ if env is None else env)
    out["JUPYTER_TOKEN"] = token
    out.pop("JUPYTER_TOKEN_FILE", None)
    out["JUPYTER_PATH"] = os.pathsep.join([str(JUPYTER_DATA), *filter(None, [out.get("JUPYTER_PATH", "")])])
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
    cmd = voila_command(args.root, args.port, "--show_tracebacks=True")
    os.execve(cmd[0], cmd, voila_environment(token))
    return 0  # pragma: no cover - execve does not return


if __name__ == "__main__":
    raise SystemExit(main())
