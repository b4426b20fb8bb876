"""The pure core of tengen: rules, search, network and match statistics.

Nothing here imports Ray, Redis, Prometheus or the other top-level folders.
"""
