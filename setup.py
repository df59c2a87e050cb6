"""Only what pyproject.toml cannot say: the wheel carries the validation suite itself.

In a checkout, tests/ and thresholds.yaml sit at the top (the layout operators know); an
installed wheel has no checkout, so the build copies them into the plugin package, where
wirecheck.core.paths finds them.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent


class BuildWithSuite(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "pytest_wirecheck"
        shutil.copy(HERE / "thresholds.yaml", target / "thresholds.yaml")
        shutil.copy(HERE / "thresholds.schema.json", target / "thresholds.schema.json")  # its first line names it
        tests = target / "tests"
        shutil.rmtree(tests, ignore_errors=True)
        shutil.copytree(HERE / "tests", tests, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # The suite's conftest in the wheel: what the checkout's root conftest.py does.
        shutil.copy(HERE / "conftest.py", tests / "conftest.py")


setup(cmdclass={"build_py": BuildWithSuite})
