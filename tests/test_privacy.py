"""Kernel traffic is private: IPC sockets in a 0700 folder, no abstract sockets, no TCP listener, whatever --out is."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from users import as_nobody

from litrepro.kernels import KernelSlot


def _socket_inodes(pid: int) -> set[str]:
    """Inodes of every socket the process ``pid`` holds open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def _table(name: str) -> list[list[str]]:
    try:
        with open(f"/proc/net/{name}") as handle:
            return [line.split() for line in handle.read().splitlines()[1:]]
    except OSError:
        return []


def _kernel_sockets(pid: int) -> tuple[list[str], list[str]]:
    """(TCP sockets of ``pid`` as local addresses, its named Unix socket paths)."""
    inodes = _socket_inodes(pid)
    tcp = [row[1] for name in ("tcp", "tcp6") for row in _table(name) if len(row) > 9 and row[9] in inodes]
    unix = [row[7] for row in _table("unix") if len(row) > 7 and row[6] in inodes]
    return tcp, unix


def _ready_client(km):
    from jupyter_client.blocking import BlockingKernelClient

    kc = BlockingKernelClient()
    kc.load_connection_info(km.get_connection_info())
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return kc


@pytest.fixture
def long_scratch(tmp_path):
    """A scratch folder whose path is far past the 107-byte socket limit, with non-ASCII names."""
    deep = tmp_path / ("ü" * 40) / ("é" * 40) / "scratch"
    deep.mkdir(parents=True)
    return deep


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net (Linux only)")
@pytest.mark.parametrize("reuse", [1, 2])
def test_kernel_has_no_tcp_socket_and_no_abstract_socket(long_scratch, reuse):
    slot = KernelSlot(reuse=reuse, scratch=long_scratch, preload=False, timeout=120)
    km = slot.acquire(long_scratch / "result.json")
    try:
        kc = _ready_client(km)
        # a child process's output travels through ipykernel's subprocess pipe: it still arrives
        kc.execute("import subprocess, sys; subprocess.run([sys.executable, '-c', 'print(1)']); "
                   "import os\nif os.fork() == 0:\n    print('from child', flush=True); os._exit(0)\nelse:\n    os.wait()")
        texts = []
        while True:
            msg = kc.get_iopub_msg(timeout=60)
            if msg["msg_type"] == "stream":
                texts.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        kc.stop_channels()
        tcp, unix = _kernel_sockets(slot.pid)
        assert tcp == [], f"the kernel holds TCP sockets: {tcp}"
        named = [p for p in unix if p]
        assert named and not [p for p in named if p.startswith("@")], named       # bound, none abstract
        folders = {Path(p).parent for p in named}
        assert len(folders) == 1
        folder = folders.pop()
        assert os.stat(folder).st_mode & 0o777 == 0o700 and len(os.fsencode(str(folder))) < 100
        assert "from child" in "".join(texts)                                        # pipe on IPC works
    finally:
        slot.kill()
    assert not folder.exists()




@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sockets")
def test_another_user_cannot_connect_to_the_kernel(long_scratch):
    probe = as_nobody("print('ok')", timeout=60)
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot drop to user nobody here (needs root and setpriv)")
    slot = KernelSlot(reuse=1, scratch=long_scratch, preload=False, timeout=120)
    _ready_client(slot.acquire(long_scratch / "result.json")).stop_channels()
    try:
        _, unix = _kernel_sockets(slot.pid)
        paths = [p for p in unix if p and not p.startswith("@")]
        assert paths
        code = ("import socket, sys\nok = 0\nfor p in sys.argv[1:]:\n    s = socket.socket(socket.AF_UNIX)\n"
                "    try:\n        s.connect(p); ok += 1\n    except OSError as e:\n        print(e.errno)\n"
                "print('connected', ok)")
        proc = as_nobody(code.replace("sys.argv[1:]", repr(paths)), timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "connected 0" in proc.stdout, proc.stdout
        # control: the owner connects to the same paths
        own = socket.socket(socket.AF_UNIX)
        own.connect(paths[0])
        own.close()
    finally:
        slot.kill()
