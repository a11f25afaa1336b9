"""Secrets never shown: the API key and URL credentials are removed from every text a server (or an HTTP
library quoting a request) can put in front of the writer, a log or a terminal.

A server may echo what it was sent: the whole key, part of it ("sk-abc123****wxyz"), its URL-encoded form, the
`Authorization: Bearer …` header, or the address with its `user:password@`. `remember()` records a secret for
the life of the process (the transport calls it for the key and the URL's password when a client is made), and
`scrub()` removes every remembered secret, in whole or in part, plus anything that looks like a credential
whoever it belongs to (`Bearer …`, `Basic …`, `api_key=…`, `scheme://user:pw@`). It is one place, so every
endpoint (vLLM's, an OpenAI-compatible server's, llama.cpp's) redacts the same way.

`check_key()` is the one rule for a key at entry: printable ASCII without whitespace (what an HTTP header
can carry), so a key with a line break or an "é" is refused with a sentence instead of being sent, or
printed whole inside an HTTP library's error.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import quote, quote_plus, unquote

HIDDEN = "[hidden]"
MIN_SECRET = 4  # shorter secrets are not searched for in free text
MIN_PARTIAL = 6  # a run of this many characters of a secret is a partial echo of it
MAX_KEY_LENGTH = 4096
_SCAN_LIMIT = 20_000  # characters of a server's text scanned (and so shown at most): the rest is dropped

_lock = threading.Lock()
_secrets: set[str] = set()

# Credentials whoever they belong to: group 2 (the value) is hidden, group 1 (what names it) kept.
_VALUE = r"([^\s\"',;}&]+)"
_CREDENTIALS = (
    re.compile(
        r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)" + _VALUE
    ),
    re.compile(r"(?i)(\bbearer\s+)" + _VALUE),
    re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/=]{8,})"),  # base64 of user:password, not "basic auth"
    re.compile(
        r"(?i)(\b(?:api[_-]?key|access[_-]?token|token|password|passwd|secret)\b[\"']?\s*[:=]\s*[\"']?)"
        + _VALUE
    ),
)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\"']*@")


def remember(secret: str | None) -> None:
    """Hide `secret` (and its URL-encoded forms) in every text `scrub()` sees from now on."""
    if not secret or len(secret) < MIN_SECRET:
        return  # "pw" hunted in free text would blank every word holding it; URL patterns still strip it
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret, safe="").lower()}
    with _lock:
        _secrets.update(form for form in forms if form)


def forget_all() -> None:
    """Tests only: start again from no remembered secret."""
    with _lock:
        _secrets.clear()


def scrub(text: object, extra: tuple[str | None, ...] = (), *, partial: bool = True) -> str:
    """`text` with every remembered secret (whole, partial or URL-encoded), every `extra` one, and every
    credential-looking value replaced by "[hidden]". `partial=False` hides whole secrets only: for a name
    (a model id) that may share a few letters with a key without being an echo of it."""
    out = str(text)[:_SCAN_LIMIT]
    with _lock:
        known = sorted(_secrets | {s for s in extra if s}, key=len, reverse=True)
    if known:
        size = MIN_PARTIAL if partial else 0
        out = _hide_secrets(out, known, size)
        decoded = unquote(out)
        if decoded != out and _hide_secrets(decoded, known, size) != decoded:
            out = _hide_secrets(decoded, known, size)  # a secret encoded in a way remember() did not list
    out = _URL_CREDENTIALS.sub(lambda m: m.group(1), out)
    for pattern in _CREDENTIALS:
        out = pattern.sub(lambda m: m.group(1) + (m.group(2) if m.group(2) == HIDDEN else HIDDEN), out)
    return out


def shown(text: object, limit: int = 300, *, partial: bool = True) -> str:
    """A server's text as a sentence may quote it: secrets hidden, control and formatting characters (a
    terminal escape, a right-to-left override, a line break) turned into spaces, at most `limit`
    characters."""
    clean = "".join(c if c.isprintable() else " " for c in scrub(text, partial=partial))
    clean = " ".join(clean.split())
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def _hide_secrets(text: str, secrets: list[str], partial: int) -> str:
    """Hide each run of non-space characters that holds a secret or `partial` characters of one (0: whole
    secrets only)."""
    marked = [False] * len(text)
    for secret in secrets:
        size = min(len(secret), partial) if partial else len(secret)
        for start in range(len(secret) - size + 1):
            piece = secret[start : start + size]
            at = text.find(piece)
            while at >= 0:
                for i in range(at, at + size):
                    marked[i] = True
                at = text.find(piece, at + 1)
    if not any(marked):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        if not marked[i]:
            out.append(text[i])
            i += 1
            continue
        start, end = i, i
        while start > 0 and not text[start - 1].isspace() and text[start - 1] not in "\"'":
            start -= 1
        while end < len(text) and (marked[end] or (not text[end].isspace() and text[end] not in "\"'")):
            end += 1
        del out[len(out) - (i - start) :]
        out.append(HIDDEN)
        i = end
    return "".join(out)


def check_key(key: str | None) -> str:
    """ "" when `key` can be sent (none, or printable ASCII without whitespace), else the sentence that says
    what is wrong with it; the key itself is never part of the sentence."""
    if not key:
        return ""
    where = "Enter it again in Model ▸ Use a server… (or in LETTERPRESS_API_KEY)"
    if len(key) > MAX_KEY_LENGTH:
        return f"The API key is {len(key):,} characters long, more than any server's key; {where}."
    for position, char in enumerate(key, start=1):
        if char in "\r\n":
            what = "a line break"
        elif char.isspace():
            what = "a space" if char == " " else "a whitespace character"
        elif not 0x21 <= ord(char) <= 0x7E:
            code = f"U+{ord(char):04X}"
            printable = char.isprintable()
            what = f"the character {char!r} ({code})" if printable else f"a control character ({code})"
        else:
            continue
        return (
            f"The API key holds {what} (character {position}), which an HTTP header cannot carry: a key is "
            f"printable ASCII without spaces. {where}, copied without the line break or quotes around it."
        )
    return ""
