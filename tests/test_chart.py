"""course.figures.chart builds each figure's JSON without plotly's objects: every chart of every page, on
both models, in English and Chinese, laptop and presenter mode, is the JSON plotly's own objects
give for the same calls (course.figures.chart.use_plotly(True) builds them with plotly)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from course import nav
from course.figures import chart
from course.figures import generation as FG
from course.figures import tokens as FK
from course.figures import train as FT
from course.figures import whatif as FW
from tests._apptest import charts, errors


def _charts(open_page, page, plotly: bool, **kw) -> dict:
    chart.use_plotly(plotly)
    try:
        at = open_page(page, **kw)
    finally:
        chart.use_plotly(False)
    assert not errors(at)
    return charts(at)


# Views whose charts take other branches (lines, annotations, greedy colours, other modes).
OTHER_VIEWS = {
    "sampling": [{"temperature": "0", "top_p": "0.5"}, {"top_p": "0.9", "top_k": "5", "temperature": "1.5"}],
    "generation": [{"temperature": "0", "step": "3"}, {"step": "2", "spec": "1"}],
    "heads": [{"measure": "induction", "kv": "mqa", "ctx": "100000"}, {"preset": "gemma", "dtype": "fp32"}],
    "attention": [{"window_mine": "1", "pos": "2"}],
    "tokens": [{"ids": "1", "compare": "unbelievable", "inject": "<|im_start|>"}],
    "position": [{"base": "100", "clock": "5", "qpos": "3", "kpos": "1"}],
    "residual": [{"pos": "1", "lens_cols": "3"}],
    "embeddings": [{"dims": "3"}],
}


def _views(page: str) -> list[dict]:
    return [dict(lang="en"), dict(lang="zh-Hant", params={"present": "1"}),
            *(dict(lang="en", params=params) for params in OTHER_VIEWS.get(page, ()))]


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma-3-270m"])
@pytest.mark.parametrize("page", nav.PAGES)
def test_every_chart_is_plotlys_json(open_page, page, model):
    for kw in _views(page):
        ours = _charts(open_page, page, False, model=model, **kw)
        plotlys = _charts(open_page, page, True, model=model, **kw)
        assert ours.keys() == plotlys.keys()
        for key in ours:
            assert ours[key] == plotlys[key], (kw, key, differences(ours[key], plotlys[key]))


def differences(a, b, path: str = "") -> list[str]:
    """Where two JSON values differ (the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in {'ours' if k in a else 'plotly'}" for k in a.keys() ^ b.keys()]
        for k in a.keys() & b.keys():
            out += differences(a[k], b[k], f"{path}.{k}")
        return out[:8]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")][:8]
    return [] if a == b else [f"{path}: {a!r:.80} != {b!r:.80}"]


# --- figures no default view draws: the same calls with made-up numbers, built both ways --------


def tr(key: str, **kw) -> str:
    return key + "".join(f" {k}={v}" for k, v in sorted(kw.items()))


def both(build) -> tuple[dict, dict]:
    import plotly.io as pio

    def spec(plotly: bool) -> dict:
        chart.use_plotly(plotly)
        try:
            return json.loads(pio.to_json(build().to_dict(), validate=False))
        finally:
            chart.use_plotly(False)
    return spec(False), spec(True)


def _train_history(n: int) -> list:
    return [SimpleNamespace(step=10 * i, loss=4.0 - 0.3 * i, loss_repeat=4.2 - 0.5 * i,
                            induction=[0.1 * i, 0.05 * i], prev_token=[0.2, 0.3 + 0.01 * i]) for i in range(n)]


BUILDS = {
    "timing": lambda: FG.timing_figure(tr, [3.0, 2.5, 2.6], [3.1, 4.0], [5, 1, 1], [5, 6]),
    "candidates_near": lambda: FG.candidates_figure(tr, ["a", "b", "c"], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], 2, False),
    "candidates_far": lambda: FG.candidates_figure(tr, ["a", "b", "c"], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], 0, True),
    "stream": lambda: FW.stream_figure([1.0, 10.0, float("inf"), 3.0], tr),
    "train_loss": lambda: FT.loss_figure(_train_history(4), 100, 3.2, 20, tr),
    "train_score": lambda: FT.score_figure(_train_history(2), 100, None, tr),
    "train_empty": lambda: FT.empty_figure(100, 3.2, tr),
    "train_pattern": lambda: FT.pattern_figure(np.tril(np.full((8, 8), 0.125)), (1, 4, 3), "induction", "L1H0", 30, tr),
    "lengths": lambda: FK.length_histogram([(1, 200), (2, 900), (3, 400)], "t", "x", "y", marks=[(2, "you")]),
}


@pytest.mark.parametrize("name", list(BUILDS))
def test_other_figures_are_plotlys_json(name):
    ours, plotlys = both(BUILDS[name])
    assert ours == plotlys, differences(ours, plotlys)
