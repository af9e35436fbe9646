"""The residual stream as a sum, and which parts of it pushed a token's logit up.

Every block *adds* to the residual stream, so the final vector at a position is a sum:

    resid_final = embed + sum_L ( attn_out[L] + mlp_out[L] )                  (exact)

and each attention output is itself a sum of its heads' writes (hook_result).

On a model with post_norms (Gemma's "sandwich") every sub-layer's output is normalized once
more before it is added: attn_out = RMSNorm_ln1_post(sum_h result_h) and mlp_out likewise,
and hook_attn_out / hook_mlp_out are those normalized writes, so the sum above still holds
exactly (and hook_embed is the embedding after its √d_model scale, what block 0 reads).
The heads' writes (hook_result) come BEFORE ln1_post; with ln1_post's divisor frozen at this
run's value, head h's share of attn_out is  result_h / s_post * w_post  (head_writes), and
those shares add up to hook_attn_out.

The logit of token t is  RMSNorm_final(resid_final) @ W_U[:, t] = (resid_final / s) * w . W_U[:, t]
with s = ln_final.hook_scale, the vector's root-mean-square. The division by s is the
only non-linear step. Holding s FROZEN at the value it had in this run, the logit is
linear in the parts, so it splits exactly:

    logit_t = sum_i  (c_i / s * w) . W_U[:, t]         c_i: embed, each attn_out, each mlp_out

This is direct logit attribution: each part's *direct* push on the logit. It says
nothing about a part's indirect effect through later layers, and with a different s
(say, a part removed) the numbers would change.

    from lesson_model.analysis.attribution import direct_logit_attribution, dla_names
    run = lm.run(text, names=dla_names(lm))
    dla = direct_logit_attribution(lm, run, token=lm.encode(" mat")[0])
    dla.embed + dla.attn.sum() + dla.mlp.sum() == dla.logit   # up to float rounding
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def decomposition_names(lm) -> list[str]:
    """Hook points residual_decomposition reads."""
    names = ["hook_embed", f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"]
    for L in range(lm.cfg.n_layers):
        names += [f"blocks.{L}.hook_attn_out", f"blocks.{L}.hook_mlp_out"]
    return names


def dla_names(lm) -> list[str]:
    """Hook points direct_logit_attribution reads."""
    return decomposition_names(lm) + ["ln_final.hook_scale"]


def head_write_names(lm, layer: int) -> list[str]:
    """Hook points head_writes reads (hook_result is computed only when asked)."""
    names = [f"blocks.{layer}.attn.hook_result"]
    return names + ([f"blocks.{layer}.ln1_post.hook_scale"] if lm.cfg.post_norms else [])


def head_dla_names(lm, layer: int) -> list[str]:
    """Hook points head_logit_attribution reads for one layer."""
    return head_write_names(lm, layer) + ["ln_final.hook_scale"]


def head_writes(lm, run, layer: int, position: int = -1) -> torch.Tensor:
    """What each head of ``layer`` adds to the residual stream at ``position``: [n_heads, d_model].

    Without post-norms that is hook_result (the head's z through its slice of W_O). With
    post_norms the sum of the heads passes ln1_post first, a division by the sum's size s_post
    and a weight w_post; holding s_post frozen at this run's value, the norm is linear, so head
    h's share is result_h / s_post * w_post, and the shares add up exactly to hook_attn_out.
    """
    result = run.cache[f"blocks.{layer}.attn.hook_result"][0, position].double()    # [n_heads, d_model]
    block = lm.decoder.blocks[layer]
    if not hasattr(block, "ln1_post"):
        return result
    s_post = float(run.cache[f"blocks.{layer}.ln1_post.hook_scale"][0, position, 0])
    w_post = block.ln1_post.weight.detach().double().cpu()                          # [d_model]
    return result / s_post * w_post


@dataclass
class Decomposition:
    """One position's final residual vector as a sum of parts."""
    labels: list[tuple[str, int]]   # ("embed", -1), ("attn", 0), ("mlp", 0), ("attn", 1), ...
    parts: torch.Tensor             # [n_parts, d_model], in the order they were added
    final: torch.Tensor             # [d_model] the stream after the last block
    max_error: float                # max |sum(parts) - final|: float rounding only

    @property
    def along_final(self) -> torch.Tensor:
        """Each part's length along the final vector's direction: [n_parts]; they add up to |final|."""
        unit = self.final / self.final.norm()
        return self.parts @ unit

    @property
    def norms(self) -> torch.Tensor:
        """Each part's own length: [n_parts]."""
        return self.parts.norm(dim=-1)


def residual_decomposition(lm, run, position: int = -1) -> Decomposition:
    """The final residual vector at ``position`` as embedding + every attn_out and mlp_out."""
    labels: list[tuple[str, int]] = [("embed", -1)]
    parts = [run.cache["hook_embed"][0, position]]
    for L in range(lm.cfg.n_layers):
        labels += [("attn", L), ("mlp", L)]
        parts += [run.cache[f"blocks.{L}.hook_attn_out"][0, position], run.cache[f"blocks.{L}.hook_mlp_out"][0, position]]
    stacked = torch.stack(parts).double()                                      # [n_parts, d_model]
    final = run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"][0, position].double()   # [d_model]
    return Decomposition(labels=labels, parts=stacked, final=final,
                         max_error=float((stacked.sum(0) - final).abs().max()))


def logit_direction(lm, token: int, other_token: int | None = None) -> torch.Tensor:
    """The unembedding column of ``token`` (minus that of ``other_token``, for a logit
    difference), times the final norm's weight: [d_model]."""
    d = lm.decoder
    direction = d.W_U[:, token].detach().double()
    if other_token is not None:
        direction = direction - d.W_U[:, other_token].detach().double()
    return (direction * d.ln_final.weight.detach().double()).cpu()      # runs keep their tensors on the CPU


@dataclass
class LogitAttribution:
    """Direct logit attribution of one token at one position, under the frozen final-norm scale."""
    token: int
    other_token: int | None      # when set, every number is logit(token) - logit(other_token)
    position: int
    scale: float                 # ln_final.hook_scale at the position (frozen)
    embed: float                 # the embedding's part
    attn: torch.Tensor           # [n_layers] each attention layer's part
    mlp: torch.Tensor            # [n_layers] each MLP's part
    logit: float                 # the model's real logit (or logit difference), from the final vector

    @property
    def total(self) -> float:
        """Sum of all the parts (equals ``logit`` up to float rounding)."""
        return float(self.embed + self.attn.sum() + self.mlp.sum())


def direct_logit_attribution(lm, run, token: int, position: int = -1,
                             other_token: int | None = None) -> LogitAttribution:
    """Each attention layer's and MLP's direct contribution to the logit of ``token``.

    part_i = (c_i / s * w_ln) . W_U[:, token], with s = ln_final.hook_scale FROZEN at its
    value in this run. The parts plus the embedding's part add up exactly to the logit
    (or, with ``other_token``, to logit(token) - logit(other_token)).
    """
    n_layers = lm.cfg.n_layers
    scale = float(run.cache["ln_final.hook_scale"][0, position, 0])
    direction = logit_direction(lm, token, other_token) / scale                 # [d_model]
    attn = torch.stack([run.cache[f"blocks.{L}.hook_attn_out"][0, position] for L in range(n_layers)]).double()
    mlp = torch.stack([run.cache[f"blocks.{L}.hook_mlp_out"][0, position] for L in range(n_layers)]).double()
    embed = run.cache["hook_embed"][0, position].double()
    final = run.cache[f"blocks.{n_layers - 1}.hook_resid_post"][0, position].double()
    return LogitAttribution(token=int(token), other_token=other_token, position=position, scale=scale,
                            embed=float(embed @ direction), attn=(attn @ direction).float(),
                            mlp=(mlp @ direction).float(), logit=float(final @ direction))


def head_logit_attribution(lm, run, token: int, layer: int, position: int = -1,
                           other_token: int | None = None) -> torch.Tensor:
    """Each head of ``layer``: its direct contribution to the logit of ``token``: [n_heads].

    Uses head_writes (each head's write after W_O, and after the post-norm with its scale
    frozen on a model with post_norms); the heads add up to that layer's attention part in
    direct_logit_attribution, under the same frozen scales. Reads head_dla_names(lm, layer).
    """
    scale = float(run.cache["ln_final.hook_scale"][0, position, 0])
    writes = head_writes(lm, run, layer, position)                                  # [n_heads, d_model]
    return (writes @ (logit_direction(lm, token, other_token) / scale)).float()    # [n_heads]
