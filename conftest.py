"""Root conftest: switches the wirecheck plugin on for the suite in tests/.

The plugin's code lives in fixtures/pytest_wirecheck/ (installed as the package `pytest_wirecheck`);
its options are registered for every pytest run by an entry point, the rest only here.
"""

pytest_plugins = ["pytest_wirecheck.plugin"]
