"""Position signals (lesson 3): sinusoidal encodings, and RoPE on this model's real q and k.

    frequency_ladder(lm, layer)             # theta_i for each of the d_head/2 pairs of that layer's RoPE
    rope_bases(lm)                          # the distinct RoPE bases and the layers that use each
    rotate_pair([3.0, 0.0], math.radians(30))   # -> [2.598, 1.5]
    pair_track(run, layer=3, head=0, pair=0)    # one pair of q before/after RoPE, per position
    relative_scores(lm, q, k, distances, positions)   # q.k depends on distance only

Pairs follow the model's rotate-half layout: pair i is made of dimensions i and
i + d_head/2 of a head, and turns by the angle ``position * theta_i`` with
``theta_i = base ** (-2i / d_head)``. A model may use more than one base (Gemma 3: 10,000 on
its sliding-window layers, 1,000,000 on its global ones): every function that rotates takes
the layer and uses that layer's own rotary module, ``lm.decoder.rope_for(layer)``.
With QK-norm (Gemma), q and k are normalized before RoPE: ``pre_rope`` gives the vector
RoPE actually turns, which is not ``hook_q`` then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch


# --------------------------------------------------------------------------- hooks a page needs

def rope_hook_names(layer: int) -> list[str]:
    """q and k of one layer before and after RoPE: [batch, pos, heads, d_head] each."""
    a = f"blocks.{int(layer)}.attn"
    return [f"{a}.hook_q", f"{a}.hook_rot_q", f"{a}.hook_k", f"{a}.hook_rot_k"]


# --------------------------------------------------------------------------- the frequency ladder

def frequency_ladder(lm, layer: int | None = None) -> torch.Tensor:
    """theta_i for i = 0 .. d_head/2 - 1, radians per position [d_head/2], read from the
    rotary module of ``layer`` (the same buffer the forward pass uses there). ``layer=None``:
    the global layers' module, ``lm.decoder.rope``."""
    rope = lm.decoder.rope if layer is None else lm.decoder.rope_for(int(layer))
    return rope.inv_freq.detach().float().cpu().clone()


@dataclass(frozen=True)
class RopeBase:
    """One RoPE base of a model and the layers that turn their pairs with it."""
    kind: str                    # "sliding" (a sliding-window layer's) or "global"
    base: float                  # b in theta_i = b ** (-2i / d_head)
    layers: tuple[int, ...]      # the layers using it
    window: int | None           # the sliding window of those layers (None: they attend globally)
    reach: int                   # how many positions they can see: the window, else the trained context
    thetas: torch.Tensor         # [d_head/2] read from lm.decoder.rope_for(layers[0])

    @property
    def periods(self) -> torch.Tensor:
        """Tokens per full turn of each pair [d_head/2]."""
        return periods(self.thetas)

    @property
    def slow_pairs(self) -> int:
        """Pairs that never finish a turn within the reach: they tell every distance the
        layer can see apart without ever coming round again."""
        return int((self.periods > self.reach).sum())


def rope_bases(lm) -> list[RopeBase]:
    """The model's RoPE bases, sliding-window layers' first: one entry for a model with one
    base (SmolLM2), two for Gemma 3 (10,000 on the sliding layers, 1,000,000 on the global)."""
    cfg = lm.cfg
    groups: dict[str, list[int]] = {}
    for layer in range(cfg.n_layers):
        groups.setdefault("sliding" if cfg.window(layer) is not None else "global", []).append(layer)
    out = []
    for kind in ("sliding", "global"):
        if kind not in groups:
            continue
        layers = tuple(groups[kind])
        rope = lm.decoder.rope_for(layers[0])
        base = (cfg.rope_theta_sliding or cfg.rope_theta) if kind == "sliding" else cfg.rope_theta
        window = cfg.window(layers[0])
        out.append(RopeBase(kind, float(base), layers, window, window if window is not None else cfg.max_position,
                            rope.inv_freq.detach().float().cpu().clone()))
    return out


def base_of(lm, layer: int) -> RopeBase:
    """The entry of rope_bases(lm) that ``layer`` uses."""
    return next(b for b in rope_bases(lm) if int(layer) in b.layers)


def ladder_formula(d_head: int, base: float) -> torch.Tensor:
    """theta_i = base ** (-2i / d_head), computed from the formula in float64 [d_head/2]."""
    i = torch.arange(d_head // 2, dtype=torch.float64)
    return base ** (-2 * i / d_head)


def periods(thetas: torch.Tensor) -> torch.Tensor:
    """Tokens for one full turn of each pair: 2 pi / theta_i."""
    return 2 * math.pi / thetas.double()


def pair_dims(pair: int, d_head: int) -> tuple[int, int]:
    """The two dimensions of a head that form pair ``pair`` (rotate-half layout)."""
    if not 0 <= pair < d_head // 2:
        raise ValueError(f"pair {pair} outside 0..{d_head // 2 - 1}")
    return pair, pair + d_head // 2


# --------------------------------------------------------------------------- one 2-D rotation

def rotate_pair(xy: Sequence[float] | torch.Tensor, angle: float) -> torch.Tensor:
    """Rotate the 2-D point ``xy`` counter-clockwise by ``angle`` radians:
    (x, y) -> (x cos a - y sin a, x sin a + y cos a). [3, 0] by 30 degrees -> [2.598, 1.5]."""
    x, y = (float(v) for v in xy)
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([x * c - y * s, x * s + y * c], dtype=torch.float64)


def rotate_head(lm, x: torch.Tensor, positions: Sequence[int] | torch.Tensor, layer: int) -> torch.Tensor:
    """Apply layer ``layer``'s own RoPE (lm.decoder.rope_for(layer)) to head vectors
    ``x`` [n, d_head] at ``positions`` [n]."""
    rope = lm.decoder.rope_for(int(layer))
    pos = torch.as_tensor(positions, dtype=torch.long, device=lm.device).reshape(-1)
    cos, sin = rope.angles(pos)                                           # [n, d_head] each
    x = x.detach().float().to(lm.device).reshape(1, -1, 1, x.shape[-1])  # [1, n, 1, d_head]
    return rope.rotate(x, cos, sin)[0, :, 0].cpu()                        # [n, d_head]


def pre_rope(lm, run, layer: int, kind: str = "q") -> torch.Tensor:
    """The q (or k, kind="k") that RoPE turns in ``layer``, [pos, heads, d_head]: hook_q itself,
    or with QK-norm (Gemma) hook_q through the layer's own q_norm (the model's code, called
    again), since the norm comes between the projection and the rotation. Needs
    rope_hook_names(layer)."""
    x = run.cache[f"blocks.{int(layer)}.attn.hook_{kind}"][0]           # [pos, heads, d_head]
    if not lm.cfg.qk_norm:
        return x
    from ..decoder import Hooks
    norm = getattr(lm.decoder.blocks[int(layer)].attn, f"{kind}_norm")
    with torch.no_grad():
        return norm(x.to(lm.device)[None], Hooks(names=()))[0].detach().cpu()


# --------------------------------------------------------------------------- a real q turning

@dataclass(frozen=True)
class PairTrack:
    """One pair of one head's query, at every position of the prompt."""
    layer: int
    head: int
    pair: int
    dims: tuple[int, int]
    theta: float                 # radians per position for this pair
    before: torch.Tensor         # [pos, 2] the pair RoPE turns (hook_q, after QK-norm if any: no position yet)
    after: torch.Tensor          # [pos, 2] the same pair from hook_rot_q
    angle_before: torch.Tensor   # [pos] atan2 of each point, radians
    angle_after: torch.Tensor    # [pos]
    turned: torch.Tensor         # [pos] angle_after - angle_before wrapped to (-pi, pi]
    expected: torch.Tensor       # [pos] position * theta wrapped to (-pi, pi]

    @property
    def max_turn_error(self) -> float:
        """Largest difference, in radians, between how far each position's pair turned and
        position * theta: the difference itself wrapped to (-pi, pi] (so that pi and -pi
        count as equal), over the positions whose pair is long enough to have a direction
        (a pair of zeros has none)."""
        if self.turned.numel() == 0:
            return 0.0
        length = self.before.norm(dim=1)
        has_direction = length > 1e-6 * max(float(length.max()), 1e-30)
        diff = _wrap(self.turned - self.expected).abs()[has_direction]
        return float(diff.max()) if diff.numel() else 0.0


def _wrap(angle: torch.Tensor) -> torch.Tensor:
    """Angles to (-pi, pi]."""
    wrapped = torch.remainder(angle + math.pi, 2 * math.pi) - math.pi
    return torch.where(wrapped == -math.pi, torch.full_like(wrapped, math.pi), wrapped)


def pair_track(lm, run, layer: int, head: int, pair: int, kind: str = "q") -> PairTrack:
    """Pair ``pair`` of query head ``head`` (or key head, with kind="k") in ``layer``, before
    and after RoPE, at every position of ``run`` (needs rope_hook_names(layer))."""
    d_head = lm.cfg.d_head
    i, j = pair_dims(pair, d_head)
    a = f"blocks.{int(layer)}.attn"
    pre = pre_rope(lm, run, layer, kind)[:, head].double()               # [pos, d_head]
    post = run.cache[f"{a}.hook_rot_{kind}"][0, :, head].double()        # [pos, d_head]
    before = torch.stack([pre[:, i], pre[:, j]], dim=-1)                  # [pos, 2]
    after = torch.stack([post[:, i], post[:, j]], dim=-1)                 # [pos, 2]
    ang_b = torch.atan2(before[:, 1], before[:, 0])
    ang_a = torch.atan2(after[:, 1], after[:, 0])
    theta = float(frequency_ladder(lm, layer)[pair])
    positions = torch.arange(before.shape[0], dtype=torch.float64)
    return PairTrack(int(layer), int(head), int(pair), (i, j), theta, before, after, ang_b, ang_a,
                     _wrap(ang_a - ang_b), _wrap(positions * theta))


# --------------------------------------------------------------------------- relative position

@dataclass(frozen=True)
class RelativeScores:
    distances: list[int]            # m - n, the query's position minus the key's
    positions: list[int]            # absolute positions of the key (n); the query sits at n + distance
    scores: torch.Tensor            # [len(distances), len(positions)] rotated q . rotated k / sqrt(d_head)
    unrotated: float                # q . k / sqrt(d_head) with no rotation at all

    @property
    def spread(self) -> torch.Tensor:
        """Per distance, max - min of the score over absolute positions [len(distances)]: ~0."""
        return self.scores.max(dim=1).values - self.scores.min(dim=1).values


def relative_scores(lm, q: torch.Tensor, k: torch.Tensor, distances: Sequence[int],
                    positions: Sequence[int], layer: int) -> RelativeScores:
    """Place the same q [d_head] and k [d_head] at many absolute positions and compute the
    attention score (rotated q . rotated k / sqrt(d_head)) with layer ``layer``'s own RoPE.

    The key sits at position n, the query at n + distance. Each row (one distance) is the
    same number at every n up to float rounding; rows differ from each other.
    """
    d_head = lm.cfg.d_head
    distances, positions = [int(d) for d in distances], [int(p) for p in positions]
    n_d, n_p = len(distances), len(positions)
    key_pos = torch.tensor(positions, dtype=torch.long).repeat(n_d)                        # [n_d * n_p]
    query_pos = key_pos + torch.tensor(distances, dtype=torch.long).repeat_interleave(n_p)
    q_rot = rotate_head(lm, q.reshape(1, -1).expand(len(query_pos), -1), query_pos, layer)  # [n_d * n_p, d_head]
    k_rot = rotate_head(lm, k.reshape(1, -1).expand(len(key_pos), -1), key_pos, layer)
    scores = (q_rot.double() * k_rot.double()).sum(-1) / math.sqrt(d_head)                 # [n_d * n_p]
    unrotated = float((q.double().cpu() * k.double().cpu()).sum() / math.sqrt(d_head))
    return RelativeScores(distances, positions, scores.reshape(n_d, n_p).float(), unrotated)


def score_by_distance(lm, q: torch.Tensor, k: torch.Tensor, max_distance: int, layer: int) -> torch.Tensor:
    """Rotated q . k / sqrt(d_head) for distances 0..max_distance (key at 0) [max_distance + 1],
    with layer ``layer``'s RoPE."""
    res = relative_scores(lm, q, k, range(max_distance + 1), [0], layer)
    return res.scores[:, 0]


def query_and_key(lm, run, layer: int, head: int, q_pos: int, k_pos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The real, un-rotated q of query head ``head`` at ``q_pos`` and the k its key/value head
    (head // group_size) made at ``k_pos`` [d_head] each, as RoPE receives them (after QK-norm
    on a model that has it). Needs rope_hook_names(layer)."""
    q = pre_rope(lm, run, layer, "q")[q_pos, head].float()
    k = pre_rope(lm, run, layer, "k")[k_pos, head // lm.cfg.group_size].float()
    return q, k


# --------------------------------------------------------------------------- sinusoidal (for comparison)

def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed encoding of "Attention Is All You Need" [n_positions, d_model]:
    PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d)).
    This model does not use it; it is here to compare with RoPE."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]                 # [pos, 1]
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # [d/2]
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return pe.float()
