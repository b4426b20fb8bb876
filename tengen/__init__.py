"""tengen: distributed AlphaZero-style self-play training.

The layout's folders are its subpackages: ``tengen.engine`` (rules, search, network:
the pure core), ``tengen.workers`` and ``tengen.learner`` (the plain classes that
become actors), ``tengen.cluster`` (config, Redis, Ray, the drivers, the CLI).
Importing ``tengen`` loads none of them.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["DISTRIBUTION", "__version__"]

#: the name pip installs tengen by (its extras too: tengen-zero[s3]); "tengen" on PyPI is
#: another project
DISTRIBUTION = "tengen-zero"

try:
    __version__ = metadata.version(DISTRIBUTION)
except metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"
