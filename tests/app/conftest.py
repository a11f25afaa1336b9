"""Fixtures shared by the GUI tests. A module that opens windows marks itself with
`pytestmark = pytest.mark.usefixtures("user_dirs")`, so nothing it does touches the real settings, recovery or
log folders."""

from __future__ import annotations

import pytest

from tests.helpers.gui import isolate_user_dirs


@pytest.fixture
def user_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    isolate_user_dirs(monkeypatch, tmp_path)


@pytest.fixture
def settings(tmp_path):
    """Settings stored in this test's own config folder."""
    from app.config.settings import Settings

    return Settings(tmp_path / "config")
