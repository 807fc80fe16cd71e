"""The ``router``, ``router_url`` and ``make_router`` fixtures these tests use
live in ``tests/conftest.py`` (shared with the GUI tests); helpers for
``elvind`` subprocesses are in ``process_util``, for federated routers in
``federation_util``."""
