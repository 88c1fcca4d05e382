"""Hugging Face MoE causal LMs (transformers 5.x) recorded through the project's own generation loop.

`load_hf` loads a model folder or hub id offline; `HFMoEModel` (`bridge`) wraps it in the protocol
`model.generate.generate` expects; `families` holds one small adapter per router family; `tap` hooks
the router seam; `vocab` names every token id legibly. docs/hf-models.md is the user's page.
transformers is imported only when a model is loaded, so the rest of `model/` runs without it.
"""

from model.hf.families import SUPPORTED, family_of

__all__ = ["SUPPORTED", "family_of"]
