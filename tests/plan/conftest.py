"""Planner tests run their timed and planned layers on one thread (stable, and cheap on CI)."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):  # tests/conftest.py
    yield
