"""tengen: distributed AlphaZero-style self-play training.

The layout's folders are its subpackages: ``tengen.engine`` (rules, search, network,
self-play: the pure core), ``tengen.play`` (a finished model against something: GTP,
matches, records), ``tengen.workers`` and ``tengen.learner`` (the plain classes that
become actors), ``tengen.run`` (what both wirings share: the config schema, the
training loop, the run directory, the single-process run), ``tengen.cluster`` (Ray and
Redis), ``tengen.web`` (the local pages) and ``tengen.testing`` (what the tests and
benchmarks share). The package's own modules are the ``tengen`` commands
(``tengen.cli``). Importing ``tengen`` loads none of them.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["DISTRIBUTION", "QUIET_ENV", "__version__"]

#: the name pip installs tengen by (its extras too: tengen-zero[s3]); "tengen" on PyPI is
#: another project
DISTRIBUTION = "tengen-zero"

#: "1" where a ``tengen`` command runs without ``--verbose``, in its process and every
#: process it starts (engine/backend_start.py reads it). Not TF_CPP_MIN_LOG_LEVEL, which
#: is the user's, or JAX's (it sets 1 on import): a child that read quiet from it showed
#: TensorFlow's start-up on a quiet terminal.
QUIET_ENV = "TENGEN_QUIET"

try:
    __version__ = metadata.version(DISTRIBUTION)
except metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"
