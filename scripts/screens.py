"""`make screens`: a screenshot of every console page at 1280x720 and 1440x900.

Seeds the demo into a fresh SQLite database under var/screens/, serves it with daphne (DEBUG
off, as `make demo` does), opens every page of tests/e2e/pages.py PAGES in headless Debian
Chromium and writes var/screens/<width>x<height>/<page>.png (var/ is not in git). How to run
it and look at the pictures: docs/screens.md.
"""
from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "var" / "screens"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORTS = ((1280, 720), (1440, 900))


def _env(db: Path) -> dict[str, str]:
    return {"DATABASE_URL": f"sqlite:///{db}", "AGENTOPS_DEBUG": "0", "AGENTOPS_HTTPS": "0",
            "AGENTOPS_STATIC_FINDERS": "1", "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECRET_KEY": secrets.token_urlsafe(50), "DJANGO_SETTINGS_MODULE": "agentops.settings",
            "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _seed(db: Path) -> dict:
    """Migrate a fresh database and seed the demo into it; return the pages' world."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from tests.e2e.pages import demo_world

    return demo_world()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "agentops.asgi:application"], cwd=ROOT, env=dict(os.environ),
        stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the web server exited; see {log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit(f"the web server did not start in 30 s; see {log}")


def _sign_in(context, base: str, role: str):
    from agentops.demo.seed import DEMO_USERS

    page = context.new_page()
    page.set_default_timeout(15_000)
    password = next(p for u, _, p in DEMO_USERS if u == role)
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", role)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def _shoot(base: str, world: dict, *, role: str, full_page: bool, only: str,
           schemes: tuple[str, ...]) -> int:
    from playwright.sync_api import sync_playwright

    from tests.e2e.pages import PAGES, open_page

    written = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for (width, height), scheme in ((v, c) for v in VIEWPORTS for c in schemes):
            folder = OUT / (f"{width}x{height}" + ("" if scheme == "light" else f"-{scheme}"))
            folder.mkdir(parents=True, exist_ok=True)
            pages = {}
            for spec in PAGES:
                who = "" if spec.anonymous else (role if role in spec.roles else spec.roles[0])
                if only and only not in spec.name:
                    continue
                if who not in pages:
                    context = browser.new_context(viewport={"width": width, "height": height},
                                                  color_scheme=scheme)
                    pages[who] = _sign_in(context, base, who) if who else context.new_page()
                page = pages[who]
                open_page(page, base, spec, world)
                page.wait_for_timeout(150)  # let countdowns and focus settle
                page.screenshot(path=str(folder / f"{spec.name}.png"), full_page=full_page)
                written += 1
                print(f"  {folder.name} {spec.name} (as {who or 'signed out'})")
        browser.close()
    return written


def main() -> int:
    """Seed, serve, photograph every page, stop the server; return an exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", default="admin",
                        help="sign in as this demo user where the page allows it (default admin)")
    parser.add_argument("--full-page", action="store_true", help="the whole page, not the fold")
    parser.add_argument("--only", default="", help="only pages whose name contains this")
    parser.add_argument("--scheme", choices=("light", "dark", "both"), default="both",
                        help="the browser's colour preference (the console follows it); "
                             "dark pages go to <size>-dark/ (default both)")
    opts = parser.parse_args()
    if not os.path.exists(CHROMIUM):
        print(f"{CHROMIUM} is missing: run scripts/ensure_chromium.sh", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    os.environ.update(_env(OUT / "screens.sqlite3"))
    sys.path.insert(0, str(ROOT))
    started = time.monotonic()
    world = _seed(OUT / "screens.sqlite3")
    port = _free_port()
    server = _serve(port, OUT / "server.log")
    try:
        n = _shoot(f"http://127.0.0.1:{port}", world, role=opts.role,
                   full_page=opts.full_page, only=opts.only,
                   schemes=("light", "dark") if opts.scheme == "both" else (opts.scheme,))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{n} screenshots in {OUT} ({time.monotonic() - started:.0f} s); see docs/screens.md")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
