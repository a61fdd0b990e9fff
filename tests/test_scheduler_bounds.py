"""The run's own output stays bounded under a flood of connections, and no dashboard starts (issue 33, case 11
and "also noticed")."""

from __future__ import annotations

import logging
import socket
import time
from urllib.parse import urlsplit

import pytest

from litrepro import scheduler


def test_the_rate_limit_passes_a_burst_per_template_then_counts():
    limit = scheduler.RateLimit(burst=3)
    rec = lambda msg: logging.LogRecord("distributed.comm.tcp", logging.WARNING, __file__, 1, msg, ("x",), None)  # noqa: E731
    passed = [limit.filter(rec("Listener on %r: TLS handshake failed")) for _ in range(300)]
    assert sum(passed) == 3 and limit.filter(rec("another %r")) is True
    lines = limit.suppressed()
    assert len(lines) == 1 and "297 more" in lines[0] and "TLS handshake failed" in lines[0]


def test_a_flood_of_bare_connections_leaves_a_bounded_stderr_and_no_dashboard(tmp_path, capfd):
    pytest.importorskip("dask.distributed")
    client, cluster = scheduler.connect("dask", workers=1, local_directory=tmp_path / "dask")
    submit, close = scheduler.dask_submitter(client, cluster, 1)
    try:
        http_ports = {s.getsockname()[1] for s in cluster.scheduler.http_server._sockets.values()}
        assert 8787 not in http_ports                                        # a random port, not Dask's default
        assert not cluster.scheduler.http_application.applications or all(
            "dashboard" not in type(app).__module__ for app in cluster.scheduler.http_application.applications)
        parts = urlsplit(cluster.scheduler_address)
        for _ in range(300):
            with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
                sock.sendall(b"GET / HTTP/1.0\r\n\r\n")                       # not TLS: the handshake fails
        deadline = time.time() + 30
        while time.time() < deadline:                                          # the scheduler logs asynchronously
            time.sleep(0.5)
            if scheduler._rate_limit and sum(scheduler._rate_limit.seen.values()) >= 300:
                break
        handshakes = sum(n for t, n in scheduler._rate_limit.seen.items() if "TLS handshake failed" in t)
        assert handshakes >= 100                                               # the flood did reach the logger
    finally:
        close()
    err = capfd.readouterr().err
    assert err.count("TLS handshake failed") <= scheduler.WARNING_BURST + 1, err[-3000:]
    assert "were suppressed" in err
    assert len(err) < 20_000
