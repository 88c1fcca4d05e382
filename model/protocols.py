"""What the generation loop, the recorder and the experiments ask of a model, and what the experiments
ask of a serving engine, as structural types (`typing.Protocol`).

Three models satisfy `GenerationModel` without importing it: the shipped byte-level
`model.transformer.MoETransformer`, the Hugging Face bridge `model.hf.bridge.HFMoEModel`, and any
test double with the same attributes. The vLLM engines of `model.vllm` (offline and server) satisfy
`Engine`. The loop and the experiments read these attributes directly; a model that lacks one is
wrong, not a variant to guess a default for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from model.routing_policy import RoutingPolicy
    from model.step import StepInputs
    from model.transformer import ForwardOutput
    from model.vllm.outputs import EngineOutput


class ModelConfigLike(Protocol):
    """The configuration facts the loop, the recorder and the experiments read (`model.config.ModelConfig`,
    `model.hf.bridge.HFConfigView`)."""

    @property
    def vocab_size(self) -> int: ...  # V of the logits

    @property
    def context(self) -> int: ...  # longest prompt + completion, in tokens

    @property
    def moe_layers(self) -> list[int]: ...  # model-layer index of each MoE block (L of them)

    @property
    def n_experts(self) -> int: ...  # E

    @property
    def top_k(self) -> int: ...  # K

    @property
    def is_moe(self) -> bool: ...

    def to_dict(self) -> dict: ...


class GenerationModel(Protocol):
    """A model that `model.generate.generate` drives and `model.recorder` records.

    A call routes and computes one forward step: `model(tokens[B,T], policy, kernel_mode=, step=)`
    returns logits [B,T,V] (float32) and one `LayerRouting` per MoE layer, in the caller's layout
    (right padding, positions in each row's own coordinates).
    """

    @property
    def config(self) -> ModelConfigLike: ...

    #: The id written at the pads of short rows; None when the model masks pads itself and reserves
    #: no id (the Hugging Face bridge).
    @property
    def pad_id(self) -> int | None: ...

    #: The id written at pad positions when `pad_id` is None (a model that computes its pads, as
    #: transformers' MoE blocks do); None: `pad_id`.
    @property
    def fill_id(self) -> int | None: ...

    #: The ids that end a row.
    @property
    def eos_ids(self) -> tuple[int, ...]: ...

    #: Whether rows may join a running batch (continuous batching): False when the cache holds one
    #: shared column per step.
    @property
    def admits_arrivals(self) -> bool: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def training(self) -> bool: ...

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...

    def new_cache(self, B: int) -> Any: ...

    def trace_meta(self, kernel_mode: str) -> dict:
        """Root attributes a trace of this model adds to the recorder's (none for the shipped model)."""
        ...

    #: The version of the project's kernels the model runs (`model.kernels`), stored in a trace's
    #: machine fingerprint.
    @property
    def kernel_version(self) -> int: ...

    @property
    def kernel_path(self) -> str:
        """The kernels' version and instruction-set path, as the fingerprint records them (`3-avx512`)."""
        ...

    def use_kernels(self, version: int, isa: str | None = None) -> int:
        """Run the kernels of a trace's `version` (on its instruction-set path `isa` where given and
        available) where this build has them (so a rerun reproduces its bits); returns the version now
        run."""
        ...

    def adapt_policy(self, policy: RoutingPolicy) -> RoutingPolicy:
        """`policy` as this model runs it (a Hugging Face model's own K and score function); ValueError
        for a policy it cannot run."""
        ...

    def vocab(self) -> list[str]:
        """Display string of every logit id, for a trace's `/vocab`."""
        ...

    def __call__(self, tokens: torch.Tensor, policy: RoutingPolicy | None, *, kernel_mode: str = "native",
                 step: StepInputs) -> ForwardOutput: ...


@runtime_checkable
class SnapshotCache(Protocol):
    """A KV cache whose state a generation can keep and resume from (`model.kv_cache.KVCache`)."""

    def compact(self) -> SnapshotCache: ...

    def clone(self) -> SnapshotCache: ...

    def repeat(self, copies: int, context: int | None = None, reuse=None) -> SnapshotCache: ...


class Engine(Protocol):
    """A serving engine that records a batch composition: `model.vllm.offline.OfflineEngine` (vLLM in
    this process) and `model.vllm.server.ServerEngine` (a running vLLM server)."""

    @property
    def name(self) -> str: ...  # the --engine value: "vllm" or "vllm-server"

    @property
    def version(self) -> str: ...

    def check_tokenizer(self, text: str, ids: list[int]) -> None:
        """Raise `EngineError` when the engine tokenizes `text` other than `ids`."""
        ...

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        """Greedy completions of `max_new_tokens + 1` tokens of every prompt, submitted together."""
        ...

    def settings(self) -> dict:
        """What a trace records of how the engine served."""
        ...

    def close(self) -> None: ...
