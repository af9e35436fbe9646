"""Helpers for reading what an AppTest drew."""

from __future__ import annotations

import base64
import json
import numbers
import re
import string

import numpy as np

SMOL, GEMMA = "smollm2-135m", "gemma-3-270m"      # the bundled models' ?model= keys
MODELS = [SMOL, GEMMA]


def chart(at, key: str) -> dict:
    """The plotly JSON of the chart a page drew with ``theme.plot(fig, key=key)``."""
    for element in at.get("plotly_chart"):
        if element.proto.id.endswith("-" + key):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key!r}; have {[e.proto.id.rsplit('-', 1)[-1] for e in at.get('plotly_chart')]}")


def arr(value) -> np.ndarray:
    """A plotly data array from the figure JSON (a plain list or a base64 typed array)."""
    if isinstance(value, dict) and "bdata" in value:
        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return out.reshape([int(n) for n in str(shape).split(",")]) if shape else out
    return np.asarray(value)


def charts(at) -> dict[str, dict]:
    """Every plotly figure the page drew, by widget key."""
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def errors(at) -> list[str]:
    """The messages of any exception the page raised (not its ``st.error`` boxes: error_boxes)."""
    return [e.value for e in at.exception]


def url_value(at, key: str) -> str | None:
    """The app's URL parameter after the last run (None when absent; AppTest keeps a str or a list)."""
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def error_boxes(at) -> list[str]:
    """The text of every ``st.error`` box the page drew (a page that handles its own failure
    shows one instead of raising)."""
    return [e.value for e in at.error]


def subheaders(at) -> list[str]:
    return [s.value for s in at.subheader]


def metric(at, label: str, *, part: bool = False) -> str:
    """The value of the ``st.metric`` labelled ``label`` (``part=True``: whose label holds it)."""
    for m in at.metric:
        if (label in m.label) if part else (m.label == label):
            return m.value
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


FSI, PDI = "\u2068", "\u2069"
_OVERRIDES = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067")     # embeddings, overrides, LRI, RLI
_JSON_ESCAPED = re.compile(r"\\u(20(?:2[a-eA-E]|6[6-9]))")                  # plotly's JSON may write \u202e
_INPUTS = frozenset({"text_area", "text_input", "chat_input"})             # the learner's own text, as typed


def direction_leaks(at) -> list[tuple[str, str]]:
    """Everything the page drew (its protobufs: Markdown, captions, code, alerts, charts' JSON,
    tables' cells, widget labels and options) that holds a direction control able to act
    outside it: an embedding or override (U+202A-U+202E), an LRI or RLI, or isolates
    (U+2068 ... U+2069) that do not balance. The input widgets holding the learner's own
    text are left out. Returns (element type, an excerpt) per leak; [] when nothing leaks."""
    leaks = []
    for node in at._tree:
        proto = getattr(node, "proto", None)
        if proto is None or node.type in _INPUTS:
            continue
        if node.type == "dataframe":             # the cells, not the Arrow buffers' bytes
            frame = node.value
            text = "\n".join(map(str, [*frame.columns, *frame.to_numpy().ravel().tolist()]))
        else:
            text = proto.SerializeToString().decode("utf-8", errors="replace")
        text = _JSON_ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)
        depth = 0
        for i, ch in enumerate(text):
            depth += (ch == FSI) - (ch == PDI)
            if ch in _OVERRIDES or depth < 0:
                leaks.append((node.type, text[max(0, i - 40): i + 40]))
                break
        else:
            if depth:
                leaks.append((node.type, "unbalanced isolates: " + text[:80]))
    return leaks


def text_of(at) -> str:
    """The page's Markdown, captions and subheaders as one string."""
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.subheader])


def says(text: str, template: str, *values, rel: float = 1e-4) -> bool:
    """Whether ``text`` holds ``template.format(*values)``, a printed float allowed to round either
    way when it sits within ``rel`` (relative) of a rounding edge. The page and the test compute the
    same number by different float paths (another CPU's kernels, a run continued from a kept
    prompt's keys and values), so 0.34650001 may print 34.7% on one and 34.6% on the other; any
    wrong figure still fails. Integers must match exactly."""
    pattern, values = "", list(values)
    for literal, field, spec, conversion in string.Formatter().parse(template):
        pattern += re.escape(literal)
        if field is None:
            continue
        assert field == "" and conversion is None, "says(): use bare {} or {:spec} fields"
        value = values.pop(0)
        if isinstance(value, numbers.Integral) or not isinstance(value, numbers.Real):
            shown = {format(value, spec)}
        else:
            eps = rel * max(1.0, abs(float(value)))
            shown = {format(float(value) + d, spec) for d in (-eps, 0.0, eps)}
        pattern += "(?:" + "|".join(re.escape(s) for s in sorted(shown)) + ")"
    assert not values, "says(): more values than fields"
    return re.search(pattern, text) is not None
