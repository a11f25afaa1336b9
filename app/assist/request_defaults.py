"""What every assistant request carries besides the editor's text: the document brief, the document's identity
and the rewrite strength remembered per instruction.

The window makes one `RequestDefaults` and gives it to the `Assistant` when it builds it; the services that
own a part (the brief in `app.documents.brief`, the strength dial in `app.assist.editing`) are handed the same
object and plug their source in through its typed methods. Before, they set attributes on the assistant from
outside (`assistant.brief_provider = ...`), which no type checker or reader could follow.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Protocol

from app.config.commands import default_key
from app.config.settings import Settings
from engine.api import REWRITE_PRESETS, DenoiseSettings, Request

log = logging.getLogger(__name__)


class BriefSource(Protocol):
    """The document's brief and identity (app.documents.brief.BriefController)."""

    @property
    def text(self) -> str: ...

    @property
    def request_text(self) -> str: ...  # the part of the brief the loaded model reads

    def document_id(self) -> str: ...


class RequestDefaults:
    """The brief, the document identity and the strength per instruction for the assistant's next requests."""

    def __init__(
        self, *, brief: BriefSource | None = None, strength_for: Callable[[str], float] | None = None
    ) -> None:
        self._brief = brief
        self._strength_for = strength_for

    def use_brief(self, source: BriefSource) -> None:
        """Every later request carries `source`'s brief and document identity."""
        self._brief = source

    def use_strength(self, strength_for: Callable[[str], float]) -> None:
        """Rewrites without an explicit strength ask `strength_for(instruction)` (the dial's memory)."""
        self._strength_for = strength_for

    def strength(self, instruction: str) -> float | None:
        """The remembered strength for `instruction` (None: none remembered, or its source failed)."""
        if self._strength_for is None:
            return None
        try:
            return self._strength_for(instruction)
        except Exception:  # a broken source must not break rewriting
            log.exception("rewrite strength unavailable")
            return None

    def apply(self, request: Request) -> Request:
        """`request` with the document brief and the document's identity (for the engine's prefix cache)."""
        source = self._brief
        if source is None:
            return request
        brief = _read("brief", lambda: source.request_text)
        document = _read("document", source.document_id)
        if brief is not None:
            request = dataclasses.replace(request, brief=brief)
        if document is not None:
            request = dataclasses.replace(request, document=document)
        return request


def _read(name: str, read: Callable[[], str]) -> str | None:
    try:
        return str(read())
    except Exception:  # a broken brief must not stop the assistant
        log.exception("%s unavailable", name)
        return None


__all__ = ["BriefSource", "RequestDefaults"]


class WriterSettings:
    """What the writer's settings give the assistant's requests and hints: the denoising settings, the draft
    length, the rewrite presets and the keys bound to the assistant's commands. Each falls back to the
    built-in default when there are no settings or they cannot be read (logged)."""

    def __init__(self, settings: Settings | None) -> None:
        self.settings = settings

    def denoise(self) -> DenoiseSettings:
        if self.settings is not None:
            try:
                return self.settings.denoise_settings()
            except Exception:
                log.exception("denoise settings unavailable; using defaults")
        return DenoiseSettings()

    def draft_length(self) -> int:
        if self.settings is not None:
            try:
                return self.settings.typed.draft.length
            except Exception:
                log.exception("draft length unavailable")
        return 128

    def presets(self) -> dict[str, str]:
        if self.settings is not None:
            try:
                return dict(self.settings.rewrite_presets())
            except Exception:
                log.exception("rewrite presets unavailable")
        return dict(REWRITE_PRESETS)

    def key(self, name: str, default: str | None = None) -> str:
        """The key the writer bound to assistant command `name` (Settings ▸ Assistant keys), as hints name it;
        without settings, the command table's default (what is bound then)."""
        fallback = default_key(name) if default is None else default
        if self.settings is None:
            return fallback
        return self.settings.typed.keys.get(name, fallback)
