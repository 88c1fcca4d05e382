"""The model configuration: one dataclass, validated on construction."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from model.tokenizer import VOCAB_SIZE

#: Dtypes a checkpoint's weights are stored in (they load as float32 whatever they were stored in).
WEIGHT_DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class ModelConfig:
    """Shape of the decoder-only MoE transformer. Every field is checked in `__post_init__`."""

    vocab_size: int = VOCAB_SIZE  # 256 UTF-8 bytes + BOS/EOS/PAD: no tokenizer files to ship
    context: int = 512  # longest sequence (prompt + generated); batch-invariant attention pads keys to it
    d_model: int = 128  # residual width; small enough to train on 2 CPU cores in ~20 minutes
    n_layers: int = 4  # transformer blocks
    n_heads: int = 4  # attention heads; head size d_model / n_heads = 32
    n_experts: int = 8  # E: experts per MoE layer (Switch/GShard-style sparse FFN)
    top_k: int = 2  # K: experts per token (GShard top-2)
    expert_d_ff: int = 256  # hidden width of one SwiGLU expert
    # Given as None, each becomes its default in __post_init__ (a list, an int): read, it is never None.
    moe_layers: list[int] = None  # type: ignore[assignment]  # MoE block layer indices; None = every layer
    dense_d_ff: int = None  # type: ignore[assignment]  # dense FFN d_ff; None = top_k * expert_d_ff
    rope_base: float = 10000.0  # rotary position base (RoFormer)
    norm_eps: float = 1e-6  # RMSNorm epsilon
    tie_embeddings: bool = True  # output head shares the byte embedding: fewer parameters, same quality here
    kernel_tile: int = 4  # rows per fixed-shape GEMM tile in batch_invariant mode (decode: few rows)
    init_std: float = 0.02  # weight init (GPT-2)
    extra: dict = field(default_factory=dict)  # free-form notes for the card; the model never reads them

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")

        for name in ("vocab_size", "context", "d_model", "n_layers", "n_heads", "n_experts", "top_k",
                     "expert_d_ff", "kernel_tile"):
            positive(name)
        if self.vocab_size < VOCAB_SIZE:
            raise ValueError(f"ModelConfig.vocab_size must be at least {VOCAB_SIZE} (bytes + specials), "
                             f"got {self.vocab_size}")
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.n_heads must divide d_model={self.d_model}, got {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"ModelConfig.n_heads: head size d_model/n_heads must be even for rotary "
                             f"positions, got {self.d_model // self.n_heads}")
        if self.top_k > self.n_experts:
            raise ValueError(f"ModelConfig.top_k must be at most n_experts={self.n_experts}, "
                             f"got {self.top_k}")
        if self.moe_layers is None:
            self.moe_layers = list(range(self.n_layers))
        if not isinstance(self.moe_layers, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in self.moe_layers):
            raise ValueError(f"ModelConfig.moe_layers must be a list of layer indices, "
                             f"got {self.moe_layers!r}")
        self.moe_layers = sorted(self.moe_layers)
        if len(set(self.moe_layers)) != len(self.moe_layers):
            raise ValueError(f"ModelConfig.moe_layers has a repeated index: {self.moe_layers}")
        bad = [i for i in self.moe_layers if not 0 <= i < self.n_layers]
        if bad:
            raise ValueError(f"ModelConfig.moe_layers: indices {bad} outside 0..{self.n_layers - 1}")
        if self.dense_d_ff is None:
            self.dense_d_ff = self.top_k * self.expert_d_ff
        positive("dense_d_ff")
        if not isinstance(self.rope_base, (int, float)) or self.rope_base <= 1:
            raise ValueError(f"ModelConfig.rope_base must be a number > 1, got {self.rope_base!r}")
        if not isinstance(self.norm_eps, (int, float)) or not 0 < self.norm_eps < 1:
            raise ValueError(f"ModelConfig.norm_eps must be in (0, 1), got {self.norm_eps!r}")
        if not isinstance(self.init_std, (int, float)) or self.init_std <= 0:
            raise ValueError(f"ModelConfig.init_std must be positive, got {self.init_std!r}")
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"ModelConfig.tie_embeddings must be a bool, got {self.tie_embeddings!r}")
        if not isinstance(self.extra, dict):
            raise ValueError(f"ModelConfig.extra must be a dict, got {type(self.extra).__name__}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def is_moe(self) -> bool:
        return bool(self.moe_layers)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (the card's and trace's `model_config`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        """Inverse of `to_dict`; unknown keys raise a ValueError naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"model config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"model config has unknown fields: {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def dense_control(cls, moe: ModelConfig) -> ModelConfig:
        """The dense model with the same active parameters per token as `moe` (d_ff = K * expert d_ff)."""
        data = moe.to_dict()
        data.update(moe_layers=[], dense_d_ff=moe.top_k * moe.expert_d_ff)
        return cls(**data)
