"""Count, and refuse, network connections and pretrained-model loads.

The seed files claim ``pretrained_model_calls == 0`` and
``no_live_bidder_or_model_calls``/``no_pretrained_checkpoint_downloaded``.  We
measure these claims rather than assert them: inside :class:`OfflineGuard`
every ``socket.connect`` and every ``torch.hub`` loader is intercepted,
counted and refused, and the counts are what the checks report.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import torch.hub


class OfflineViolation(RuntimeError):
    """Code inside the guard tried to reach the network or load a pretrained model."""


_HUB_LOADERS = ("load", "load_state_dict_from_url", "download_url_to_file")


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
        self._saved = {"connect": socket.socket.connect, "connect_ex": socket.socket.connect_ex,
                       **{name: getattr(torch.hub, name) for name in _HUB_LOADERS}}

        def refuse_socket(sock, address, *args, **kwargs):
            self.network_calls += 1
            raise OfflineViolation(f"network connection to {address!r} refused inside OfflineGuard")

        def refuse_hub(*args, **kwargs):
            self.pretrained_model_calls += 1
            raise OfflineViolation("pretrained model load refused inside OfflineGuard")

        socket.socket.connect = refuse_socket
        socket.socket.connect_ex = refuse_socket
        for name in _HUB_LOADERS:
            setattr(torch.hub, name, refuse_hub)
        return self

    def stop(self) -> None:
        """Restore the real socket and torch.hub functions."""
        socket.socket.connect = self._saved["connect"]
        socket.socket.connect_ex = self._saved["connect_ex"]
        for name in _HUB_LOADERS:
            setattr(torch.hub, name, self._saved[name])

    @property
    def clean(self) -> bool:
        return self.network_calls == 0 and self.pretrained_model_calls == 0
