"""What one server accepts, learned by asking and remembered per server and model, so a refusal is met once
(a chat-only server's 404 for /v1/completions, a missing /infill, `n` ignored, a field refused) and never
sent again in this run of the app. None: not known yet (try it); False: refused (do not send it again)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Features:
    completions: bool | None = None
    chat: bool | None = None
    chat_template: bool | None = None  # False: the server has no chat template for this model
    infill: bool | None = None  # llama.cpp's /infill
    n: bool | None = None  # False: the server answers one choice whatever `n` asks
    no_logprobs: set[str] = field(default_factory=set)  # paths that refused `logprobs` (or broke on it)
    served_as: str = ""  # the model name the server's first answer gave (a later change is refused)


_KNOWN: dict[tuple[str, str], Features] = {}
_LOCK = threading.Lock()


def features_for(url: str, model: str) -> Features:
    with _LOCK:
        return _KNOWN.setdefault((url, model), Features())


def forget(url: str = "") -> None:
    """Forget what was learned (of one server, or all): a server restarted with other options."""
    with _LOCK:
        for key in [k for k in _KNOWN if not url or k[0] == url]:
            del _KNOWN[key]
