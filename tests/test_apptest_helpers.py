"""The test helper that reads printed figures: a number on a rounding edge may round either way,
and any other figure fails."""

from tests._apptest import says


def test_says_allows_only_the_two_roundings_of_an_edge():
    assert says("cut 34.6% off", "cut {:.1%} off", 0.34650001)
    assert says("cut 34.7% off", "cut {:.1%} off", 0.34650001)
    assert not says("cut 34.8% off", "cut {:.1%} off", 0.34650001)
    assert not says("cut 34.6% off", "cut {:.1%} off", 0.3475)      # not on an edge: only 34.8%
    assert says("from 1.23 to 4.56", "from {:.2f} to {:.2f}", 1.2349999, 4.56)
    assert not says("from 1.23 to 4.57", "from {:.2f} to {:.2f}", 1.2349999, 4.56)


def test_says_matches_integers_and_the_words_exactly():
    assert says("of 49,152 entries", "of {:,} entries", 49152)
    assert not says("of 49,153 entries", "of {:,} entries", 49152)
    assert not says("over 49,152 entries", "of {:,} entries", 49152)


def test_the_tests_scan_installed_packages_for_components_once():
    """tests/conftest.py shares Streamlit's per-AppTest scan of installed packages (most of a
    light page test's time): a Streamlit that moved it makes every page test slower, and this
    says where."""
    from streamlit.components.v2 import manifest_scanner

    from tests.conftest import scan_installed_components_once
    assert scan_installed_components_once()
    assert getattr(manifest_scanner.scan_component_manifests, "shared_by_the_tests", False)
    assert manifest_scanner.scan_component_manifests() == manifest_scanner.scan_component_manifests()


def test_the_tests_compile_each_page_script_once():
    """tests/conftest.py hands every AppTest of a process one ScriptCache, as a server does for
    its sessions: a Streamlit that builds it elsewhere makes every page test compile app.py and
    its page again, and this says where."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test

    from tests.conftest import compile_page_scripts_once
    assert compile_page_scripts_once()
    assert app_test.ScriptCache() is app_test.ScriptCache() and isinstance(app_test.ScriptCache(), ScriptCache)
