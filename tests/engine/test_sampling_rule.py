"""One sampling rule (`engine.sampling.SamplingRule`), fed three ways, and nowhere a second one.

* the source check: on the runtime path an argmax, top-k, multinomial or sampler draw, and any call of the
  rule's pieces (acceptance, renoising, the draws, the entropy...), appear in `engine/sampling.py` alone (and
  in the fused kernel's device code, proven against the rule below); offline tools and training name theirs
  in `OFFLINE`, each with its reason;
* the feeds agree: the whole-canvas host feed, the chunked feed and the fused kernel (under Triton's
  interpreter) give the same canvas, shown ids and acceptance through the rule, ties and held rows included,
  and leave every generator where the rule says;
* every path of the loop calls the rule once per step.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from engine.api import DenoiseSettings
from engine.lean_step import ChunkedFeed
from engine.sampling import AcceptedOnlyFeed, SamplingRule, StepOut
from tests.helpers.kernels import DEVICE  # before Triton is first used: its interpreter on without a GPU

ROOT = Path(__file__).resolve().parents[2]

# What only the rule may do: pick a token from vocabulary scores, or draw the sampler's random numbers...
VOCAB_OPS = {"argmax", "argmin", "topk", "multinomial", "exponential_", "gumbel_softmax"}
DRAWS = {"randint"}  # the renoising ids and the kernel's seeds (offline tools use Python's random.randint)
# ... and the rule's own pieces, which every path reaches through `SamplingRule` only.
PIECES = {
    "accept_mask",
    "renoise",
    "noise_ids",
    "uniform_draws",
    "exponential_draws",
    "exponential_from_uniform",
    "sample_accepted",
    "token_entropy",
    "temperature_schedule",
    "measure_slots",
    "one_sample",
}
HOME = "engine/sampling.py"
DEVICE_CODE = {"engine/kernels/triton_src.py": {"argmax"}}  # the fused tail's two passes, on the device
OFFLINE = {  # tools and training, never run by a request: file -> (the calls it may make, why)
    "engine/tools/reference_sampling.py": (
        {"argmax", "exponential_", "exponential_draws", "noise_ids"},
        "the reference sampler written out plainly, to prove the rule against",
    ),
    "engine/tools/quant_quality.py": (
        {"argmax", "temperature_schedule"},
        "argmax agreement between two models' tempered logits: a quality figure, not a sample",
    ),
    "engine/tools/kernel_timing.py": ({"topk"}, "random expert routing for a timed MoE kernel"),
    "engine/training/objective.py": ({"argmax"}, "the denoiser's accuracy counts while training"),
    "engine/training/teacher_llamacpp.py": (
        {"argmax"},
        "the autoregressive teacher's greedy pick (another model, not the diffusion sampler)",
    ),
}


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


def test_the_rule_has_one_implementation() -> None:
    offenders = {}
    seen_offline: dict[str, set[str]] = {}
    for path in sorted((ROOT / "engine").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == HOME:
            continue
        offline = rel.startswith(("engine/tools/", "engine/training/"))
        watched = VOCAB_OPS | PIECES | (set() if offline else DRAWS)
        found = _calls(path) & watched
        allowed = DEVICE_CODE.get(rel, set()) | OFFLINE.get(rel, (set(), ""))[0]
        if found - allowed:
            offenders[rel] = sorted(found - allowed)
        if rel in OFFLINE:
            seen_offline[rel] = found
    assert offenders == {}, (
        "a second implementation of the sampling rule: argmax/top-k/multinomial/draws over vocabulary logits "
        f"and the rule's pieces belong in {HOME} (see CONTRIBUTING.md, 'How to add ... a sampling rule'): "
        f"{offenders}"
    )
    stale = {rel: sorted(calls - seen_offline.get(rel, set())) for rel, (calls, _) in OFFLINE.items()}
    assert all(not v for v in stale.values()), f"OFFLINE allows calls a file no longer makes: {stale}"


# -- the feeds agree ----------------------------------------------------------------------------------------


def _logits(batch: int, length: int, vocab: int, seed: int) -> torch.Tensor:
    raw = torch.randn(batch, length, vocab, generator=torch.Generator().manual_seed(seed)) * 3.0
    raw[..., : vocab // 4] = raw[..., vocab // 4 : vocab // 2]  # exact ties between columns
    return torch.tanh(raw / 30.0) * 30.0  # soft-capped, as the forward hands them over


def _gens(batch: int, seed: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(seed + b) for b in range(batch)]


def _frozen(batch: int, length: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    fmask = torch.zeros(batch, length, dtype=torch.bool)
    fmask[:, length - 3 :] = True
    return fmask, torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(9))


def _step(feed, rule: SamplingRule, fmask, fids, held) -> StepOut:
    """One step as the loop takes it: a held row keeps its (here: zero) canvas, ids and confidence."""
    batch, length, _ = feed.shape
    zeros = torch.zeros(batch, length, dtype=torch.long)
    previous = (zeros, zeros, torch.zeros(batch, length))
    rows = torch.tensor([[h] for h in held]) if held else None
    return rule.step(feed, fmask=fmask, fids=fids, held=held, previous=previous, held_rows=rows)


def _same_states(a: list[torch.Generator], b: list[torch.Generator]) -> bool:
    return all(torch.equal(x.get_state(), y.get_state()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(("held", "frozen"), [((), False), ((False, True, False), True), ((), True)])
def test_whole_and_chunked_feeds_give_one_step(
    held: tuple[bool, ...], frozen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.lean_step as lean

    monkeypatch.setattr(lean, "CHUNK_CELLS", 5 * 64)  # 5 rows a chunk: chunks straddle nothing, end short
    batch, length, vocab = 3, 16, 64
    settings = DenoiseSettings(entropy_bound=2.5)
    fmask, fids = _frozen(batch, length, vocab) if frozen else (None, None)
    for seed in range(6):
        processed = _logits(batch, length, vocab, seed) / 0.7
        whole_gens, chunk_gens = _gens(batch, seed), _gens(batch, seed)
        whole_rule = SamplingRule(whole_gens, entropy_bound=settings.entropy_bound)
        chunk_rule = SamplingRule(chunk_gens, entropy_bound=settings.entropy_bound)
        whole = _step(AcceptedOnlyFeed(processed), whole_rule, fmask, fids, held)
        chunked = _step(ChunkedFeed(processed), chunk_rule, fmask, fids, held)
        assert torch.equal(whole.canvas, chunked.canvas), seed
        assert torch.equal(whole.argmax, chunked.argmax)
        assert torch.equal(whole.accepted, chunked.accepted)
        assert torch.equal(whole.entropy, chunked.entropy)
        assert torch.equal(whole.confidence, chunked.confidence)
        assert _same_states(whole_gens, chunk_gens)
        if held:  # a held row drew nothing at all: its generator is where its seed put it
            assert torch.equal(whole_gens[1].get_state(), _gens(batch, seed)[1].get_state())
        if frozen:  # frozen slots: never accepted, their known id back (held rows keep their whole canvas)
            assert fmask is not None and fids is not None
            live = fmask & ~torch.tensor([[b < len(held) and held[b]] for b in range(batch)])
            assert torch.equal(whole.canvas[live], fids[live]) and not whole.accepted[fmask].any()


def test_held_rows_and_kept_slots_are_committed_by_the_rule() -> None:
    batch, length, vocab = 2, 8, 32
    processed = _logits(batch, length, vocab, 3)
    rule = SamplingRule(_gens(batch, 1), entropy_bound=1.0)
    before = torch.full((batch, length), 7)
    shown = torch.full((batch, length), 8)
    conf = torch.full((batch, length), 0.25)
    kept = torch.zeros(batch, length, dtype=torch.bool)
    kept[:, :4] = True
    out = rule.step(
        ChunkedFeed(processed),
        held=(False, True),
        kept=kept,
        previous=(before, shown, conf),
        held_rows=torch.tensor([[False], [True]]),
    )
    assert torch.equal(out.canvas[1], before[1]) and torch.equal(out.argmax[1], shown[1])
    assert torch.equal(out.confidence[1], conf[1])
    keep = kept[0] & ~out.accepted[0]
    assert torch.equal(out.canvas[0][keep], before[0][keep])  # kept until accepted


def test_the_rules_seeds_skip_held_rows() -> None:
    gens = _gens(3, 4)
    seeds = SamplingRule(gens).seeds(3, torch.device("cpu"), (False, True, False))
    assert seeds[1] == 0 and torch.equal(gens[1].get_state(), _gens(3, 4)[1].get_state())
    assert not torch.equal(gens[0].get_state(), _gens(3, 4)[0].get_state())


@pytest.mark.parametrize(("held", "frozen"), [((), False), ((False, True, False), True)])
def test_the_fused_kernel_and_the_rule_agree(held: tuple[bool, ...], frozen: bool) -> None:
    """The fused tail fed to the rule gives the chunked feed's step: the same canvas, shown ids, acceptance
    and generator states (the kernel's entropy and confidence within its fp32 tolerance)."""
    pytest.importorskip("triton")
    from engine.kernels.vocab_tail import TailFeed

    if DEVICE.type != "cpu":
        pytest.skip("the interpreter run; a GPU's kernel draws Philox variates of its own")
    batch, length, vocab = 3, 16, 96
    bound = 2.5
    fmask, fids = _frozen(batch, length, vocab) if frozen else (None, None)
    for seed in range(3):
        logits = _logits(batch, length, vocab, seed)
        temperature = torch.tensor(0.6)
        plain_gens, fused_gens = _gens(batch, seed), _gens(batch, seed)
        plain_rule = SamplingRule(plain_gens, entropy_bound=bound)
        plain = _step(ChunkedFeed(logits / temperature), plain_rule, fmask, fids, held)
        feed = TailFeed(logits.to(DEVICE), temperature, None, None, torch.bfloat16)
        fused = _step(feed, SamplingRule(fused_gens, entropy_bound=bound), fmask, fids, held)
        assert torch.equal(fused.argmax, plain.argmax), seed
        assert torch.equal(fused.accepted, plain.accepted), seed
        assert torch.equal(fused.canvas, plain.canvas), seed
        torch.testing.assert_close(fused.entropy, plain.entropy, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(fused.confidence, plain.confidence, atol=1e-6, rtol=1e-5)
        assert _same_states(plain_gens, fused_gens)
        assert feed.sc is not None and feed.sc.dtype == torch.bfloat16


# -- every path calls the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["host-whole", "host-chunked", "device"])
def test_every_path_of_the_loop_calls_the_rule_once_per_step(
    session, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.denoise as denoise_module

    calls: list[str] = []
    real = SamplingRule.step

    def counted(self, feed, **kwargs):
        calls.append(type(feed).__name__)
        return real(self, feed, **kwargs)

    monkeypatch.setattr(SamplingRule, "step", counted)
    if path == "host-chunked":
        monkeypatch.setattr(denoise_module, "_SELECTIVE_LIMIT", 0)
    model, tok = session.model, session.tokenizer
    ids = tok("The quick brown fox", return_tensors="pt").input_ids
    gen = model.generation_config
    kwargs = dict(max_new_tokens=32, eos_token_ids=gen.eos_token_id, pad_token_id=gen.pad_token_id, seed=2)
    if path == "device":
        with denoise_module.device_code_path():
            out = denoise_module.denoise(model, ids, DenoiseSettings(max_steps=4), **kwargs)
    else:
        out = denoise_module.denoise(model, ids, DenoiseSettings(max_steps=4), **kwargs)
    assert len(calls) == out.steps > 0
    expected = "AcceptedOnlyFeed" if path == "host-whole" else "ChunkedFeed"
    assert set(calls) == {expected}
