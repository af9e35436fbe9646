"""Unit tests of the ui helpers that need no model: labels, escaping, languages, the run cache."""

from __future__ import annotations

import pytest
import torch

from course.i18n import lang_from_locale, parse_lang, placeholders
from course.text import code_span, md_escape, shorten_to_width, text_width
from course.tokens import axis_labels, cell_label, label, md_label, plot_label, visible
from server.models import CachedRun, RunCache


def test_whitespace_is_made_visible():
    assert visible(" the\n\tx\r") == "·the↵⇥x␍"
    assert visible("a\x00b\u200b") == "a\\x00b<U+200B>"    # a format character as its code point
    assert visible("") == "∅"


def test_labels_are_shortened_and_keep_byte_pieces():
    assert label("<E5 A4>") == "<E5 A4>"
    assert label("x" * 40) == "x" * 15 + "…"


def test_cell_labels_fit_a_width_where_a_chinese_character_counts_two():
    assert text_width("cat") == 3 and text_width("椅子") == 4 and text_width("ｃａｔ") == 6
    assert shorten_to_width("sofa", 4) == "sofa" and shorten_to_width("sofas", 4) == "sof…"
    assert shorten_to_width("一直在等", 5) == "一直…" and shorten_to_width("一直在等", 4) == "一…"
    assert cell_label(" the", 4) == "·the" and cell_label(" <b>bold", 5) == "·&lt;b&gt;…"
    assert all(text_width(shorten_to_width(t, n)) <= n for t in ("pformat", "猫坐在垫子上", "a猫b") for n in range(2, 9))


def test_axis_labels_are_unique_and_escaped():
    labels = axis_labels([" cat", " sat", " cat", "<b>", "<b>"])
    assert labels == ["·cat (0)", "·sat", "·cat (2)", "&lt;b&gt; (3)", "&lt;b&gt; (4)"]
    assert len(set(labels)) == len(labels)


def test_plot_label_escapes_html():
    assert plot_label('<img src=x onerror="alert(1)">') == "&lt;img·src=x·oner…"
    assert "<" not in plot_label("<a href='javascript:x'>")


def test_markdown_escaping():
    text = "**b** [l](u) $x$ :red[r] <img> # h"
    escaped = md_escape(text)
    assert "\\*\\*b\\*\\*" in escaped and "\\[l\\]\\(u\\)" in escaped and "\\$x\\$" in escaped
    assert "\\<img\\>" in escaped and "\\:red\\[r\\]" in escaped
    assert "\n" not in md_escape("a\nb")


def test_code_span_survives_backticks():
    assert code_span("a") == "`a`"
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x") == "`` `x ``"
    assert md_label(" hi") == "`·hi`"


def test_languages_from_locale_and_url():
    assert lang_from_locale("zh-TW") == lang_from_locale("zh-HK") == lang_from_locale("zh-Hant-TW") == "zh-Hant"
    assert lang_from_locale("zh-CN") == lang_from_locale("zh_SG") == lang_from_locale("zh") == "zh-Hans"
    assert lang_from_locale("en-US") == lang_from_locale("fr") == lang_from_locale(None) == "en"
    assert parse_lang("ZH-hant") == "zh-Hant" and parse_lang("zh-tw") == "zh-Hant" and parse_lang("zh-CN") == "zh-Hans"
    assert parse_lang("klingon") is None


def test_placeholders():
    assert placeholders("{n} tokens, {p:.0%} and {{literal}}") == {"n", "p"}


def _run(n_bytes: int) -> CachedRun:
    return CachedRun((1,), last_logits=torch.zeros(n_bytes // 4))


def test_run_cache_is_bounded_by_bytes_and_lru():
    cache = RunCache(budget_bytes=1000)
    calls = []

    def compute(n):
        calls.append(n)
        return _run(400)

    cache.get_or_run("a", lambda: compute("a"))
    cache.get_or_run("b", lambda: compute("b"))
    cache.get_or_run("a", lambda: compute("a"))          # hit: "a" becomes most recent
    cache.get_or_run("c", lambda: compute("c"))          # evicts "b", the least recent
    assert calls == ["a", "b", "c"] and len(cache) == 2 and cache.nbytes == 800
    cache.get_or_run("a", lambda: compute("a"))
    cache.get_or_run("b", lambda: compute("b"))
    assert calls == ["a", "b", "c", "b"]
    cache.get_or_run("huge", lambda: _run(4000))        # larger than the budget: not kept
    assert "huge" not in cache._items and cache.nbytes <= 1000


@pytest.mark.parametrize("forwards", [1, 2])
def test_run_cache_runs_each_key_once_and_at_most_forwards_at_a_time(forwards):
    import threading
    import time

    cache = RunCache(budget_bytes=10_000, forwards=forwards)
    lock, now, most, calls = threading.Lock(), [0], [0], []

    def compute(key):
        with lock:
            calls.append(key)
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        return _run(40)

    keys = [f"k{i % 4}" for i in range(16)]                # 16 sessions asking for 4 runs at once
    results = {}
    threads = [threading.Thread(target=lambda i=i, k=k: results.__setitem__(i, cache.get_or_run(k, lambda: compute(k))))
               for i, k in enumerate(keys)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(calls) == ["k0", "k1", "k2", "k3"], "each run computed once, the others waited for it"
    assert most[0] == min(forwards, 4)
    assert all(results[i] is results[keys.index(k)] for i, k in enumerate(keys)), "all share one result"


def test_run_cache_recovers_when_a_run_fails():
    cache = RunCache(budget_bytes=10_000)

    def boom():
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        cache.get_or_run("a", boom)
    assert cache.get_or_run("a", lambda: _run(40)).last_logits.numel() == 10 and not cache._running


def test_bits_of_gguf_formats():
    from classroom.shell import _bits
    assert [_bits(f) for f in ("Q4_1", "Q4_K", "Q5_0", "Q6_K", "Q8_0", "IQ4_XS", "F16", "BF16", "F32")] == \
        [4, 4, 5, 6, 8, 4, 16, 16, 32]
    assert _bits("TQ1_0") is None


def test_at_most_scripts_lesson_scripts_run_at_once_and_the_rest_wait_their_turn(monkeypatch):
    import threading
    import time

    import server.models as M
    slots = threading.Semaphore(2)
    monkeypatch.setattr(M, "SCRIPTS", 2)
    monkeypatch.setattr(M, "_script_slots", lambda: slots)
    lock, now, most, done = threading.Lock(), [0], [0], []

    def script(i):
        with M.script_slot():
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
            time.sleep(0.05)
            with lock:
                now[0] -= 1
                done.append(i)

    threads = [threading.Thread(target=script, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert most[0] == 2 and sorted(done) == list(range(6))

    def fails():
        with M.script_slot():
            raise RuntimeError("a page's own error, or Streamlit's rerun exception")
    for _ in range(3):                      # a script that ends in an exception gives its slot back
        with pytest.raises(RuntimeError):
            fails()
    assert slots.acquire(timeout=1) and slots.acquire(timeout=1)
    # every slot taken: the teacher's script still runs at once, the others wait
    entered = threading.Event()
    student = threading.Thread(target=lambda: (M.script_slot().__enter__(), entered.set()))
    student.start()
    with M.script_slot(first=True):
        assert not entered.is_set()
    assert not entered.wait(0.2), "a student waits while every slot is taken"
    slots.release()
    assert entered.wait(5)
    student.join()


def test_without_a_limit_scripts_never_wait(monkeypatch):
    import server.models as M
    monkeypatch.setattr(M, "SCRIPTS", 0)
    monkeypatch.setattr(M, "_script_slots", lambda: (_ for _ in ()).throw(AssertionError("no semaphore")))
    with M.script_slot(), M.script_slot():
        pass
