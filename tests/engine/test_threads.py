"""The CPU thread policy: model size, free cores and the UI thread bound the intra-op threads."""

from __future__ import annotations

import pytest

from engine import threads
from engine.threads import BYTES_PER_THREAD, CpuLoad, plan_threads


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("LETTERPRESS_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def test_a_small_model_uses_one_thread_even_on_an_idle_machine():
    plan = plan_threads(15 * 2**20, usable=8, busy=0.0, reserve_ui=False)
    assert plan.threads == 1 and "model size" in plan.reason


def test_a_large_model_uses_the_free_cores_only():
    big = 100 * BYTES_PER_THREAD
    assert plan_threads(big, usable=8, busy=0.0, reserve_ui=False).threads == 8
    assert plan_threads(big, usable=8, busy=5.7, reserve_ui=False).threads == 2
    busy = plan_threads(big, usable=2, busy=2.0, reserve_ui=False)
    assert busy.threads == 1 and "free cores" in busy.reason


def test_never_more_compute_threads_than_cores_beside_the_ui_thread():
    big = 100 * BYTES_PER_THREAD
    plan = plan_threads(big, usable=2, busy=0.0, reserve_ui=True)
    assert plan.threads == 1 and "UI" in plan.reason
    assert plan_threads(big, usable=1, busy=0.0, reserve_ui=True).threads == 1


def test_overrides(monkeypatch):
    big = 100 * BYTES_PER_THREAD
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert plan_threads(big, usable=8, busy=0.0, reserve_ui=False).threads == 3
    monkeypatch.setenv("LETTERPRESS_THREADS", "5")
    assert plan_threads(15, usable=8, busy=8.0, reserve_ui=True).threads == 5
    monkeypatch.setenv("LETTERPRESS_THREADS", "torch")
    assert plan_threads(15, usable=8, busy=0.0).threads == 0  # leave torch alone (the benchmark's "before")


def test_usable_cores_and_the_measured_load_are_sane():
    cores = threads.usable_cores()
    assert cores >= 1
    load = CpuLoad()
    first = load.busy_cores()
    second = load.busy_cores()
    for value in (first, second):
        assert value is None or 0.0 <= value <= cores + 0.5


def test_the_own_process_work_is_not_counted_as_someone_elses():
    load = CpuLoad()
    load.busy_cores()
    end = __import__("time").process_time() + 0.3
    while __import__("time").process_time() < end:  # burn 0.3 s of our own CPU
        pass
    busy = load.busy_cores()
    assert busy is None or busy < threads.usable_cores()  # our own burn is subtracted


def test_prepare_openmp_sets_a_passive_wait_policy(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    threads.prepare_openmp()
    import os

    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_the_session_applies_the_policy_on_load(tmp_path_factory, monkeypatch):
    import torch

    from engine.session import Session
    from tests.helpers.checkpoints import tiny_checkpoint

    model = tiny_checkpoint(tmp_path_factory)
    before = torch.get_num_threads()
    monkeypatch.setenv("LETTERPRESS_THREADS", "1")
    try:
        session = Session()
        session.load(model, device="cpu")
        assert session.threads is not None and session.threads.plan is not None
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_model_switch_frees_the_old_weights_without_a_full_collection(tiny_dir, monkeypatch):
    """The swap ran gc.collect(): a full collection over every object torch made, 220-330 ms with the GIL
    held, so the window froze at each model switch. The old model's tensors are dropped instead (freed by
    refcount)."""
    import gc
    import weakref

    from engine.session import Session

    session = Session()
    with threads.no_collector_pauses():
        session.load(tiny_dir, device="cpu")
    old = weakref.ref(next(session._loaded.model.parameters()))
    calls: list[object] = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a) or real_collect(0))
    with threads.no_collector_pauses():  # as the app loads: the collector is off
        session.load(tiny_dir, device="cpu")
    assert old() is None  # freed at the swap, not at some later collection
    assert all(a and a[0] < 2 for a in calls), f"a full collection during the switch: {calls}"
    from engine.api import DenoiseSettings, DraftRequest

    result = session.run(
        DraftRequest(before="Hello", max_new_tokens=4, settings=DenoiseSettings(max_steps=2))
    )
    assert result.text is not None  # the new model works after the old one was taken apart
