"""Shared fixtures of the Python test suite (run by `make test`).

The suite tests the installed `freight` package (`make wheel` + pip, or
`maturin develop`), not the source tree: a test of the Python layer alone would
miss the compiled half.
"""

import os
import pathlib
import uuid

import pytest

import freight

REPO = pathlib.Path(__file__).resolve().parents[2]
#: The `freight` command-line tool the cross-language tests run.
FREIGHT_BIN = pathlib.Path(os.environ.get("FREIGHT_BIN", REPO / "target" / "release" / "freight"))


@pytest.fixture
def topic():
    """A topic name no other test (or concurrent run) uses."""
    return f"/pytest_{os.getpid()}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ctx():
    """A shared-memory-only context, shut down after the test."""
    context = freight.Context(local_only=True)
    yield context
    context.shutdown()


@pytest.fixture
def node(ctx):
    n = freight.Node(f"pytest_{uuid.uuid4().hex[:8]}", context=ctx)
    yield n
    n.destroy_node()
