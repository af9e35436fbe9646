"""Run Decoder Lab on one machine as several app processes behind nginx, with one Redis for the
classes, all kept up by supervisord.

    .venv/bin/python -m deploy.cluster --apps 4 --port 8080            # http://127.0.0.1:8080
    .venv/bin/python -m deploy.cluster --apps 4 --port 80 --host 0.0.0.0 --public-url http://lab.school.example

Everything but nginx's listening socket is on loopback: N Streamlit processes (app.py, on free
ports), one ``redis-server`` and ``nginx`` with deploy/nginx.conf.template (sticky per browser,
websocket upgrade, long timeouts, a per-address request and connection limit). They run under
one ``supervisord`` (the ``supervisor`` package, pinned in requirements.txt), which restarts any
of them that exits or is killed (an app process killed for memory, say) while the others go on:
nginx sends that process's browsers to a live process meanwhile, and they reconnect there.
Redis keeps the classes in an append-only file in the run folder, so a restarted Redis still
has every class. Ctrl-C or SIGTERM stops them all (supervisord stops each in turn).

Every app process gets ``DECODER_LAB_REDIS_URL``, so a teacher on one process and a student on
another share the class, and one cookie secret.

Needs the Debian packages ``nginx`` and ``redis-server`` (their binaries; no system service
is started or changed). tests/test_deploy.py runs this on loopback.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import xmlrpc.client
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
# The supervisor installed beside this Python (requirements.txt), else one on the PATH.
SUPERVISORD = next((str(p) for p in (Path(sys.executable).parent / "supervisord",) if p.exists()),
                   shutil.which("supervisord") or "supervisord")
ROUTE_COOKIE = "decoder_lab_route"      # nginx.conf.template's sticky route: hashed onto one app process
SOCKET = "supervisor.sock"              # supervisord's control socket, in the run folder


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def missing() -> list[str]:
    """The programs this needs and does not find."""
    return [name for name, path in (("nginx", NGINX), ("redis-server", REDIS), ("supervisord", SUPERVISORD))
            if not Path(path).exists() and not shutil.which(path)]


def supervisor_rpc(run_dir: Path) -> xmlrpc.client.ServerProxy:
    """supervisord's XML-RPC interface over its unix socket in ``run_dir`` (what supervisorctl uses)."""
    from supervisor.xmlrpc import SupervisorTransport

    return xmlrpc.client.ServerProxy("http://127.0.0.1",
                                     transport=SupervisorTransport(None, None, f"unix://{run_dir / SOCKET}"))


@dataclass
class Cluster:
    base: str                                   # the URL nginx serves
    app_ports: list[int]
    redis_url: str
    run_dir: Path
    supervisor: subprocess.Popen                # supervisord, the parent of all the others

    def processes(self) -> dict[str, dict]:
        """supervisord's view of each program: {name: {"state": "RUNNING", "pid": ..., ...}}."""
        return {info["name"]: {**info, "state": info["statename"]}
                for info in supervisor_rpc(self.run_dir).supervisor.getAllProcessInfo()}

    def pids(self) -> dict[str, int]:
        """{program: pid} of the programs running now (0 for one that is not)."""
        return {name: info["pid"] for name, info in self.processes().items()}

    def pid(self, name: str) -> int:
        return self.pids()[name]

    def wait_running(self, name: str, timeout: float = 240, *, other_than: int = 0) -> int:
        """Wait until supervisord reports ``name`` RUNNING (with a pid other than ``other_than``,
        for a restart) and, for an app process, until it answers its health check; its pid."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.processes()[name]
            if info["state"] == "RUNNING" and info["pid"] not in (0, other_than):
                if not name.startswith("app"):
                    return info["pid"]
                port = self.app_ports[int(name[3:])]
                if _answers(f"http://127.0.0.1:{port}/_stcore/health"):
                    return info["pid"]
            if info["state"] == "FATAL" or time.monotonic() > deadline:
                raise RuntimeError(f"{name} is {info['state']}, not running" + _tail(self.run_dir / f"{name}.log"))
            time.sleep(0.2)


def access_log(run_dir: Path) -> Path:
    return run_dir / "nginx-access.log"


def upstream_of(c: Cluster, route: str, timeout: float = 10) -> str:
    """The app process (host:port) that nginx sends the route cookie value ``route`` to. nginx
    does not tell clients (no internal address in a response): this reads its access log,
    which notes the upstream of each request."""
    probe = uuid.uuid4().hex
    request = urllib.request.Request(f"{c.base}/_stcore/health?probe={probe}",
                                     headers={"Cookie": f"{ROUTE_COOKIE}={route}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        response.read()
    deadline = time.monotonic() + timeout
    while True:                 # nginx writes the line once the response is sent: soon after
        for line in reversed(access_log(c.run_dir).read_text("utf-8", "replace").splitlines()):
            if f"probe={probe}" in line:
                return answered_by(line)
        if time.monotonic() > deadline:
            raise RuntimeError(f"no access log line for probe {probe}")
        time.sleep(0.05)


def answered_by(line: str) -> str:
    """The upstream that answered the request of one access log line (the last one nginx tried:
    "upstream=127.0.0.1:1, 127.0.0.1:2" after a failover)."""
    found = re.search(r"upstream=([^\s,]+(?:, [^\s,]+)*)", line)
    if not found:
        raise ValueError(f"no upstream in {line!r}")
    return found.group(1).split(", ")[-1]


def routes(c: Cluster, apps: int, tries: int = 256) -> dict[str, str]:
    """One route cookie value per app process behind nginx: {process: value}, so that a client
    can be sent to a chosen process (the consistent hash decides which)."""
    found: dict[str, str] = {}
    for i in range(tries):
        found.setdefault(upstream_of(c, f"route{i}"), f"route{i}")
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


def _ini(value: str) -> str:
    """A value for supervisord's config file: its own %(name)s expansion escaped."""
    return str(value).replace("%", "%%")


def _command(argv: list[str]) -> str:
    return _ini(" ".join(shlex.quote(str(a)) for a in argv))


def _environment(env: dict[str, str]) -> str:
    for key, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or '"' in value or "\n" in value:
            raise ValueError(f"environment variable {key} cannot be passed through supervisord's config")
    return _ini(",".join(f'{key}="{value}"' for key, value in env.items()))


@dataclass
class Program:
    name: str
    argv: list[str]
    priority: int
    env: dict[str, str] | None = None
    cwd: Path | None = None
    startsecs: int = 1
    stopsignal: str = "TERM"
    stopwaitsecs: int = 20


def render_supervisor_config(run_dir: Path, programs: list[Program]) -> str:
    """supervisord's config: it runs in the foreground (the caller is its parent), logs and its
    control socket in ``run_dir``, and restarts any program that exits, whatever its status.
    A program that keeps dying at start (startretries in a row, each sooner than its startsecs)
    is given up (FATAL) and named in supervisord.log; the others stay up."""
    run = _ini(str(run_dir))
    parts = [f"""[supervisord]
nodaemon=true
silent=true
logfile={run}/supervisord.log
pidfile={run}/supervisord.pid
childlogdir={run}
loglevel=info

[unix_http_server]
file={run}/{SOCKET}
chmod=0700

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{run}/{SOCKET}
"""]
    for p in programs:
        lines = [f"[program:{p.name}]", f"command={_command(p.argv)}", f"priority={p.priority}",
                 "autostart=true", "autorestart=true", f"startsecs={p.startsecs}", "startretries=10",
                 f"stopsignal={p.stopsignal}", f"stopwaitsecs={p.stopwaitsecs}",
                 "stopasgroup=true", "killasgroup=true",
                 f"stdout_logfile={run}/{p.name}.log", "stdout_logfile_maxbytes=50MB",
                 "stdout_logfile_backups=3", "redirect_stderr=true"]
        if p.cwd:
            lines.append(f"directory={_ini(str(p.cwd))}")
        if p.env:
            lines.append(f"environment={_environment(p.env)}")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def _tail(path: Path | None, n: int = 2000) -> str:
    try:
        return "\n" + path.read_text("utf-8", "replace")[-n:] if path else ""
    except OSError:
        return ""


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).read() == b"ok"
    except OSError:
        return False


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def _state(run_dir: Path, name: str) -> str | None:
    """supervisord's state of one program (None while its socket does not answer yet)."""
    try:
        return supervisor_rpc(run_dir).supervisor.getProcessInfo(name)["statename"]
    except (OSError, xmlrpc.client.Error):
        return None


def _wait_started(supervisor: subprocess.Popen, run_dir: Path, name: str, answers, deadline: float,
                  log: Path | None = None) -> None:
    """Wait until ``answers()``; fail at once, with the end of its log, when supervisord exits or
    gives the program up (it kept exiting at start: a port taken, say), else at ``deadline``."""
    log = log or run_dir / f"{name}.log"
    while not answers():
        if supervisor.poll() is not None:
            raise RuntimeError(f"supervisord exited with status {supervisor.returncode}"
                               + _tail(run_dir / "supervisord.log") + _tail(run_dir / "supervisord.out"))
        if _state(run_dir, name) == "FATAL":
            raise RuntimeError(f"{name} kept exiting at start; supervisord gave it up" + _tail(log))
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer in time" + _tail(log))
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


def _stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def cluster(apps: int = 2, *, port: int | None = None, host: str = "127.0.0.1", env: dict | None = None,
            public_url: str | None = None, timeout: float = 240, quiet: bool = True, run_dir: Path | None = None):
    """Start supervisord with redis, ``apps`` app processes and nginx; yield a Cluster once all
    answer; stop them all. ``run_dir``: where the configs, logs and Redis's append-only file go
    (kept afterwards); by default a temporary folder, removed at the end."""
    gone = missing()
    if gone:
        raise RuntimeError(f"missing {', '.join(gone)}: apt-get install -y nginx redis-server; "
                           "pip install -r requirements.txt -c constraints.txt (supervisor)")
    keep = run_dir is not None
    run_dir = Path(run_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="decoder-lab-deploy-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(run_dir, 0o711)
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (run_dir / sub).mkdir(exist_ok=True)
        os.chmod(run_dir / sub, 0o777)      # nginx's workers may run as nobody
    port = port or free_port()
    redis_port = free_port()
    app_ports = [free_port() for _ in range(apps)]
    deadline = time.monotonic() + timeout
    redis_url = f"redis://127.0.0.1:{redis_port}/0"

    # Redis: classes in an append-only file (fsync every second) in the run folder, so a restarted
    # redis-server reads every class back; no RDB snapshots.
    programs = [Program("redis", [REDIS, "--port", redis_port, "--bind", "127.0.0.1", "--protected-mode", "yes",
                                  "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                                  "--dir", run_dir], priority=10)]
    app_env = {**(env or {}), "DECODER_LAB_REDIS_URL": redis_url}
    if public_url:
        app_env["DECODER_LAB_PUBLIC_URL"] = public_url
    app_env["STREAMLIT_SERVER_COOKIE_SECRET"] = secrets.token_urlsafe(32)   # the same in every process
    for i, app_port in enumerate(app_ports):
        programs.append(Program(
            f"app{i}", [sys.executable, "-m", "server.serve", "--server.address", "127.0.0.1",
                        "--server.port", app_port, "--server.headless", "true",
                        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            priority=20, env=app_env, cwd=ROOT, startsecs=5))
    conf = run_dir / "nginx.conf"
    conf.write_text(render_config(run_dir, f"{host}:{port}", app_ports), "utf-8")
    programs.append(Program("nginx", [NGINX, "-p", run_dir, "-c", conf, "-e", run_dir / "nginx-error.log"],
                            priority=30, stopwaitsecs=10))
    sconf = run_dir / "supervisord.conf"
    sconf.write_text(render_supervisor_config(run_dir, programs), "utf-8")

    with ExitStack() as stack:
        if not keep:
            stack.callback(shutil.rmtree, run_dir, True)
        out = open(run_dir / "supervisord.out", "w") if quiet else None
        if out:
            stack.callback(out.close)
        supervisor = subprocess.Popen([SUPERVISORD, "-c", str(sconf)], stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)     # Ctrl-C reaches it from us, once
        stack.callback(_stop, supervisor)
        _wait_started(supervisor, run_dir, "redis", lambda: _redis_answers(redis_url), deadline)
        for i, app_port in enumerate(app_ports):
            _wait_started(supervisor, run_dir, f"app{i}",
                          lambda: _answers(f"http://127.0.0.1:{app_port}/_stcore/health"), deadline)
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        base = f"http://{shown}:{port}"
        _wait_started(supervisor, run_dir, "nginx", lambda: _answers(f"{base}/_stcore/health"), deadline,
                      run_dir / "nginx-error.log")
        yield Cluster(base, app_ports, redis_url, run_dir, supervisor)


def changes(before: dict[str, dict], now: dict[str, dict]) -> list[str]:
    """Lines for the console: each program whose state or pid changed between two looks."""
    lines = []
    for name, info in now.items():
        old = before.get(name, {})
        if (old.get("state"), old.get("pid")) != (info["state"], info["pid"]):
            pid = f" (pid {info['pid']})" if info["pid"] else ""
            lines.append(f"{name}: {info['state']}{pid}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Decoder Lab: N app processes behind nginx, one Redis, "
                                                 "kept up by supervisord.")
    parser.add_argument("--apps", type=int, default=2, help="app processes (each serves a share of the browsers)")
    parser.add_argument("--port", type=int, default=8080, help="nginx's port")
    parser.add_argument("--host", default="127.0.0.1", help="nginx's address (0.0.0.0 for the room's network)")
    parser.add_argument("--public-url", default=None, help="the URL students open (for the join link and QR code)")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="where logs and Redis's append-only file go, kept afterwards (classes then "
                             "survive a restart of the whole cluster); a temporary folder by default")
    args = parser.parse_args(argv)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with cluster(args.apps, port=args.port, host=args.host, public_url=args.public_url, run_dir=args.run_dir) as c:
        print(f"Decoder Lab on {c.base} ({args.apps} app processes on {c.app_ports}, Redis {c.redis_url}); "
              f"logs in {c.run_dir}. A process that exits is restarted. Ctrl-C stops.", flush=True)
        seen = c.processes()
        try:
            while not stop and c.supervisor.poll() is None:
                time.sleep(1)
                try:
                    now = c.processes()
                except (OSError, xmlrpc.client.Error):
                    continue
                for line in changes(seen, now):
                    print(line, flush=True)
                seen = now
        except KeyboardInterrupt:
            pass
        if c.supervisor.poll() is not None:
            print(f"supervisord exited with status {c.supervisor.returncode} (see {c.run_dir})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
