"""Figures for lesson 2 (embeddings): row strips, neighbour bars, analogy bars, the PCA map,
cosine heatmaps. Every visible word comes in as an argument; token text is escaped here."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from course.figures import chart as go
from course.figures import style
from course.text import html_escape
from course.tokens import label as label_text
from course.tokens import plot_label

# Word groups for the map: every word, with a leading space, is one token of SmolLM2's
# vocabulary (checked by tests/test_page_embeddings.py). Data, the same in every language.
GROUPS: dict[str, list[str]] = {
    "numbers": "one two three four five six seven eight nine ten".split(),
    "days": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "months": "January February March April May June July August September October November December".split(),
    "countries": "France Germany Italy Japan China Spain Russia England Canada Egypt".split(),
    "capitals": "Paris Berlin Rome Tokyo Beijing Madrid Moscow London Ottawa Cairo".split(),
    "animals": "cat dog horse cow sheep lion tiger bird fish mouse rabbit".split(),
    "colours": "red blue green yellow black white purple orange".split(),
}
MAPS: dict[str, list[str]] = {
    "capitals": ["countries", "capitals"],
    "time": ["numbers", "days", "months"],
    "nature": ["animals", "colours"],
}

# Analogies a - b + c = expected, as one-token words (with a leading space). Which of them
# work on this model is not assumed: the page shows each one's computed rank.
ANALOGIES: list[tuple[str, str, str, str]] = [
    ("king", "man", "woman", "queen"),
    ("Paris", "France", "Germany", "Berlin"),
    ("Paris", "France", "Italy", "Rome"),
    ("walking", "walk", "swim", "swimming"),
    ("cats", "cat", "dog", "dogs"),
    ("bigger", "big", "small", "smaller"),
    ("his", "he", "she", "her"),
    ("went", "go", "see", "saw"),
    ("puppy", "dog", "cat", "kitten"),
    ("pizza", "Italy", "Japan", "sushi"),
    ("father", "man", "woman", "mother"),
]


# Chinese word sets, one per script, for a model that keeps these words whole (Gemma): each word
# is one token without a leading space (tests/test_page_embeddings.py checks it). On a model that
# cuts them into byte pieces (SmolLM2) the English sets above are used in every language.
CHINESE_GROUPS: dict[str, dict[str, list[str]]] = {
    "zh-Hant": {
        "numbers": "一 二 三 四 五 六 七 八 九 十".split(),
        "family": "爸爸 媽媽 哥哥 姐姐 弟弟 妹妹 兒子 女兒 父親 母親".split(),
        "countries": "法國 日本 中國 英國 德國 美國 印度 韓國".split(),
        "capitals": "巴黎 東京 北京".split(),
        "animals": "貓 狗 馬 牛 羊 老虎 鳥 魚 兔子 豬 雞".split(),
        "colours": "紅 藍 綠 黃 黑 白 紫 灰".split(),
    },
    "zh-Hans": {
        "numbers": "一 二 三 四 五 六 七 八 九 十".split(),
        "family": "爸爸 妈妈 哥哥 姐姐 弟弟 妹妹 儿子 女儿 父亲 母亲".split(),
        "countries": "法国 日本 中国 英国 意大利 德国 美国 韩国".split(),
        "capitals": "巴黎 东京 北京 伦敦 罗马".split(),
        "animals": "猫 狗 马 牛 羊 老虎 鸟 鱼 兔子 猪 鸡".split(),
        "colours": "红 蓝 绿 黄 黑 白 紫 灰".split(),
    },
}
CHINESE_MAPS: dict[str, list[str]] = {
    "capitals": ["countries", "capitals"],
    "family": ["numbers", "family"],
    "nature": ["animals", "colours"],
}
CHINESE_ANALOGIES: dict[str, list[tuple[str, str, str, str]]] = {
    "zh-Hant": [
        ("巴黎", "法國", "日本", "東京"), ("北京", "中國", "日本", "東京"), ("東京", "日本", "法國", "巴黎"),
        ("父親", "男人", "女人", "母親"), ("兒子", "男孩", "女孩", "女兒"), ("哥哥", "男", "女", "姐姐"),
        ("王子", "男人", "女人", "公主"), ("弟弟", "哥哥", "姐姐", "妹妹"), ("他", "男", "女", "她"),
        ("皇后", "女人", "男人", "皇帝"), ("貓", "猫", "鱼", "魚"), ("先生", "男人", "女人", "太太"),
    ],
    "zh-Hans": [
        ("巴黎", "法国", "英国", "伦敦"), ("巴黎", "法国", "日本", "东京"), ("东京", "日本", "法国", "巴黎"),
        ("父亲", "男人", "女人", "母亲"), ("爸爸", "男人", "女人", "妈妈"), ("儿子", "男孩", "女孩", "女儿"),
        ("哥哥", "男", "女", "姐姐"), ("王子", "男人", "女人", "公主"), ("弟弟", "哥哥", "姐姐", "妹妹"),
        ("男孩", "男人", "女人", "女孩"), ("猫", "貓", "魚", "鱼"), ("国王", "男人", "女人", "皇后"),
    ],
}


@dataclass(frozen=True)
class WordSet:
    """The words the page's map and analogy buttons use: groups, the maps made of them, the
    analogies, and the prefix a word takes to be its token (" " for English words)."""
    groups: dict[str, list[str]]
    maps: dict[str, list[str]]
    analogies: list[tuple[str, str, str, str]]
    prefix: str


ENGLISH = WordSet(GROUPS, MAPS, ANALOGIES, " ")


def chinese_words(lang: str) -> list[str]:
    """Every word of a script's Chinese set (empty for a language without one)."""
    if lang not in CHINESE_GROUPS:
        return []
    words = [w for group in CHINESE_GROUPS[lang].values() for w in group]
    return words + [w for example in CHINESE_ANALOGIES[lang] for w in example]


def word_set(lang: str, is_one_token: Callable[[str], bool]) -> WordSet:
    """The Chinese set of ``lang``'s script when the model keeps every one of its words whole
    (``is_one_token``), else the English one."""
    words = chinese_words(lang)
    if words and all(is_one_token(w) for w in words):
        return WordSet(CHINESE_GROUPS[lang], CHINESE_MAPS, CHINESE_ANALOGIES[lang], "")
    return ENGLISH


def strip_figure(rows: torch.Tensor, labels: Sequence[str], title: str, x_title: str,
                 colorbar_title: str) -> go.Figure:
    """Embedding rows [n, d] as barcode strips, one row per token (diverging colours, 0 white)."""
    z = rows.float().numpy()
    bound = float(rows.abs().max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, y=list(labels), x=list(range(rows.shape[1])), colorscale=style.DIVERGING, zmid=0,
        zmin=-bound, zmax=bound, colorbar=dict(title=dict(text=colorbar_title, side="right"), thickness=14),
        hovertemplate="%{y}<br>" + x_title + " %{x}: %{z:.3f}<extra></extra>", ygap=6,
    ))
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, showgrid=False)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    return fig


def bar_figure(labels: Sequence[str], values: Sequence[float], title: str, x_title: str,
               highlight: int | None = None, ids: Sequence[int] | None = None, hover_id: str = "id") -> go.Figure:
    """Horizontal bars, best first, values printed on the bars (cosines)."""
    colours = [style.OKABE_ITO[1] if i == highlight else style.OKABE_ITO[0] for i in range(len(values))]
    fig = go.Figure(go.Bar(
        x=list(values), y=list(labels), orientation="h", marker_color=colours,
        text=[f"{v:.3f}" for v in values], textposition="outside", cliponaxis=False,
        customdata=list(ids) if ids is not None else None,
        hovertemplate="%{y}: %{x:.3f}" + (f"<br>{hover_id} %{{customdata}}" if ids is not None else "") + "<extra></extra>",
    ))
    lo = min(0.0, min(values, default=0.0))
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, range=[lo, max(values, default=1.0) * 1.18])
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def map_figure(coords: torch.Tensor, words: Sequence[str], groups: Sequence[str], group_names: dict[str, str],
               axis_titles: Sequence[str], title: str, pairs: Sequence[tuple[int, int]] = ()) -> go.Figure:
    """Labelled points coloured by group (2-D or 3-D), with optional lines between pairs.

    In 2-D every point carries its word, placed so that labels do not overlap. In 3-D the
    words would pile up whichever way the map is turned, so each group gets one label at
    its centre and the words are in the hover text."""
    three = coords.shape[1] >= 3
    shown = [plot_label(w, 14) for w in words]
    offsets = [] if three else place_labels(coords[:, :2], [label_text(w) for w in words])
    fig = go.Figure()
    order = list(dict.fromkeys(groups))
    centres = []
    for g_index, g in enumerate(order):
        idx = [i for i, gg in enumerate(groups) if gg == g]
        pts = coords[idx]
        colour = style.OKABE_ITO[g_index % len(style.OKABE_ITO)]
        name = html_escape(group_names.get(g, g))
        common = dict(mode="markers", name=name, text=[shown[i] for i in idx],
                      hovertemplate="%{text}<extra>" + name + "</extra>",
                      marker=dict(size=9 if not three else 5, color=colour,
                                  symbol=["circle", "square", "diamond", "triangle-up", "x", "cross", "star"][g_index % 7]
                                  if not three else "circle"))
        if three:
            fig.add_scatter3d(x=pts[:, 0].tolist(), y=pts[:, 1].tolist(), z=pts[:, 2].tolist(), **common)
            centres.append((pts[:, :3].mean(dim=0).tolist(), name, colour))
        else:
            fig.add_scatter(x=pts[:, 0].tolist(), y=pts[:, 1].tolist(), **common)
    for a, b in pairs:
        line = dict(mode="lines", showlegend=False, hoverinfo="skip", line=dict(color="#9ca3af", width=1.5))
        if three:
            fig.add_scatter3d(x=[float(coords[a, 0]), float(coords[b, 0])], y=[float(coords[a, 1]), float(coords[b, 1])],
                              z=[float(coords[a, 2]), float(coords[b, 2])], **line)
        else:
            fig.add_scatter(x=[float(coords[a, 0]), float(coords[b, 0])], y=[float(coords[a, 1]), float(coords[b, 1])],
                            **line)
    annotations = []
    for i, (dx, dy) in enumerate(offsets):
        far = (dx * dx + dy * dy) ** 0.5 > 20
        annotations.append(dict(x=float(coords[i, 0]), y=float(coords[i, 1]), text=shown[i], ax=dx, ay=dy,
                                showarrow=far, arrowhead=0, arrowwidth=1, arrowcolor="#9ca3af", standoff=4,
                                font=dict(size=style.FONT_SIZE - 3, color="#1f2937"),
                                xshift=0 if far else dx, yshift=0 if far else -dy))
    fig.update_layout(title=title, legend=dict(itemsizing="constant"), annotations=annotations)
    if three:
        scene_labels = [dict(x=c[0], y=c[1], z=c[2], text=f"<b>{name}</b>", showarrow=True, ax=0, ay=-44,
                             arrowhead=0, arrowwidth=1.5, arrowcolor=colour, font=dict(size=style.FONT_SIZE, color=colour))
                        for c, name, colour in centres]
        def axis(text: str) -> dict:
            return dict(title=dict(text=text, font=dict(size=style.FONT_SIZE - 2)), tickfont=dict(size=style.FONT_SIZE - 5))

        fig.update_layout(scene=dict(xaxis=axis(axis_titles[0]), yaxis=axis(axis_titles[1]), zaxis=axis(axis_titles[2]),
                                     annotations=scene_labels, aspectmode="cube",
                                     camera=dict(eye=dict(x=1.55, y=1.55, z=1.05))),
                          margin=dict(l=0, r=0, b=0))
    else:
        fig.update_xaxes(title=axis_titles[0], zeroline=False)
        fig.update_yaxes(title=axis_titles[1], zeroline=False, scaleanchor="x", scaleratio=1)
    return fig


def place_labels(xy: torch.Tensor, texts: Sequence[str], plot_px: float = 480.0, char_px: float = 8.5,
                 line_px: float = 18.0) -> list[tuple[float, float]]:
    """Pixel offsets (ax, ay) for each point's label so that labels overlap neither each other
    nor the points: a greedy pass, densest points first, over rings of candidate spots.

    ``plot_px`` is the assumed size of the plotting area (the figure stretches, so this is an
    estimate; a wrong guess only makes labels a little closer or farther than needed)."""
    n = xy.shape[0]
    if n == 0:
        return []
    span = float((xy.max(dim=0).values - xy.min(dim=0).values).max().clamp_min(1e-9))
    scale = plot_px / span
    px = [(float(p[0]) * scale, -float(p[1]) * scale) for p in xy]          # screen: y grows downwards
    boxes: list[tuple[float, float, float, float]] = [(x - 5, y - 5, x + 5, y + 5) for x, y in px]   # the markers

    def hits(box) -> float:
        x0, y0, x1, y1 = box
        total = 0.0
        for bx0, by0, bx1, by1 in boxes:
            w, h = min(x1, bx1) - max(x0, bx0), min(y1, by1) - max(y0, by0)
            if w > 0 and h > 0:
                total += w * h
        return total

    crowd = [sum(1 for q in px if abs(q[0] - p[0]) < 60 and abs(q[1] - p[1]) < 30) for p in px]
    order = sorted(range(n), key=lambda i: -crowd[i])
    offsets: list[tuple[float, float]] = [(0.0, -14.0)] * n
    candidates = [(0.0, -14.0), (0.0, 14.0)]
    for radius in (26, 44, 64, 88, 116):
        for k in range(12):
            a = 2 * math.pi * k / 12
            candidates.append((radius * math.cos(a), radius * math.sin(a) * 0.7))
    for i in order:
        w = char_px * max(1, len(texts[i]))
        best, best_cost = candidates[0], None
        for dx, dy in candidates:
            cx, cy = px[i][0] + dx, px[i][1] + dy
            box = (cx - w / 2, cy - line_px / 2, cx + w / 2, cy + line_px / 2)
            cost = hits(box) + 0.02 * (dx * dx + dy * dy) ** 0.5
            if best_cost is None or cost < best_cost:
                best, best_cost = (dx, dy), cost
                if cost < 1.0 and (dx, dy) in candidates[:2]:
                    break
        dx, dy = best
        cx, cy = px[i][0] + dx, px[i][1] + dy
        boxes.append((cx - w / 2, cy - line_px / 2, cx + w / 2, cy + line_px / 2))
        offsets[i] = (dx, dy)
    return offsets


def cell_text(v: float) -> str:
    """A cosine for a heatmap cell, as statistics tables write correlations: without the
    leading zero (.55, −.12, 1), so a cell stays narrow enough for a phone."""
    text = f"{v:.2f}"
    if text in ("1.00", "-1.00"):
        return text[:-3]
    if text in ("-0.00", "0.00"):
        return "0"
    return text.replace("-0.", "−.").replace("0.", ".", 1)


def cosine_heatmap(matrix: torch.Tensor, x_labels: Sequence[str], y_labels: Sequence[str], title: str,
                   x_title: str, y_title: str, colorbar_title: str, show_values: bool = False) -> go.Figure:
    """A cosine-similarity matrix (-1..1, diverging, 0 white), token labels on both axes."""
    z = matrix.float().numpy()
    heat = go.Heatmap(z=z, x=list(x_labels), y=list(y_labels), colorscale=style.DIVERGING, zmid=0, zmin=-1, zmax=1,
                      colorbar=dict(title=dict(text=colorbar_title, side="right"), thickness=14),
                      hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>")
    if show_values:
        heat.update(text=[[cell_text(v) for v in row] for row in z], texttemplate="%{text}",
                    textfont=dict(size=style.FONT_SIZE - 4))
    fig = go.Figure(heat)
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, type="category", tickangle=-45 if len(x_labels) > 8 else 0)
    fig.update_yaxes(title=y_title, type="category", autorange="reversed")
    return fig
