"""classroom/link.py: the join link students can open, whatever address the teacher used."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from classroom import link

pytestmark = pytest.mark.unit


def base(**kw):
    args = {"public_url": None, "browser_url": "http://localhost:8501/attention?lang=en", "listen_address": None,
            "port": 8501, "network": "192.168.1.20"}
    args.update(kw)
    return link.student_base(**args)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.1.2.3", "[::1]", "app.localhost"])
def test_a_teacher_on_loopback_hands_out_the_network_address_never_loopback(host):
    got = base(browser_url=f"http://{host}:8501/attention/?lang=zh-Hant&prompt=x")
    assert got == link.StudentBase("http://192.168.1.20:8501")
    assert not link.is_loopback(urlsplit(got.url).hostname)


def test_the_public_url_wins_and_loses_its_query():
    got = base(public_url=" https://lab.school.example/decoder/?x=1#top ")
    assert got == link.StudentBase("https://lab.school.example/decoder")
    assert link.join_url(got.url, "K7MP2Q") == "https://lab.school.example/decoder/?class=K7MP2Q"


def test_a_teacher_on_a_network_address_or_domain_shares_that_address():
    assert base(browser_url="http://10.0.0.7:8501/heads?lang=en") == link.StudentBase("http://10.0.0.7:8501")
    assert base(browser_url="https://lab.example.org/tokens") == link.StudentBase("https://lab.example.org")


def test_loopback_only_server_warns_with_the_fix():
    got = base(listen_address="127.0.0.1")
    assert got.warning == link.LOOPBACK_ONLY and got.url == "http://localhost:8501"
    assert base(listen_address="localhost").warning == link.LOOPBACK_ONLY


def test_a_server_on_one_network_address_shares_it():
    assert base(listen_address="10.1.2.3") == link.StudentBase("http://10.1.2.3:8501")
    assert base(listen_address="fe80::1", port=9000) == link.StudentBase("http://[fe80::1]:9000")


def test_no_network_address_warns():
    got = base(network=None)
    assert got.warning == link.NO_NETWORK and got.url == "http://localhost:8501"


@pytest.mark.parametrize("listen", [None, "", "0.0.0.0", "::"])
def test_every_interface_counts_as_reachable(listen):
    assert base(listen_address=listen).warning is None


def test_the_join_link_is_the_home_page_with_the_code_whatever_the_page():
    got = base(browser_url="http://10.0.0.7:8501/attention/?lang=en&class=OLDOLD")
    assert link.join_url(got.url, "ABC234") == "http://10.0.0.7:8501/?class=ABC234"


def test_what_lab_app_prints_reads_the_port_and_address_options():
    env = {}
    got = link.served_base(["--server.port", "8600", "--browser.gatherUsageStats", "false"], env)
    assert got.url.endswith(":8600") and (got.warning is None) == (link.network_address() is not None)
    assert link.served_base(["--server.address=127.0.0.1", "--server.port=8601"], env) == \
        link.StudentBase("http://localhost:8601", link.LOOPBACK_ONLY)
    assert link.served_base([], {"DECODER_LAB_PUBLIC_URL": "http://lab.example/"}) == link.StudentBase("http://lab.example")
    assert link.served_base(["--server.address", "10.9.8.7"], {"STREAMLIT_SERVER_PORT": "8700"}) == \
        link.StudentBase("http://10.9.8.7:8700")


def test_this_machines_network_address_is_not_loopback():
    address = link.network_address()
    assert address is None or not link.is_loopback(address)


def test_lab_app_prints_where_students_connect_in_the_terminals_language():
    from server.serve import announce
    out = announce(["--server.address", "127.0.0.1", "--server.port", "8611"], {"LANG": "zh_TW.UTF-8"})
    first, warning = out.splitlines()
    assert "http://localhost:8611/" in first and first.startswith("學生開啟")
    assert "--server.address 0.0.0.0" in warning
    out = announce(["--server.port", "8612"], {"DECODER_LAB_PUBLIC_URL": "https://lab.example.org", "LANG": "C.UTF-8"})
    assert out == "Students open https://lab.example.org/ (start a class in the sidebar's “Class” panel: " \
                  "its join link and QR code go to this address)."
