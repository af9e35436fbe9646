"""Decoder Lab's instrumented decoder: a readable Llama-family model with per-call hooks.

    from lesson_model import load_model
    lm = load_model()                       # bundled SmolLM2-135M-Instruct, offline
    gemma = load_model("gemma-3-270m")      # bundled Gemma 3 270M (base model, reads Chinese)
    run = lm.run("The cat sat")             # capture every hook point
    run.cache["blocks.17.attn.hook_pattern"]
"""

from .decoder import Decoder, DecoderConfig, Hooks, KVCache
from .loading import (BUNDLED, DEFAULT_MODEL, INSTALL_COMMAND, BundledModel, ModelNotInstalledError,
                      ModelPackageDamagedError, cache_dir, load_model)
from .model import LessonModel, Run
from .tokens import Token

__all__ = ["Decoder", "DecoderConfig", "Hooks", "KVCache", "BUNDLED", "DEFAULT_MODEL", "BundledModel",
           "INSTALL_COMMAND", "ModelNotInstalledError", "ModelPackageDamagedError",
           "cache_dir", "load_model", "LessonModel", "Run", "Token"]
