"""Why a page is a render() function (docs/DESIGN.md, "A lesson page"): a widget holds its
callbacks and format_func in the session until the session ends (two minutes after the
browser leaves). Written at module level, a page's own function keeps the page's whole
namespace alive (that run's tensors and figures); written inside render(), it is a closure
that keeps only the names it reads, and the run's variables go when render() returns."""

from __future__ import annotations

import gc
import weakref

import pytest

pytestmark = pytest.mark.unit

SCRIPT = '''
class Result:                     # stands for a page's run: tensors, figures, analyses
    pass

result = Result()
texts = ["<bos>", "·cat", "·sat"]
KEY = "_url.step"


def go_to(n):
    return KEY + str(max(0, n)) + (lambda: texts[0])()      # a nested function reads a global too
'''

RENDER = '''
class Result:
    pass


KEY = "_url.step"


def render(session):
    result = Result()
    texts = ["<bos>", "·cat", "·sat"]
    session["result"] = weakref.ref(result)

    def go_to(n):
        return KEY + str(max(0, n)) + (lambda: texts[0])()

    session["callback"] = go_to                       # what a widget keeps in the session
    session["format_func"] = lambda i: f"{i}: {texts[i]}"


render(session)
'''


def test_a_module_level_page_function_keeps_the_whole_run_alive():
    """The leak render() removes: the page's own function holds its namespace."""
    namespace: dict = {}
    exec(compile(SCRIPT, "page.py", "exec"), namespace)
    result = weakref.ref(namespace["result"])
    kept = namespace["go_to"]
    del namespace
    gc.collect()
    assert result() is not None and kept(1) == "_url.step1<bos>"


def test_a_render_function_page_keeps_only_what_its_callbacks_read():
    session: dict = {}
    gc.disable()                  # no collection needed: nothing is left in a cycle
    try:
        namespace = {"weakref": weakref, "session": session}
        exec(compile(RENDER, "page.py", "exec"), namespace)
        del namespace
        assert session["result"]() is None               # the run is gone as soon as render returns
        assert session["callback"](-3) == "_url.step0<bos>"
        assert session["format_func"](2) == "2: ·sat"
        held = {name for fn in (session["callback"], session["format_func"])
                for name in fn.__code__.co_freevars}
        assert held == {"texts"}                          # the closures hold what they read, nothing else
    finally:
        gc.enable()
