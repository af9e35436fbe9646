"""Analyses over a model and its runs: plain functions, one module per idea.

The names docs/DESIGN.md lists are importable from here; everything else from its module
(``from lesson_model.analysis.heads import previous_token_score``). Each module also has a
``*_names`` helper that lists the hook points its functions read, so a caller can capture
just those.
"""

from .attribution import direct_logit_attribution, head_logit_attribution, residual_decomposition
from .embeddings import analogy, cosine_matrix, nearest_neighbours, pca
from .heads import head_measures
from .induction import induction_scores
from .lens import logit_lens
from .neurons import neuron_activations, neuron_output_tokens, neuron_top_activations

__all__ = ["analogy", "cosine_matrix", "direct_logit_attribution", "head_logit_attribution", "head_measures",
           "induction_scores", "logit_lens", "nearest_neighbours", "neuron_activations", "neuron_output_tokens",
           "neuron_top_activations", "pca", "residual_decomposition"]
