"""The lab: code that uses the model to answer questions about it.

- `experiments`: the recorded experiments (E0-E7, quality, continuous batching) behind
  `moe-inspector record`, each writing one trace.
- `counterfactual`: the reruns and the complete event search behind `moe-inspector explain`.
- `engine_reference`: what `explain` says of a serving engine's trace (its runs against each other,
  then against the transformers reference).

It imports `model` and `traces`, never Qt or `inspector` (import contracts in pyproject.toml).
"""
