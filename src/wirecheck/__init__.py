"""wirecheck: validate that a multi-GPU node moves data as fast as its wiring allows.

The library never imports pytest; the pytest plugin lives in the project's fixtures/pytest_wirecheck/.
"""

# The one place the version is written: pyproject.toml reads it (dynamic), `wirecheck --version` prints it and
# every record's header keeps it (versions.wirecheck).
__version__ = "0.1.0"
