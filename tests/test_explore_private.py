"""The explorer server's kernels listen on no TCP port, and another local user receives nothing from them
(issue 33, case 3: ``nobody`` subscribed to a Voilà kernel's IOPub on 127.0.0.1 and read 49 messages)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from litrepro.explore import serve
from users import as_nobody

pytest.importorskip("voila")

NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
                       "source": "import os\nprint('secret', 6 * 7)"}],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry))
                frontier.append(int(entry))
    return found


def _listening_tcp_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":                                   # LISTEN
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(target[8:-1])
    except OSError:
        pass
    return out


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_explorer_kernels_listen_on_no_tcp_port_and_another_user_gets_nothing(tmp_path):
    root = tmp_path / "notebooks"
    root.mkdir()
    (root / "tiny.ipynb").write_text(json.dumps(NOTEBOOK))
    port, token = _free_port(), serve.new_token()
    kernels = serve.private_kernel_dir()
    env = serve.voila_environment(token, {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
                                          "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}, kernels=kernels)
    cmd = serve.voila_command(root, port, kernels=kernels)
    log = open(tmp_path / "voila.log", "wb")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/voila/render/tiny.ipynb?token={token}"
        deadline, page = time.time() + 120, ""
        while time.time() < deadline:
            try:
                page = urllib.request.urlopen(url, timeout=60).read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert "secret 42" in page, (tmp_path / "voila.log").read_text()[-3000:]
        kids = _children(proc.pid)
        assert kids, "no kernel process"
        listening = _listening_tcp_inodes()
        for pid in kids:
            assert not (_socket_inodes(pid) & listening), f"kernel {pid} listens on a TCP port"
        assert (os.stat(kernels).st_mode & 0o077) == 0
        sockets = [str(p) for p in kernels.iterdir() if p.is_socket()]
        assert sockets, list(kernels.iterdir())                                   # the kernel's IPC sockets
        probe = as_nobody(
            "import socket, sys\n"
            "for path in sys.argv[1:]:\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n"
            "        s.connect(path); print('CONNECTED', path)\n"
            "    except OSError as err:\n"
            "        print('REFUSED', type(err).__name__)\n", *sockets)
        if probe is None:
            pytest.skip("cannot run Python as user nobody here (needs root and setpriv)")
        assert "CONNECTED" not in probe.stdout and probe.stdout.count("REFUSED") == len(sockets), probe
        connection_files = [p for p in kernels.rglob("*.json") if "kernel" in p.name]
        assert connection_files, list(kernels.rglob("*"))                  # the keys live in the private folder
        # also noticed: /logout answered 500 (jupyter_server's page needs a static_path Voila does not set)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/logout?token={token}", timeout=30).status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        shutil.rmtree(kernels, ignore_errors=True)


def test_the_private_kernelspec_starts_litrepros_launcher_with_its_pipe_in_the_folder():
    kernels = serve.private_kernel_dir()
    try:
        spec = json.loads((kernels / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
        assert "from litrepro.kernels import launch; launch()" in spec["argv"]
        assert spec["env"]["LITREPRO_IOPUB_PIPE"] == f"auto:{kernels}"
        assert (os.stat(kernels).st_mode & 0o777) == 0o700
        cmd = serve.voila_command(Path("notebooks"), 8866, kernels=kernels)
        assert "--KernelManager.transport=ipc" in cmd and f"--KernelManager.ip={kernels / 'k'}" in cmd
        env = serve.voila_environment("t", {}, kernels=kernels)
        assert env["JUPYTER_PATH"].split(os.pathsep)[:2] == [str(kernels / "jupyter"), str(serve.JUPYTER_DATA)]
    finally:
        shutil.rmtree(kernels, ignore_errors=True)
