"""With a server chosen, the network guard lets through that host and port only; switching back closes it. The
guard's decision is checked directly (no connection is ever attempted to another machine)."""

from __future__ import annotations

import pytest

from app.platform import privacy


@pytest.fixture(autouse=True)
def _closed():
    privacy.forbid_servers()
    yield
    privacy.forbid_servers()


def _connect(host: str, port: int) -> None:
    privacy._audit("socket.connect", (None, (host, port)))


def test_only_the_chosen_host_and_port_are_reachable():
    with pytest.raises(privacy.NetworkBlockedError):
        _connect("203.0.113.5", 8000)  # nothing chosen: offline
    privacy.allow_server("http://203.0.113.5:8000/v1")
    _connect("203.0.113.5", 8000)
    for host, port in (("203.0.113.5", 22), ("198.51.100.1", 8000)):
        with pytest.raises(privacy.NetworkBlockedError):
            _connect(host, port)
    with pytest.raises(privacy.NetworkBlockedError):
        privacy._audit("socket.getaddrinfo", ("huggingface.co", 443, 0, 1, 0, 0))
    privacy.forbid_servers()
    with pytest.raises(privacy.NetworkBlockedError):
        _connect("203.0.113.5", 8000)


def test_a_loopback_server_needs_no_opening():
    privacy.allow_server("http://127.0.0.1:8765")
    assert not privacy._allowed_addresses and not privacy._allowed_names
    _connect("127.0.0.1", 8765)
