"""Raw-socket checks shared by the server hardening tests and the fault campaign."""

from __future__ import annotations

import socket


def closed_by_peer(sock: socket.socket, ceiling: float) -> bool:
    """Whether the other end closes ``sock`` within ``ceiling`` seconds (a generous bound):
    read until EOF or a reset; a timeout means it was still open."""
    sock.settimeout(ceiling)
    try:
        while sock.recv(4096):
            pass
        return True
    except (socket.timeout, TimeoutError):
        return False
    except OSError:  # reset by the peer: closed too
        return True
