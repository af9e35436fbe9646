"""ui.state's widget helpers that keep a page's variables out of the session: a widget holds
its format_func and callbacks in the session until the session ends (two minutes after the
browser leaves), and a function a page made would keep the page's whole namespace alive with
it (its runs' tensors). No Streamlit run needed."""

from __future__ import annotations

import gc
import weakref

from ui import state

PAGE = '''
class Result:                     # stands for a page's run: tensors, figures, analyses
    pass

result = Result()
texts = ["<bos>", "·cat", "·sat"]
KEY = "_url.step"


def label_of(i):
    return f"{i}: {texts[i]}"


def go_to(n):
    return KEY + str(max(0, n)) + (lambda: texts[0])()      # a nested function reads a global too
'''


def page_namespace() -> tuple[dict, weakref.ref]:
    namespace: dict = {}
    exec(compile(PAGE, "page.py", "exec"), namespace)
    return namespace, weakref.ref(namespace["result"])


def test_a_page_function_keeps_the_page_alive():
    """The leak the helpers are for: the page's own function holds its namespace."""
    namespace, result = page_namespace()
    kept = namespace["go_to"]
    del namespace
    gc.collect()
    assert result() is not None and kept(1) == "_url.step1<bos>"


def test_labelled_gives_the_same_labels_and_holds_only_them():
    namespace, result = page_namespace()
    label = state.labelled(namespace["label_of"], range(3))
    assert [label(i) for i in range(3)] == ["0: <bos>", "1: ·cat", "2: ·sat"]
    del namespace
    gc.collect()
    assert result() is None                       # the page's run is gone; the labels stay
    assert label(2) == "2: ·sat"
    assert state.labelled(None, ["a"]) is str


def test_detached_keeps_only_the_names_it_reads():
    namespace, result = page_namespace()
    go_to = state.detached(namespace["go_to"])
    assert set(go_to.__globals__) == {"KEY", "texts", "__builtins__"}      # not result, label_of, go_to
    del namespace
    gc.collect()
    assert result() is None
    assert go_to(-3) == "_url.step0<bos>" and go_to.__name__ == "go_to"
