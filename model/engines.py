"""The engines that can generate a trace's runs, by the name `record --engine` takes and a trace's
`engine` attribute stores (docs/engines.md)."""

from __future__ import annotations

from traces.vocabulary import Vocabulary


class EngineName(Vocabulary):
    """What generates the runs: the project's own loop, or a serving engine (`model.vllm`)."""

    PROJECT = "project"            # the project's generation loop (shipped or Hugging Face model)
    VLLM = "vllm"                  # vLLM's offline engine in this process (`model.vllm.offline`)
    VLLM_SERVER = "vllm-server"    # a running vLLM server (`model.vllm.server`)

    @property
    def serving(self) -> bool:
        """Whether this is a serving engine (its runs cannot be intervened on)."""
        return self is not EngineName.PROJECT
