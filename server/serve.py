"""Start the app server and its warm-up together: ``python -m server.serve [streamlit run options]``
(what ./lab app and deploy/ run). The warm-up thread (server/warmup.py) loads the bundled models
while Streamlit starts, then computes every lesson's shared results once per model and language,
so the first students are served from warm caches."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from classroom import link
from course import i18n
from server import warmup
from server.heap import tune_malloc

APP = Path(__file__).resolve().parents[1] / "app.py"


def announce(argv: list[str], env: dict | None = None) -> str:
    """The lines ``./lab app`` prints for the teacher: the address students open, and a warning
    with the fix when students cannot reach it (classroom/link.py), in the terminal's language."""
    env = os.environ if env is None else env
    lang = i18n.lang_from_locale((env.get("LC_ALL") or env.get("LANG") or "").split(".")[0])
    base = link.served_base(argv, env)
    lines = [i18n.text_in(lang, "server.students_open", url=base.url + "/")]
    if base.warning:
        lines.append(i18n.text_in(lang, base.warning))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    tune_malloc()
    # A class: many sessions at once. Each forward pass on one torch thread, as many at once as
    # there are cores, served more students per second than one pass at a time on every core
    # (bench/bench_class.py: rerun median 10.8 -> 7.8 s with 25 students on 2 cores).
    os.environ.setdefault("DECODER_LAB_THREADS", "1")
    os.environ.setdefault("DECODER_LAB_FORWARDS", str(os.cpu_count() or 1))
    os.environ.setdefault("DECODER_LAB_SCRIPTS", str(2 * (os.cpu_count() or 1)))
    warmup.start()
    args = sys.argv[1:] if argv is None else argv
    print(announce(args), flush=True)
    sys.argv = ["streamlit", "run", str(APP), *args]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
