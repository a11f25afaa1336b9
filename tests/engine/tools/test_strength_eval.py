"""The rewrite-strength measurement script: its metric, and that it runs end to end on a tiny model."""

from __future__ import annotations

from engine.tools import strength_eval


def test_kept_share_is_the_longest_common_word_subsequence() -> None:
    assert strength_eval.kept_share("a b c d", "a b c d") == 1.0
    assert strength_eval.kept_share("a b c d", "d c b a") == 0.25
    assert strength_eval.kept_share("a b c d", "x a y c z d") == 0.75
    assert strength_eval.kept_share("a b, c", "a b c") == 2 / 3  # punctuation is part of the word
    assert strength_eval.kept_share("", "x") == 0.0


def test_measure_runs_and_checks(tiny_dir) -> None:
    report = strength_eval.measure(
        tiny_dir, seeds=1, strengths=(0.2, 1.0), selections=strength_eval.SELECTIONS[:2]
    )
    assert set(report["summary"]) == {"0.2", "1"}
    assert report["summary"]["0.2"]["runs"] == 2 and len(report["runs"]) == 4
    assert "| 0.2 |" in strength_eval.markdown(report)
    fake = {"summary": {"0.2": {"mean": 0.5}, "0.5": {"mean": 0.6}, "1": {"mean": 0.1}}}
    assert len(strength_eval.check(fake)) == 2
