"""Count, and refuse, network use and pretrained-model loads.

The seed files claim ``pretrained_model_calls == 0`` and
``no_live_bidder_or_model_calls``/``no_pretrained_checkpoint_downloaded``.  We
measure these claims rather than assert them.  Inside :class:`OfflineGuard`,
each of these is intercepted, counted and refused:

- network: ``socket.connect``/``connect_ex`` (TCP and any connected socket),
  ``sendto``/``sendmsg`` (UDP without a connect) and name lookups
  (``getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex``);
- pretrained models: the ``torch.hub`` loaders and ``torch.load`` (nothing in
  either method reads a checkpoint, so any load is a model from elsewhere).

The counts are what the checks report.  Not covered: C extensions that open
sockets themselves (ZeroMQ, which the Jupyter kernel uses for its own messages)
and child processes, which the guard cannot see into.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import torch
import torch.hub


class OfflineViolation(RuntimeError):
    """Code inside the guard tried to reach the network or load a pretrained model."""


_HUB_LOADERS = ("load", "load_state_dict_from_url", "download_url_to_file")
_SOCKET_METHODS = ("connect", "connect_ex", "sendto", "sendmsg")
_LOOKUPS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex")


def patched_functions() -> list[tuple[object, str]]:
    """Every (owner, attribute) that :class:`OfflineGuard` replaces while it runs.

    A warm kernel (:mod:`litrepro.kernels`) restores these between notebooks, so a
    notebook that stops before ``guard.stop()`` cannot leave the next one offline.
    """
    return ([(socket.socket, name) for name in _SOCKET_METHODS] + [(socket, name) for name in _LOOKUPS]
            + [(torch.hub, name) for name in _HUB_LOADERS] + [(torch, "load")])


@dataclass
class OfflineGuard:
    """Context manager; ``network_calls`` and ``pretrained_model_calls`` count attempts."""

    network_calls: int = 0
    pretrained_model_calls: int = 0
    _saved: dict = field(default_factory=dict, repr=False)

    def __enter__(self) -> "OfflineGuard":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "OfflineGuard":
        """Begin intercepting (notebooks call start/stop in separate cells)."""
        self._saved = {"socket": {name: getattr(socket.socket, name) for name in _SOCKET_METHODS},
                       "lookup": {name: getattr(socket, name) for name in _LOOKUPS},
                       "hub": {name: getattr(torch.hub, name) for name in _HUB_LOADERS},
                       "torch.load": torch.load}

        def refuse_network(*args, **kwargs):
            self.network_calls += 1
            raise OfflineViolation(f"network use refused inside OfflineGuard (arguments {args[1:3]!r})")

        def refuse_model(*args, **kwargs):
            self.pretrained_model_calls += 1
            raise OfflineViolation("pretrained model load refused inside OfflineGuard")

        for name in _SOCKET_METHODS:
            setattr(socket.socket, name, refuse_network)
        for name in _LOOKUPS:
            setattr(socket, name, refuse_network)
        for name in _HUB_LOADERS:
            setattr(torch.hub, name, refuse_model)
        torch.load = refuse_model
        return self

    def stop(self) -> None:
        """Restore the real socket, lookup, torch.hub and torch.load functions."""
        for name, fn in self._saved["socket"].items():
            setattr(socket.socket, name, fn)
        for name, fn in self._saved["lookup"].items():
            setattr(socket, name, fn)
        for name, fn in self._saved["hub"].items():
            setattr(torch.hub, name, fn)
        torch.load = self._saved["torch.load"]

    @property
    def clean(self) -> bool:
        return self.network_calls == 0 and self.pretrained_model_calls == 0
