"""Data tests write their cache to a temporary folder, never into the checkout."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path_factory.getbasetemp() / "gnnforge_cache"))
