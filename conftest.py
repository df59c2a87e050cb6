"""Root conftest: only lists the wirecheck plugin modules (they live in fixtures/)."""

pytest_plugins = [
    "fixtures.options",
    "fixtures.node",
    "fixtures.placements",
    "fixtures.workers",
    "fixtures.reporting",
    "fixtures.measurements",
]
