"""What the tests and the benchmarks share: real runs set up and broken on purpose.

Imported as ``tengen.testing`` by tests/ and bench/ alike, so that neither reaches into
the other's folder. It may import every part of tengen; nothing in tengen imports it.
"""
