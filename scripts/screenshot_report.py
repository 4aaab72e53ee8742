"""Render a dpbench HTML report in headless Chromium: screenshot it and check it loads cleanly.

Run: ``python scripts/screenshot_report.py reports/quickstart.html [--png shot.png]``.

Checks (exit 1 on failure, with the reasons):

* Chromium reports no problem while loading the page (no console message at all: the report has
  no script; no failed, refused or network load: a self-contained report loads nothing);
* the rendered DOM (``--dump-dom``) contains every ``<img>`` of the file, each with a ``data:``
  source, and no element loads an external resource.

Needs Chromium (``apt-get install -y chromium``); the test suite does not.
"""

from __future__ import annotations

import argparse
import base64
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--enable-logging=stderr", "--v=0")
#: Chromium log lines about the page itself: any console message (the report has no script, so
#: a console line is a loading problem or a policy violation) and failed or refused loads.
#: Chromium's other log lines (D-Bus, GPU, sandbox in a headless container) are not about the page.
PAGE_PROBLEM = re.compile(r":CONSOLE[:(]|net::ERR_|Failed to load|Not allowed to load|Refused to",
                          re.IGNORECASE)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMG_SRC = re.compile(r"<img\b[^>]*\bsrc=\"([^\"]*)\"", re.IGNORECASE)
EXTERNAL = re.compile(r"\b(?:src|href)=\"(?:https?:)?//", re.IGNORECASE)


def chromium(args: list[str], profile: Path,
             timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with an isolated profile directory."""
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def page_errors(stderr: str) -> list[str]:
    """Lines of Chromium's log that report a problem with the page itself."""
    return [line.strip() for line in stderr.splitlines() if PAGE_PROBLEM.search(line)]


def _is_png(b64: str) -> bool:
    try:
        return base64.b64decode(b64, validate=True).startswith(PNG_SIGNATURE)
    except ValueError:
        return False


def check_dom(html: str, dom: str) -> list[str]:
    """Problems found by comparing the file's images with the rendered DOM."""
    problems = []
    file_imgs, dom_imgs = IMG_SRC.findall(html), IMG_SRC.findall(dom)
    if not file_imgs:
        problems.append("the report has no <img>")
    if len(dom_imgs) != len(file_imgs):
        problems.append(f"the DOM has {len(dom_imgs)} <img>, the file {len(file_imgs)}")
    missing = set(file_imgs) - set(dom_imgs)
    if missing:
        problems.append(f"{len(missing)} image(s) of the file are not in the DOM")
    prefix = "data:image/png;base64,"
    not_data = [s[:60] for s in dom_imgs if not s.startswith(prefix)]
    if not_data:
        problems.append(f"{len(not_data)} image(s) are not embedded PNG data URIs: {not_data[:3]}")
    broken = [i for i, s in enumerate(dom_imgs)
              if s.startswith(prefix) and not _is_png(s[len(prefix):])]
    if broken:
        problems.append(f"image(s) {broken[:5]} do not decode to a PNG")
    external = EXTERNAL.findall(dom)
    if external:
        problems.append(f"{len(external)} external resource reference(s) in the DOM")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path, help="the report HTML file")
    ap.add_argument("--png", type=Path, default=None,
                    help="screenshot to write (default: next to the HTML, same stem, .png)")
    ap.add_argument("--window-size", default="1400,5000", help="WIDTH,HEIGHT in pixels")
    args = ap.parse_args(argv)
    html_path = args.html.resolve()
    if not html_path.is_file():
        print(f"screenshot_report: no file {html_path}", file=sys.stderr)
        return 2
    png = (args.png or html_path.with_suffix(".png")).resolve()
    url = html_path.as_uri()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dpbench-chromium-") as tmp:
        shot = chromium([f"--screenshot={png}", f"--window-size={args.window_size}", url],
                        Path(tmp) / "shot")
        problems += [f"chromium: {e}" for e in page_errors(shot.stderr)]
        if shot.returncode != 0 or not png.is_file():
            problems.append(f"screenshot failed (exit {shot.returncode}): {shot.stderr[-500:]}")
        dump = chromium(["--dump-dom", url], Path(tmp) / "dom")
        problems += [f"chromium: {e}" for e in page_errors(dump.stderr)]
        if dump.returncode != 0:
            problems.append(f"--dump-dom failed (exit {dump.returncode})")
        problems += check_dom(html_path.read_text(encoding="utf-8"), dump.stdout)
    n_img = len(IMG_SRC.findall(dump.stdout))
    if problems:
        print("screenshot_report: FAILED", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print(f"screenshot: {png} ({png.stat().st_size} bytes); {n_img} image(s) in the DOM, "
          "all embedded; no loading errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
