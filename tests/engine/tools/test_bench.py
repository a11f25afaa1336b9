"""The benchmark and the performance pieces of the engine: what they report, and that the faster paths give
the same tokens as the slow ones. No assertions on absolute times; the GPU checks are marked and skipped
without CUDA."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from engine.api import DenoiseSettings
from engine.denoise import denoise, temperature_schedule
from engine.tools.reference_sampling import draw_step, sample_one, sample_with
from tests.helpers.engine_cli import run_engine

ROOT = Path(__file__).resolve().parents[3]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _engine(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return run_engine(*args, timeout=timeout)


# -- the side-by-side benchmark ------------------------------------------------------------------------------


def test_bench_json_reports_every_figure_and_ends_with_the_ratio(tiny_dir: Path, tmp_path: Path) -> None:
    plot = tmp_path / "steps.png"
    run = _engine(
        "bench",
        "--model",
        str(tiny_dir),
        "--device",
        "cpu",
        "--json",
        "--repeats",
        "1",
        "--steps",
        "4",
        "--cases",
        "draft-short-1blk,infill-half",
        "--plot",
        str(plot),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert list(report)[-1] == "engine_vs_reference"  # printed last, as scripts expect
    assert run.stdout.rstrip().endswith("}") and '"engine_vs_reference"' in run.stdout.rstrip()[-40:]
    assert report["engine_vs_reference"] > 0
    by_name = {c["name"]: c for c in report["cases"]}
    assert set(by_name) == {"draft-short-1blk", "infill-half"}
    draft = by_name["draft-short-1blk"]
    assert draft["identical_ids"] is True  # the unconstrained draft reproduces generate() token for token
    assert by_name["infill-half"]["identical_ids"] is None and "pins" in by_name["infill-half"]["compared"]
    for side in ("engine", "reference"):
        fig = draft[side]
        for key in (
            "wall_ms",
            "forwards_per_canvas",
            "forwards_per_256_tokens",
            "tokens_per_forward",
            "first_draft_ms",
            "step_ms",
            "forward_ms_per_step",
            "overhead_ms_per_step",
            "overhead_share",
            "syncs_per_step",
            "model_syncs_per_step",
        ):
            assert key in fig, (side, key)
        assert 0 <= fig["overhead_share"] < 1
        assert fig["forward_ms_per_step"] <= fig["step_ms"]
        assert fig["steps"] <= 4
    # our loop copies one small tensor to the host per step; generate()'s multinomial checks cost two more
    assert draft["engine"]["syncs_per_step"] < draft["reference"]["syncs_per_step"]
    assert draft["engine"]["syncs_per_step"] <= 1.0  # at most one small synchronisation per step
    assert report["summary"]["identical_ids_all"] is True
    assert report["summary"]["engine_vs_reference_same_output"] > 0
    assert plot.is_file() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_table_names_each_case_and_the_ratio(tiny_dir: Path) -> None:
    run = _engine(
        "bench",
        "--model",
        str(tiny_dir),
        "--device",
        "cpu",
        "--repeats",
        "1",
        "--steps",
        "2",
        "--cases",
        "rewrite-short",
        "--no-syncs",
    )
    assert run.returncode == 0, run.stderr
    assert "rewrite-short" in run.stdout and run.stdout.strip().splitlines()[-1].startswith(
        "engine_vs_reference"
    )


def test_bench_refuses_the_fast_path_without_cuda(tiny_dir: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("has CUDA")
    run = _engine("bench", "--model", str(tiny_dir), "--device", "cpu", "--fastpath", "--repeats", "1")
    assert run.returncode == 2 and "CUDA" in run.stderr


def test_unwrapped_runs_count_the_same_forwards(session) -> None:
    """Under --fastpath the forward wrappers are off (they would be compiled into the CUDA graphs); the
    figures then come from the loop's own timing and from generate()'s tokens per forward."""
    from engine.tools.bench import ForwardRecorder, default_cases, run_engine, run_reference

    case = next(c for c in default_cases(32) if c.name == "draft-short-1blk")
    settings = DenoiseSettings(max_steps=5, seed=case.seed)
    model = session.model
    runs = {}
    for enabled in (True, False):
        recorder = ForwardRecorder(model, False, enabled=enabled)
        with recorder.installed(), torch.inference_mode():
            ours = run_engine(session, case, settings, recorder)
            out = session.last_output
            prompt = out.sequences[:1, : out.prompt_length]
            ref = run_reference(model, prompt, 32, settings, case.seed, recorder, session._pad)
        runs[enabled] = (ours, ref)
    assert "forward" not in model.__dict__  # nothing left wrapped
    (ours_w, ref_w), (ours_u, ref_u) = runs[True], runs[False]
    assert ours_u.forwards == ours_w.forwards and ours_u.ids == ours_w.ids
    assert 0 < ours_u.forward_s <= ours_u.step_s
    assert ref_u.ids == ref_w.ids == ours_w.ids
    if ref_u.new_tokens:
        assert ref_u.forwards == ref_w.forwards


# -- the lean step stays exact -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(32, 512), (3, 7), (64, 4096)])
def test_sampling_without_host_checks_draws_what_multinomial_draws(shape: tuple[int, int]) -> None:
    for seed in range(10):
        probs = torch.softmax(torch.randn(*shape) * 4, dim=-1)
        g1, g2 = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        expected = torch.multinomial(probs, 1, generator=g1).squeeze(-1)
        assert torch.equal(sample_one(probs, g2), expected)
        assert torch.equal(g1.get_state(), g2.get_state())  # and leaves the generator where multinomial does


@pytest.mark.parametrize("chunk", [1 << 20, 1000])
def test_cpu_exponential_draws_are_torchs_own_value_for_value(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.sampling as sampling_mod

    monkeypatch.setattr(sampling_mod, "_EXP_CHUNK", chunk)
    for shape in [(32, 512), (3, 7), (37, 311), (256, 4096)]:
        for seed in range(4):
            g1, g2 = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
            expected = torch.empty(shape).exponential_(1, generator=g1)
            got = sampling_mod.exponential_draws(shape, g2, torch.device("cpu"))
            assert got.dtype == torch.float32 and torch.equal(got, expected), (shape, seed)
            assert torch.equal(g1.get_state(), g2.get_state())


@pytest.mark.parametrize("rows", [1, 3])
def test_sampling_only_the_accepted_slots_gives_the_full_samplers_canvas(rows: int) -> None:
    """The CPU loop turns only the accepted rows' uniforms into Exp(1) variates and samples them; the canvas
    and the generators must end exactly as with every row sampled (ties between probabilities included)."""
    import engine.sampling as sampling_mod

    cpu, shape = torch.device("cpu"), (rows, 16, 64)
    for seed in range(20):
        logits = torch.randn(*shape) * (1 + seed)
        logits[..., :8] = logits[..., 8:16]  # exact ties between columns
        probs = torch.softmax(logits, dim=-1)
        accepted = torch.rand(rows, 16) < (seed % 5) / 4  # from none to all
        g1 = [torch.Generator().manual_seed(seed + k) for k in range(rows)]
        g2 = [torch.Generator().manual_seed(seed + k) for k in range(rows)]
        qs, noise = draw_step(g1, shape, cpu)
        expected = sampling_mod.renoise(sample_with(probs, qs), accepted, noise)
        uniforms = sampling_mod.uniform_draws(g2, shape)
        got = sampling_mod.sample_accepted(
            probs, uniforms, accepted, sampling_mod.noise_ids(64, (rows, 16), g2, cpu)
        )
        assert torch.equal(got, expected), seed
        assert all(torch.equal(a.get_state(), b.get_state()) for a, b in zip(g1, g2, strict=False))


def test_precomputed_temperatures_equal_the_reference_processor() -> None:
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        LinearTemperatureScheduleLogitsProcessor,
    )

    for settings in (DenoiseSettings(), DenoiseSettings(max_steps=7, t_min=0.3, t_max=0.95)):
        temps = temperature_schedule(settings, torch.device("cpu"))
        proc = LinearTemperatureScheduleLogitsProcessor(settings.t_min, settings.t_max, settings.max_steps)
        logits = torch.randn(2, 5, 11)
        for step in range(1, settings.max_steps + 1):
            expected = proc(None, logits, cur_step=torch.tensor(step, dtype=torch.int32))
            assert torch.equal(logits / temps[step - 1], expected)


# -- the fast path's CPU-testable parts ----------------------------------------------------------------------


def test_static_cache_path_reproduces_generate_with_a_static_cache(session) -> None:
    from engine.fastpath import FastPath

    model, tok = session.model, session.tokenizer
    gen = model.generation_config
    ids = tok("It was the best of times", return_tensors="pt").input_ids
    fast = FastPath(
        model, compile=False, grouped_experts=False
    )  # compiling needs CUDA; the plumbing does not
    with torch.inference_mode():
        torch.manual_seed(5)
        reference = model.generate(
            ids, max_new_tokens=64, max_denoising_steps=8, cache_implementation="static", disable_compile=True
        ).sequences
        ours = denoise(
            model,
            ids,
            DenoiseSettings(max_steps=8),
            max_new_tokens=64,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=5,
            fast=fast,
        )
    assert torch.equal(ours.sequences, reference)


@pytest.mark.slow  # 46 s on a shared 2-core machine: 3 experts of 512 NF4 blocks, dequantized both ways
def test_batched_stack_dequantization_is_bit_identical() -> None:
    from engine.fastpath import dequantize_stack
    from engine.weights.quantize import NF4Weight

    stack = NF4Weight((256, 128), 3, device="cpu", dtype=torch.float32)  # 512 blocks per expert: batched path
    for e in range(3):
        stack.store(torch.randn(256, 128) * (e + 1), e)
    expected = torch.stack([stack.dequantize(e) for e in range(3)])
    assert torch.equal(dequantize_stack(stack), expected)


def test_grouped_experts_forward_gives_the_loops_tokens(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.fastpath import grouped_nf4_experts_forward, use_grouped_experts
    from engine.weights.loader import load_model
    from engine.weights.quantize import nf4_experts_forward

    monkeypatch.setenv("LETTERPRESS_QCACHE", "off")
    model = load_model(tiny_dir, device="cpu", quantization="nf4").model
    experts = next(m for m in model.modules() if type(m).__name__.endswith("TextExperts"))
    hidden = torch.randn(40, model.config.text_config.hidden_size)
    index = torch.randint(0, experts.gate_up_proj.count, (40, 2))
    weights = torch.rand(40, 2)
    gen = model.generation_config
    ids = torch.randint(10, 500, (1, 12))

    def tokens() -> torch.Tensor:
        return denoise(
            model,
            ids,
            DenoiseSettings(max_steps=6),
            max_new_tokens=32,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=0,
        ).sequences

    with torch.inference_mode():
        torch.testing.assert_close(
            grouped_nf4_experts_forward(experts, hidden, index, weights),
            nf4_experts_forward(experts, hidden, index, weights),
        )
        looped = tokens()
        assert use_grouped_experts(model)
        assert torch.equal(tokens(), looped)


# -- the real-shape forward benchmark ------------------------------------------------------------------------


def test_real_shape_bench_runs_on_cpu_and_extrapolates_with_its_arithmetic() -> None:
    from engine.tools.realbench import run_real_shape

    report = run_real_shape(
        layers=2, device="cpu", vocab=512, prefixes=[8], iters=1, bandwidth_gbs=50, peak_tflops=1
    )
    assert report["layer_types_built"] == ["sliding_attention", "full_attention"]
    (entry,) = report["prefixes"]
    assert entry["prefix"] == 8
    expected = 25 * entry["sliding_layer_ms"] + 5 * entry["global_layer_ms"] + entry["rest_ms_full_vocab"]
    assert entry["extrapolated_30_layers_ms"] == pytest.approx(expected, rel=1e-3)
    roof = entry["roofline"]
    # the published figures for the 26B-A4B at 4 bits: ~14 GB of weights and ~2.6 TFLOP per canvas forward
    assert 14e9 < roof["bytes"] < 18e9 and 2.0e12 < roof["flops"] < 3.0e12
    assert roof["roofline_ms"] == max(roof["memory_ms"], roof["compute_ms"])
    assert entry["ratio_to_roofline"] == pytest.approx(
        entry["extrapolated_30_layers_ms"] / roof["roofline_ms"], rel=1e-2
    )
    assert any("GB read per forward" in line for line in roof["arithmetic"])


def test_real_shape_cli_prints_the_roofline_arithmetic() -> None:
    run = _engine(
        "bench",
        "--real-shape",
        "--layers",
        "1",
        "--vocab",
        "512",
        "--prefixes",
        "8",
        "--iters",
        "1",
        "--device",
        "cpu",
        "--bandwidth-gbs",
        "50",
        "--peak-tflops",
        "1",
    )
    assert run.returncode == 0, run.stderr
    assert "30 layers ~" in run.stdout and "floor = max(" in run.stdout


# -- on a GPU ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
def test_gpu_bench_eager_keeps_identical_ids_and_small_overhead(tiny_dir: Path) -> None:
    from engine.tools.bench import bench_model, default_cases

    cases = [c for c in default_cases(32) if c.name == "draft-short-1blk"]
    report = bench_model(tiny_dir, device="cuda", repeats=3, cases=cases)
    assert report["summary"]["identical_ids_all"]
    assert report["cases"][0]["engine"]["syncs_per_step"] <= report["cases"][0]["reference"]["syncs_per_step"]


@pytest.mark.gpu
@needs_cuda
def test_gpu_fast_path_runs_and_reports(tiny_dir: Path) -> None:
    from engine.tools.bench import bench_model, default_cases

    cases = [c for c in default_cases(32) if c.name == "draft-short-1blk"]
    report = bench_model(tiny_dir, device="cuda", repeats=2, cases=cases, fastpath=True)
    assert report["fastpath"] and report["engine_vs_reference"] > 0


@pytest.mark.gpu
@needs_cuda
def test_gpu_real_shape_two_layers_against_the_roofline() -> None:
    from engine.tools.realbench import run_real_shape

    report = run_real_shape(layers=2, device="cuda", prefixes=[2048], iters=2, experts="grouped")
    entry = report["prefixes"][0]
    assert entry["extrapolated_30_layers_ms"] > 0
    if "ratio_to_roofline" in entry:
        assert entry["ratio_to_roofline"] >= 0.9  # nothing beats the hardware
