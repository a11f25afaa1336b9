"""A server's API key: kept in the OS keychain through `keyring` (never in the settings file), with the
environment variable LETTERPRESS_API_KEY as the fallback where no keychain is available (a headless Linux box,
a CI run) or none holds a key for the server."""

from __future__ import annotations

import contextlib
import logging
import os

log = logging.getLogger(__name__)

SERVICE = "letterpress"
ENV_KEY = "LETTERPRESS_API_KEY"


def _account(url: str) -> str:
    from engine.remote.client import base_url

    return base_url(url)


def load_key(url: str) -> str | None:
    """The key stored for `url`, else LETTERPRESS_API_KEY, else None."""
    try:
        import keyring

        stored = keyring.get_password(SERVICE, _account(url))
    except Exception as exc:  # noqa: BLE001 - no keychain backend is a normal state, not an error
        log.info("no keychain available (%s); using %s if set", type(exc).__name__, ENV_KEY)
        stored = None
    return stored or os.environ.get(ENV_KEY) or None


def save_key(url: str, key: str) -> str:
    """Store (or, for an empty key, forget) the key of `url`; returns "" or a sentence saying why it could
    not."""
    try:
        import keyring

        if key:
            keyring.set_password(SERVICE, _account(url), key)
        else:
            with contextlib.suppress(keyring.errors.PasswordDeleteError):
                keyring.delete_password(SERVICE, _account(url))
    except Exception as exc:  # noqa: BLE001
        return (
            f"The system keychain is not available ({type(exc).__name__}), so the key was not stored; set "
            f"{ENV_KEY} in the environment instead."
        )
    return ""
