"""Shared fixtures: tests run the real ns-3 through the built plugin (no mocks)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def engine_ns():
    """The loaded plugin namespace (fails loudly if cosim was not built)."""
    from cosim import engine

    return engine.load()
