"""Run Decoder Lab as several app processes behind nginx, with one Redis for the classes.

    .venv/bin/python -m deploy.cluster --apps 4 --port 8080            # http://127.0.0.1:8080
    .venv/bin/python -m deploy.cluster --apps 4 --port 80 --host 0.0.0.0 --public-url http://lab.school.example

Everything but nginx's listening socket is on loopback: N Streamlit processes (app.py, on free
ports), one ``redis-server`` (no persistence: classes live a few hours anyway) and ``nginx``
with deploy/nginx.conf.template (sticky per browser, websocket upgrade, long timeouts). Every
app process gets ``DECODER_LAB_REDIS_URL``, so a teacher on one process and a student on
another share the class, and one cookie secret. Ctrl-C stops them all (each by its own pid).

Needs the Debian packages ``nginx`` and ``redis-server`` (their binaries; no system service
is started or changed). tests/test_deploy.py runs this on loopback.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
ROUTE_COOKIE = "decoder_lab_route"      # nginx.conf.template's sticky route: hashed onto one app process


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def missing() -> list[str]:
    """The binaries this needs and does not find."""
    return [name for name, path in (("nginx", NGINX), ("redis-server", REDIS)) if not Path(path).exists()]


@dataclass
class Cluster:
    base: str                                   # the URL nginx serves
    app_ports: list[int]
    redis_url: str
    run_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)


def upstream_of(base: str, route: str) -> str:
    """The app process (host:port) nginx at ``base`` sends the route cookie value ``route`` to
    (nginx.conf.template names it in each response)."""
    request = urllib.request.Request(f"{base}/_stcore/health", headers={"Cookie": f"{ROUTE_COOKIE}={route}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["X-Decoder-Lab-Upstream"]


def routes(base: str, apps: int, tries: int = 256) -> dict[str, str]:
    """One route cookie value per app process behind nginx at ``base``: {process: value}, so
    that a client can be sent to a chosen process (the consistent hash decides which)."""
    found: dict[str, str] = {}
    for i in range(tries):
        found.setdefault(upstream_of(base, f"route{i}"), f"route{i}")
        if len(found) == apps:
            return dict(sorted(found.items()))
    raise RuntimeError(f"{tries} route cookies reached only {len(found)} of {apps} app processes")


def render_config(run_dir: Path, listen: str, app_ports: list[int]) -> str:
    upstreams = "\n".join(f"        server 127.0.0.1:{port} max_fails=0;" for port in app_ports)
    user = "user root;" if os.geteuid() == 0 and _nobody_missing() else ""
    text = TEMPLATE.read_text("utf-8")
    for key, value in (("{run}", str(run_dir)), ("{listen}", listen), ("{upstreams}", upstreams), ("{user}", user)):
        text = text.replace(key, value)
    return text


def _nobody_missing() -> bool:
    try:
        import pwd
        pwd.getpwnam("nobody")
        return False
    except KeyError:
        return True


def _tail(path: Path | None, n: int = 2000) -> str:
    try:
        return "\n" + path.read_text("utf-8", "replace")[-n:] if path else ""
    except OSError:
        return ""


def _wait_http(url: str, proc: subprocess.Popen, what: str, deadline: float, log: Path | None = None) -> None:
    while True:
        try:
            if urllib.request.urlopen(url, timeout=2).read() == b"ok":
                return
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}" + _tail(log))
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer {url} in time" + _tail(log))
        time.sleep(0.2)


def wait_for_redis(url: str, proc: subprocess.Popen, deadline: float) -> None:
    """Wait until the redis-server ``proc`` answers PING at ``url`` (by ``deadline``, monotonic)."""
    import redis

    while True:
        try:
            if redis.Redis.from_url(url, socket_timeout=1).ping():
                return
        except redis.RedisError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def cluster(apps: int = 2, *, port: int | None = None, host: str = "127.0.0.1", env: dict | None = None,
            public_url: str | None = None, timeout: float = 240, quiet: bool = True):
    """Start redis, ``apps`` app processes and nginx; yield a Cluster; stop them all."""
    gone = missing()
    if gone:
        raise RuntimeError(f"missing {', '.join(gone)}: apt-get install -y nginx redis-server")
    run_dir = Path(tempfile.mkdtemp(prefix="decoder-lab-deploy-"))
    os.chmod(run_dir, 0o711)
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (run_dir / sub).mkdir()
        os.chmod(run_dir / sub, 0o777)      # nginx's workers may run as nobody
    port = port or free_port()
    redis_port = free_port()
    app_ports = [free_port() for _ in range(apps)]
    out = subprocess.DEVNULL if quiet else None
    deadline = time.monotonic() + timeout
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, run_dir, True)
        procs: dict[str, subprocess.Popen] = {}

        def start(name: str, argv: list[str], **kw) -> subprocess.Popen:
            log = open(run_dir / f"{name}.log", "w") if quiet else None
            if log:
                stack.callback(log.close)
            proc = subprocess.Popen(argv, stdout=log or out, stderr=subprocess.STDOUT, **kw)
            procs[name] = proc
            stack.callback(_stop, proc)
            return proc

        redis = start("redis", [REDIS, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(run_dir), "--protected-mode", "yes"])
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        wait_for_redis(redis_url, redis, deadline)

        app_env = {**os.environ, **(env or {}), "DECODER_LAB_REDIS_URL": redis_url}
        if public_url:
            app_env["DECODER_LAB_PUBLIC_URL"] = public_url
        app_env["STREAMLIT_SERVER_COOKIE_SECRET"] = secrets.token_urlsafe(32)   # the same in every process
        for i, app_port in enumerate(app_ports):
            start(f"app{i}", [sys.executable, "-m", "server.serve", "--server.address", "127.0.0.1",
                              "--server.port", str(app_port), "--server.headless", "true",
                              "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                  cwd=ROOT, env=app_env)
        for i, app_port in enumerate(app_ports):
            _wait_http(f"http://127.0.0.1:{app_port}/_stcore/health", procs[f"app{i}"], f"app process {i}", deadline,
                       run_dir / f"app{i}.log")

        conf = run_dir / "nginx.conf"
        conf.write_text(render_config(run_dir, f"{host}:{port}", app_ports), "utf-8")
        nginx = start("nginx", [NGINX, "-p", str(run_dir), "-c", str(conf), "-e", str(run_dir / "nginx-error.log")])
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        base = f"http://{shown}:{port}"
        _wait_http(f"{base}/_stcore/health", nginx, "nginx", deadline, run_dir / "nginx-error.log")
        yield Cluster(base, app_ports, redis_url, run_dir, procs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Decoder Lab: N app processes behind nginx, one Redis.")
    parser.add_argument("--apps", type=int, default=2, help="app processes (each serves a share of the browsers)")
    parser.add_argument("--port", type=int, default=8080, help="nginx's port")
    parser.add_argument("--host", default="127.0.0.1", help="nginx's address (0.0.0.0 for the room's network)")
    parser.add_argument("--public-url", default=None, help="the URL students open (for the join link and QR code)")
    args = parser.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with cluster(args.apps, port=args.port, host=args.host, public_url=args.public_url) as c:
        print(f"Decoder Lab on {c.base} ({args.apps} app processes on {c.app_ports}, Redis {c.redis_url}); "
              f"logs in {c.run_dir}. Ctrl-C stops.", flush=True)
        try:
            while not stop and all(p.poll() is None for p in c.procs.values()):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        dead = [name for name, p in c.procs.items() if p.poll() is not None]
        if dead:
            print(f"stopped: {', '.join(dead)} exited (see {c.run_dir})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
