"""A server's address, parsed once: what requests go to, what the writer sees, and the origin a request may
never leave.

`parse()` refuses an address that cannot be used (a port out of range, an unclosed "[", no host) with a typed
`ServerAddressError` sentence, before anything connects. `shown()` is what the writer sees of any address
(host:port, never the `user:password@` in front of it) and never fails, so a bad address in the settings can
still be named in a sentence. `origin()` is (scheme, host, port), the unit a redirect may not leave.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from engine.api import ServerAddressError
from engine.remote import redact

DEFAULT_PORTS = {"http": 80, "https": 443}
EXAMPLE = "http://127.0.0.1:8000 or https://gpu-box:8000"


@dataclass(frozen=True)
class ServerAddress:
    """A usable address: `url` is scheme://[user:pw@]host[:port][/path] without a trailing / or /v1."""

    url: str
    scheme: str
    host: str  # without brackets
    port: int
    username: str = ""
    password: str = ""

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host.lower(), self.port)

    @property
    def shown(self) -> str:
        """host:port as the writer typed it, never with credentials."""
        return shown(self.url)

    @property
    def public_url(self) -> str:
        """The URL without its credentials (for messages and the settings' display)."""
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, _netloc(self.host, parts.port, self.scheme), parts.path, "", ""))


def normalize(url: str) -> str:
    """scheme://… without a trailing slash or /v1 (both spellings are common); http:// when no scheme."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    scheme, sep, rest = url.partition("://")
    return scheme + sep + rest.rstrip("/").removesuffix("/v1").rstrip("/")


def parse(url: str) -> ServerAddress:
    """The address of `url`, or a `ServerAddressError` saying what is wrong with it and how to write it."""
    text = normalize(url)
    named = shown(url)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ServerAddressError(
            f"'{named}' is not a server address Letterpress can use ({_why(str(exc))}). Write it as "
            f"{EXAMPLE}."
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ServerAddressError(
            f"'{named}' is not a server address Letterpress can use: it starts with {scheme}://, and a "
            f"server is reached over http:// or https://. Write it as {EXAMPLE}."
        )
    host = parts.hostname or ""
    if not host:
        raise ServerAddressError(
            f"'{named}' is not a server address Letterpress can use: it names no host. Write it as {EXAMPLE}."
        )
    if port == 0:
        raise ServerAddressError(
            f"'{named}' is not a server address Letterpress can use (port 0 is not a port a server listens "
            f"on). Write it as {EXAMPLE}."
        )
    username, password = unquote(parts.username or ""), unquote(parts.password or "")
    redact.remember(password)
    return ServerAddress(text, scheme, host, port or DEFAULT_PORTS[scheme], username, password)


def shown(url: str) -> str:
    """What the writer sees of `url`: host:port (credentials removed); never raises, even for a broken
    address."""
    text = normalize(url)
    rest = text.partition("://")[2]
    netloc = rest.split("/", 1)[0]
    netloc = netloc.rpartition("@")[2]  # user:password@ never shown
    return redact.scrub(netloc or text)


def origin(url: object) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL (a string or an httpx URL); None when it has no usable origin."""
    try:
        parts = urlsplit(str(url))
        scheme = parts.scheme.lower()
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return (scheme, parts.hostname.lower(), port)


def shown_origin(found: tuple[str, str, int] | None, raw: str = "") -> str:
    """An origin as the writer reads it ("https://other-host:9000"); the scrubbed `raw` when it has none."""
    if found is None:
        return shown(raw) if raw else "an unknown address"
    scheme, host, port = found
    return f"{scheme}://{_netloc(host, port, scheme)}"


def _netloc(host: str, port: int | None, scheme: str) -> str:
    shown_host = f"[{host}]" if ":" in host else host
    if port is None or port == DEFAULT_PORTS.get(scheme):
        return shown_host
    return f"{shown_host}:{port}"


def _why(detail: str) -> str:
    lowered = detail.lower()
    if "port" in lowered:
        return "its port is not a number from 1 to 65535"
    if "ipv6" in lowered or "[" in detail or "]" in detail:
        return "a '[' around an IPv6 address is not closed"
    return detail
