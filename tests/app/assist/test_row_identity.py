"""A suggestion's rows keep their identity from the first step to the result: the engine names the row each
finished candidate comes from, so the words, confidences and pins the writer watched settle stay with it,
even when two rows read the same or the result comes back reordered."""

from __future__ import annotations

import pytest

from engine.api import Candidate, CandidateView, Result, Span, StepEvent
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, set_text, wait_ready

pytestmark = pytest.mark.usefixtures("user_dirs")

SAME = (" calm", " sea")


class ScriptedRows(FakeEngine):
    """One step with two rows of the same words but different certainty, then a result that keeps only
    row 1 (as an infill's best-first order or the duplicate filter can)."""

    def run(self, request, on_step=None, cancel=None):
        rows = (
            CandidateView(tuple(Span(w, 0.3) for w in SAME), row=0),
            CandidateView(tuple(Span(w, 0.9) for w in SAME), row=1),
            CandidateView((Span(" other words", 0.5),), row=2),
        )
        if on_step is not None:
            on_step(StepEvent(request.request_id, 1, 1, 0, rows, 0.0))
        return Result(
            request.request_id,
            (
                Candidate("".join(SAME), (1, 2), 0.9, row=1),
                Candidate(" other words", (3,), 0.5, row=2),
            ),
        )


def test_a_finished_row_keeps_its_own_confidences_not_those_of_a_row_with_the_same_text(qtbot):
    window = build_window(qtbot, ScriptedRows(texts=["unused"]))
    set_text(window, "The")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    shown = window.assistant.ghost.content.spans
    assert "".join(s.text for s in shown) == "".join(SAME)
    assert [s.confidence for s in shown] == [0.9, 0.9], "row 1's shading, not row 0's"
    assert window.assistant.alternatives == (0, 2)
