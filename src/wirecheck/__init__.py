"""wirecheck: validate that a multi-GPU node moves data as fast as its wiring allows.

The library never imports pytest; the pytest plugin lives in the project's fixtures/.
"""

__version__ = "0.1.0"
