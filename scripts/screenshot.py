#!/usr/bin/env python3
"""Headless screenshots (and rendered DOM) of a web page with Debian's chromium, for the Airflow UI.

    scripts/screenshot.py URL OUT.png [--width 1400] [--height 900] [--wait-ms 10000]
    scripts/screenshot.py --airflow http://127.0.0.1:8080 /dags/ds2_testjob OUT.png

``--airflow BASE PATH`` logs in through ``BASE/auth/token/login?next=PATH``, which only works when the
api-server runs with ``[core] simple_auth_manager_all_admins = True`` (``AIRFLOW_ALL_ADMINS=1
scripts/airflow.sh up``); with real logins it answers 403.

The page is rendered with ``--virtual-time-budget``: chromium runs the page's timers in virtual time and
holds virtual time still while requests are in flight, so the single-page app has fetched and drawn its
data when the shot is taken (about 2 s of wall time for a DAG's grid here), without guessing a sleep.
Chromium runs in a session of its own with a temporary profile; on timeout the whole group is killed.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser")
# The set measured (shared/reference/airflow-spark-gx.md) to work headless as root in a container, without a GPU or a desktop bus.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--mute-audio",
)


class ScreenshotError(RuntimeError):
    """Chromium is missing, failed, timed out, or wrote no image."""


def find_chromium() -> str:
    """The chromium executable (``CHROMIUM`` overrides), or a ScreenshotError saying how to install it."""
    override = os.environ.get("CHROMIUM")
    for candidate in (override,) if override else CHROMIUM_CANDIDATES:
        path = shutil.which(candidate)
        if path:
            return path
    raise ScreenshotError(
        "chromium is not installed: 'apt-get install chromium fonts-dejavu-core' (or 'make setup'),"
        " or set CHROMIUM to a Chromium/Chrome executable"
    )


def airflow_login_url(base_url: str, path: str) -> str:
    """The URL that logs in (all-admins mode) and then opens ``path`` of the Airflow UI."""
    if not path.startswith("/"):
        path = "/" + path
    return f"{base_url.rstrip('/')}/auth/token/login?{urlencode({'next': path})}"


def _run_chromium(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="ds2-chromium-") as profile:
        cmd = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        # A session of its own: chromium forks zygote, GPU and renderer processes; a timeout kills them all.
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ScreenshotError(f"chromium did not finish within {timeout_s:.0f} s: {' '.join(args[-2:])}") from None
        finally:
            _kill_group(proc)  # leftovers (crashpad handler) of a finished run
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError):
        pass


def screenshot(
    url: str,
    out_png: str | os.PathLike[str],
    width: int = 1400,
    height: int = 900,
    wait_ms: int = 10000,
    timeout_s: float = 60.0,
) -> Path:
    """Render ``url`` headless at ``width`` x ``height`` and write a PNG; returns its path.

    ``wait_ms`` is chromium's virtual-time budget: how much page time (timers, animations) may pass
    before the shot; network fetches stop the clock, so it is not wall time.
    """
    out = Path(out_png).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)  # never mistake an old image for this one
    res = _run_chromium(
        [f"--screenshot={out}", f"--window-size={width},{height}", f"--virtual-time-budget={int(wait_ms)}", url],
        timeout_s,
    )
    if res.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        tail = "\n".join(res.stderr.strip().splitlines()[-10:])
        raise ScreenshotError(f"chromium (exit {res.returncode}) wrote no screenshot of {url} to {out}:\n{tail}")
    return out


def dump_dom(url: str, width: int = 1400, height: int = 900, wait_ms: int = 10000, timeout_s: float = 60.0) -> str:
    """The page's DOM as serialised after rendering (same virtual-time wait as ``screenshot``)."""
    res = _run_chromium(
        ["--dump-dom", f"--window-size={width},{height}", f"--virtual-time-budget={int(wait_ms)}", url], timeout_s
    )
    if res.returncode != 0:
        tail = "\n".join(res.stderr.strip().splitlines()[-10:])
        raise ScreenshotError(f"chromium (exit {res.returncode}) could not render {url}:\n{tail}")
    return res.stdout


# ---------------------------------------------------------------------------------------------------------
# a small PNG reader, to tell a rendered page from a blank one without an imaging library


@dataclass(frozen=True)
class PngSummary:
    width: int
    height: int
    size_bytes: int
    colors: int  # distinct RGB colours
    background_share: float  # share of pixels with the most frequent colour


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> list[bytes]:
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype = raw[start]
        cur = bytearray(raw[start + 1 : start + 1 + stride])
        if ftype == 1:  # Sub
            for i in range(bpp, stride):
                cur[i] = (cur[i] + cur[i - bpp]) & 0xFF
        elif ftype == 2:  # Up
            cur = bytearray((c + p) & 0xFF for c, p in zip(cur, prev))
        elif ftype == 3:  # Average
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                cur[i] = (cur[i] + ((a + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:  # Paeth
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        elif ftype != 0:
            raise ValueError(f"PNG row {y}: unknown filter type {ftype}")
        rows.append(bytes(cur))
        prev = cur
    return rows


def png_summary(path: str | os.PathLike[str]) -> PngSummary:
    """Size and colour statistics of an 8-bit, non-interlaced RGB/RGBA PNG (what chromium writes)."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos + 8 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, ctype, _, _, interlace = header
    if depth != 8 or interlace or ctype not in (2, 6):
        raise ValueError(f"{path}: only 8-bit non-interlaced RGB/RGBA is read (depth {depth}, colour type {ctype})")
    bpp = 3 if ctype == 2 else 4
    rows = _unfilter(zlib.decompress(b"".join(idat)), width, height, bpp)
    counts: dict[bytes, int] = {}
    for row in rows:
        for i in range(0, len(row), bpp):
            px = row[i : i + 3]
            counts[px] = counts.get(px, 0) + 1
    return PngSummary(width, height, len(data), len(counts), max(counts.values()) / (width * height))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--airflow", metavar="BASE_URL", help="log in to this Airflow (all-admins mode); URL is a UI path")
    p.add_argument("url", help="the page (with --airflow: a path such as /dags/<id>)")
    p.add_argument("out", help="the PNG to write")
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=900)
    p.add_argument("--wait-ms", type=int, default=10000, help="virtual-time budget (default 10000)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before chromium is killed (default 60)")
    a = p.parse_args(argv)
    url = airflow_login_url(a.airflow, a.url) if a.airflow else a.url
    t0 = time.monotonic()
    try:
        out = screenshot(url, a.out, a.width, a.height, a.wait_ms, a.timeout)
    except ScreenshotError as e:
        print(f"screenshot.py: error: {e}", file=sys.stderr)
        return 1
    s = png_summary(out)
    print(
        f"{out}: {s.width}x{s.height}, {s.size_bytes} bytes, {s.colors} colours,"
        f" background {s.background_share:.0%}, {time.monotonic() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
