"""Which tier a server's model needs, told apart at connect: DiffusionGemma (token-id prompts, canvas
arguments; `engine.remote.backend`) or any other model (the text tier, `engine.remote.text_backend`).

Only vLLM serves DiffusionGemma, and only DiffusionGemma answers a one-id seed canvas with "must hold exactly
N ids" (which also gives its canvas length). So that request is sent to a vLLM server only (its `/v1/models`
says `owned_by: vllm`), or to a model whose name says DiffusionGemma; Ollama, LM Studio and llama.cpp are
never sent a field they do not know.
"""

from __future__ import annotations

from typing import Any

from engine.api import ServerError, ServerModelNotFoundError
from engine.remote import canvas
from engine.remote.client import ServerClient
from engine.remote.text_backend import TextModel

NO_MODEL = (
    "The server at {host} serves no model. Load one in it (Ollama: `ollama pull llama3.2`; LM Studio: load a "
    "model in its Developer tab; llama.cpp: start it with -m MODEL.gguf) and press Test again."
)
DIFFUSION_CANVAS = 256  # DiffusionGemma's canvas, when a server named so does not say its own
_CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "loaded_context_length")


def served_models(client: ServerClient) -> tuple[TextModel, ...]:
    """The models `/v1/models` lists, with the context length where the server states it (vLLM:
    `max_model_len`; LM Studio: `max_context_length`; llama.cpp's server: `meta.n_ctx_train`)."""
    answer = client.get_json("/v1/models")
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        data = answer.get("models") if isinstance(answer, dict) else None  # a few servers say "models"
    found = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        name = item.get("id") or item.get("name") or item.get("model")
        if not isinstance(name, str) or not name.strip():
            continue
        found.append(TextModel(name, _context(item), str(item.get("owned_by") or "")[:40]))
    return tuple(found)


def _context(item: dict[str, Any]) -> int:
    for key in _CONTEXT_KEYS:
        value = item.get(key)
        if isinstance(value, int) and value > 0:
            return value
    meta = item.get("meta")
    if isinstance(meta, dict):
        for key in ("n_ctx", "n_ctx_train"):
            value = meta.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return 0


def pick(models: tuple[TextModel, ...], wanted: str | None, host: str) -> TextModel:
    if not models:
        raise ServerError(NO_MODEL.format(host=host))
    if not wanted:
        return models[0]
    for m in models:
        if m.id == wanted:
            return m
    names = ", ".join(m.id for m in models[:20])
    raise ServerModelNotFoundError(
        f"The server at {host} does not serve the model '{wanted}'; it serves: {names}. Choose one of them "
        "in Model ▸ Use a server…."
    )


def diffusion_canvas(client: ServerClient, model: TextModel) -> int | None:
    """The canvas length when `model` is DiffusionGemma on vLLM, None for any other model."""
    named = "diffusiongemma" in model.id.lower().replace("-", "").replace("_", "")
    if model.owned_by != "vllm" and not named:
        return None
    length = canvas.canvas_length_of(client, model.id, 0)
    if length:
        return length
    return DIFFUSION_CANVAS if named else None


def server_version(client: ServerClient, model: TextModel) -> str:
    """vLLM's `/version`; other servers have no such endpoint and are not asked."""
    if model.owned_by != "vllm":
        return ""
    try:
        answer = client.get_json("/version")
    except ServerError:
        return ""
    return str(answer.get("version", ""))[:40] if isinstance(answer, dict) else ""
