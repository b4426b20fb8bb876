"""tengen's local web pages: ``tengen play`` (a person against the model).

``web/server.py`` holds what the pages share (aiohttp, static files, JSON errors,
start-up); each page is one module with its API and one HTML file in
``web/static/``. This package imports the engine and, from ``cluster/``, only the
config and the checkpoint loader; the engine never imports it.
"""
