"""Which tier a server's model needs, told apart at connect: DiffusionGemma (token-id prompts, canvas
arguments; `engine.remote.backend`) or any other model (the text tier, `engine.remote.text_backend`).

Only vLLM serves DiffusionGemma, and only DiffusionGemma answers a one-id seed canvas with "must hold exactly
N ids" (which also gives its canvas length). So that request is sent to a vLLM server only (its `/v1/models`
says `owned_by: vllm`), or to a model whose name says DiffusionGemma; Ollama, LM Studio and llama.cpp are
never sent a field they do not know.
"""

from __future__ import annotations

from engine.api import ServerError, ServerModelNotFoundError
from engine.remote import canvas, shapes
from engine.remote.client import ServerClient
from engine.remote.shapes import TextModel

NO_MODEL = (
    "The server at {host} serves no model. Load one in it (Ollama: `ollama pull llama3.2`; LM Studio: load a "
    "model in its Developer tab; llama.cpp: start it with -m MODEL.gguf) and press Test again."
)
DIFFUSION_CANVAS = 256  # DiffusionGemma's canvas, when a server named so does not say its own


def served_models(client: ServerClient) -> tuple[TextModel, ...]:
    """The models `/v1/models` lists (parsed by `engine.remote.shapes.text_models`)."""
    return shapes.text_models(client.get_json("/v1/models"), client.host)


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
    return shapes.version(answer)
