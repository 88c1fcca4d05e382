"""Where the tests find the repository's files, named once for every test file."""

from __future__ import annotations

from pathlib import Path

#: The repository's root folder.
ROOT = Path(__file__).resolve().parent.parent
#: The example traces the package ships.
EXAMPLES = ROOT / "traces" / "examples"
#: The shipped model's example trace (the README's).
EXAMPLE = EXAMPLES / "example.h5"
#: The example trace of the tiny random Mixtral (`model.hf.tiny`), recorded through the Hugging Face bridge.
MIXTRAL_EXAMPLE = EXAMPLES / "tiny-mixtral-bf16.h5"
#: The trained checkpoint, icons and the Hugging Face folders the tests load.
ASSETS = ROOT / "assets"
#: The small Mixtral folder of docs/engines.md (what the vLLM tests serve).
MIXTRAL_DOCS = ASSETS / "mixtral-docs"
