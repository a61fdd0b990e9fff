"""Running code as another local user (``nobody``), for the tests that attack a run as that user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def as_nobody(code: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess | None:
    """``code`` run by an isolated Python (``-I``) as user nobody, with ``args`` as its ``sys.argv[1:]``;
    None when this process cannot switch users (not root, no ``setpriv`` or no user nobody)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return subprocess.run([setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                           sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, timeout=timeout)
