"""A real headless browser for the page tests: Debian's chromium and its
chromium-driver, unpacked into ``.cache/`` by tests/debian.py (no root, never the
machine's own copy), driven through Selenium with the driver given by path.

The browser gets its own fontconfig file naming only the unpacked DejaVu fonts, so
pages render the same text on a machine without fonts or a ``/etc/fonts``.
"""

from __future__ import annotations

import os
from pathlib import Path

import debian
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

#: what is fetched: the browser, its driver, the files both share, and one font
PACKAGES = ["chromium", "chromium-common", "chromium-driver", "fonts-dejavu-core"]
#: the C library must be the loader's own
NOT_FETCHED = {"libc6"}


def _unpacked() -> Path:
    return debian.unpacked("chromium", PACKAGES, needs="usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                           with_libraries=True, not_fetched=NOT_FETCHED)


def chrome(work: Path, *, width: int = 1280, height: int = 900):
    """A Selenium Chrome session on the unpacked chromium, headless, ``width`` x
    ``height``; ``work`` holds its profile and font cache. Skips the test (with
    apt-get's answer) when the packages cannot be fetched."""
    root = _unpacked()
    libraries = sorted({str(path.parent) for path in root.rglob("*.so*")})
    fonts = work / "fonts.conf"
    fonts.write_text(f"""<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig><dir>{root / "usr/share/fonts"}</dir><cachedir>{work / "font-cache"}</cachedir></fontconfig>
""")
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(libraries), "FONTCONFIG_FILE": str(fonts)}
    options = webdriver.ChromeOptions()
    options.binary_location = str(root / "usr/lib/chromium/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", f"--user-data-dir={work / 'profile'}",
                     "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    service = Service(executable_path=str(_driver(root)), env=env)
    return webdriver.Chrome(service=service, options=options)


def _driver(root: Path) -> Path:
    """The unpacked chromedriver: Debian's chromium-driver has shipped it in
    usr/lib/chromium/ (with a link in usr/bin/), and the one fetched on 2026-12-02 in usr/bin/."""
    for place in ("usr/lib/chromium/chromedriver", "usr/bin/chromedriver"):
        if (root / place).is_file():
            return root / place
    raise FileNotFoundError(f"no chromedriver in the unpacked chromium-driver under {root}")


def screenshot_folder(tmp_path_factory, page: str) -> Path:
    """Where a page's tests keep their screenshots (artifacts of the run), said once."""
    folder = tmp_path_factory.getbasetemp() / "screenshots"
    folder.mkdir(exist_ok=True)
    print(f"\nscreenshots of the {page}: {folder}")
    return folder
