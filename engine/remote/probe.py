"""Capabilities of a server, probed at connect and never assumed: the model it serves (`/v1/models`, with
`max_model_len`), its version (`/version`), and whether the canvas-control tier of `vllm_xargs` is there (a
one-step, read-only request with a seeded canvas and one pinned position: a build without it answers 400)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.api import (
    Capabilities,
    ServerError,
    ServerModelNotFoundError,
)
from engine.remote import canvas, shapes
from engine.remote.client import ServerClient
from engine.remote.shapes import ServedModel

MAX_CANDIDATES = 8  # what the app offers; vLLM accepts larger n, the canvas rows cost memory on the server
NO_CANVAS_CONTROL = (
    "This server has no canvas control (seeded canvases with pinned words), so strength, pins "
    "and re-roll are off; rewrite and infill work by instruction."
)


@dataclass(frozen=True)
class Probe:
    model: ServedModel
    models: tuple[ServedModel, ...]
    version: str
    capabilities: Capabilities


def list_models(client: ServerClient) -> tuple[ServedModel, ...]:
    return shapes.models(client.get_json("/v1/models"), client.host)


def pick_model(models: tuple[ServedModel, ...], wanted: str | None, host: str) -> ServedModel:
    if not models:
        raise ServerError(f"The server at {host} serves no model.")
    if not wanted:
        return models[0]
    for m in models:
        if wanted in (m.id, m.root):
            return m
    names = ", ".join(m.id for m in models[:20]) + (", …" if len(models) > 20 else "")
    raise ServerModelNotFoundError(
        f"The server at {host} does not serve the model '{wanted}'; it serves: {names}."
    )


def probe(client: ServerClient, wanted_model: str | None = None) -> Probe:
    models = list_models(client)
    model = pick_model(models, wanted_model, client.host)
    try:
        version = shapes.version(client.get_json("/version"))
    except ServerError:  # optional: an error, a wrong shape or no /version at all is no version shown
        version = ""
    control, reason = probe_canvas_control(client, model.id)
    caps = Capabilities(
        backend="remote",
        where=f"Server: {client.host} · {shapes.shown_name(model)}",
        canvas_control=control,
        canvas_control_reason=reason,
        live_steps=False,
        seeds=False,
        max_candidates=MAX_CANDIDATES,
        context_length=model.max_model_len,
        server_version=version,
    )
    return Probe(model, models, version, caps)


def probe_canvas_control(client: ServerClient, model: str) -> tuple[bool, str]:
    """(present, the reason it is not), from one read-only step on a 4-token canvas with a pinned position."""
    works, why = canvas.probe(client, model, [2])
    if works:
        return True, ""
    return False, f"{NO_CANVAS_CONTROL} (The server at {client.host}: {why}.)"
