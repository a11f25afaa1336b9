"""`python -m engine bench --long` runs and reports what the issue asks for (small lengths: seconds, not
minutes)."""

from __future__ import annotations

import json

from engine.tools.bench import main_bench
from engine.tools.longbench import document_of, edited
from engine.tools.tiny import SAMPLE_TEXT, train_tokenizer


def test_documents_have_the_asked_length_and_the_edit_is_near_the_end() -> None:
    tok = train_tokenizer(SAMPLE_TEXT)
    doc = document_of(tok, 300)
    assert abs(len(tok(doc, add_special_tokens=False)["input_ids"]) - 300) <= 2
    later = edited(doc)
    assert later != doc and later[: len(doc) - 260] == doc[: len(doc) - 260]


def test_bench_long_prints_ratios_and_reuses_the_prefix(tiny_dir, capsys) -> None:
    assert (
        main_bench(["--long", "--model", str(tiny_dir), "--lengths", "200,700", "--repeats", "1", "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    rows = report["lengths"]
    assert [r["prefix_tokens"] for r in rows] == [200, 700]
    for r in rows:
        assert r["reused_tokens_repeat"] == r["prompt_tokens"]  # a repeat encodes nothing
        assert r["first_ms"] > 0 and r["repeat_over_first"] > 0 and r["edit_over_first"] > 0
    assert rows[1]["reused_tokens_edit"] == 512  # the 700-token prompt's edit resumes at the 512 boundary
