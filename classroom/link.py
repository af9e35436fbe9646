"""The address students open: the join link of a class, and the line ``./lab app`` prints.

Plain Python, no Streamlit (classroom/follow.py and server/serve.py call it). A teacher who
opens the app at ``http://localhost:8501`` must not hand students a loopback link, which opens
each student's own laptop. So the base of the link is, in order:

1. ``DECODER_LAB_PUBLIC_URL`` when it is set (a school's domain, a proxy, deploy/);
2. the address the teacher's browser used, when it is not a loopback one (the teacher opened
   the app by its network address or domain: the students can use the same);
3. the server's own address when it listens on one non-loopback address, or this machine's
   network address with the server's port when it listens on every interface (Streamlit's
   default, and ``./lab app``'s);
4. otherwise the loopback address, with a warning and the one-line fix: the server listens
   only on this computer (``--server.address 127.0.0.1``), or this computer has no network
   address.

The link itself is always ``<base>/?class=CODE``, whichever page the teacher is on.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

PUBLIC_URL_ENV = "DECODER_LAB_PUBLIC_URL"
PARAM = "class"
ALL_INTERFACES = ("", "0.0.0.0", "::", "[::]")
NO_NETWORK = "classroom.link_no_network"      # catalog keys of the warnings
LOOPBACK_ONLY = "classroom.link_loopback"


@dataclass(frozen=True)
class StudentBase:
    """Where students open the app: ``url`` (no trailing slash), and ``warning`` (a catalog key)
    when students on other machines cannot open it."""
    url: str
    warning: str | None = None


def is_loopback(host: str | None) -> bool:
    """True for localhost names and loopback addresses (127.0.0.0/8, ::1)."""
    if not host:
        return True
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def network_address() -> str | None:
    """This machine's address on its network (the interface of its default route), or None.
    Connecting a UDP socket sends nothing; it only asks the kernel which interface it would use."""
    for probe, family in (("10.255.255.255", socket.AF_INET), ("fd00::1", socket.AF_INET6)):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                address = s.getsockname()[0]
        except OSError:
            continue
        if not is_loopback(address) and not ipaddress.ip_address(address).is_unspecified:
            return address
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
    return None if is_loopback(address) else address


def _host_port(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


def student_base(*, public_url: str | None, browser_url: str | None, listen_address: str | None,
                 port: int | None, network: str | None) -> StudentBase:
    """The base of the join link (see the module's docstring for the order).

    ``browser_url``: the URL the teacher's browser shows (st.context.url), or None;
    ``listen_address``: the server's ``server.address`` (None or "" = every interface);
    ``port``: the server's port; ``network``: this machine's network address (network_address())."""
    if public_url and public_url.strip():
        return StudentBase(public_url.strip().split("?", 1)[0].split("#", 1)[0].rstrip("/"))
    scheme, host, browser_port = "http", None, None
    if browser_url:
        parts = urlsplit(browser_url)
        scheme = parts.scheme or "http"
        host = parts.hostname
        try:
            browser_port = parts.port
        except ValueError:
            browser_port = None
        if host and not is_loopback(host):
            return StudentBase(f"{scheme}://{parts.netloc}")
    shown_port = browser_port or port
    loopback = f"{scheme}://{_host_port(host or 'localhost', shown_port)}"
    listen = (listen_address or "").strip()
    if listen not in ALL_INTERFACES:         # one address: students reach it unless it is a loopback one
        if is_loopback(listen):
            return StudentBase(loopback, LOOPBACK_ONLY)
        return StudentBase(f"{scheme}://{_host_port(listen.strip('[]'), port or shown_port)}")
    if network:
        return StudentBase(f"{scheme}://{_host_port(network, port or shown_port)}")
    return StudentBase(loopback, NO_NETWORK)


def join_url(base: str, code: str) -> str:
    """``<base>/?class=CODE``."""
    return f"{base.rstrip('/')}/?{urlencode({PARAM: code})}"


def served_base(argv: list[str], env: dict | None = None) -> StudentBase:
    """What ``./lab app`` prints: the base students open, from the ``streamlit run`` options in
    ``argv`` (``--server.port``, ``--server.address``, also as ``--opt=value``) and the environment
    (``DECODER_LAB_PUBLIC_URL``, ``STREAMLIT_SERVER_PORT``, ``STREAMLIT_SERVER_ADDRESS``)."""
    env = os.environ if env is None else env
    options: dict[str, str] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        if not arg.startswith("--server."):
            continue
        name, _, value = arg[2:].partition("=")
        if not _ and i + 1 < len(args):
            value = args[i + 1]
        options[name] = value
    try:
        port = int(options.get("server.port") or env.get("STREAMLIT_SERVER_PORT") or 8501)
    except ValueError:
        port = 8501
    address = options.get("server.address", env.get("STREAMLIT_SERVER_ADDRESS", ""))
    return student_base(public_url=env.get(PUBLIC_URL_ENV), browser_url=None, listen_address=address,
                        port=port, network=network_address() if address.strip() in ALL_INTERFACES else None)
