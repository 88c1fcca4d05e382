"""What every experiment shares: the loaded models, the request pool, and a trace being written.

A `Recording` wraps one `traces.TraceWriter` on a writer thread (`traces.background`): each `record`
call generates one batch composition under one condition, hands the recorder's arrays to the writer
thread (which compresses and flushes the run, then marks it complete) and returns a small `RunRecord`
of what the tables need, while the next composition generates. Closing waits for the queued runs,
so an interrupt between two runs loses nothing; one during a write leaves that run marked incomplete.
A write that fails (disk full) raises its `TraceError` at the next `record` or at `close`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lab.experiments import ExperimentError
from lab.experiments.compositions import Composition
from lab.experiments.conditions import Condition
from lab.experiments.measures import DropCounts, run_drops
from model.checkpoint import checkpoint_paths, load_checkpoint
from model.generate import GenerationResult, generate
from model.protocols import GenerationModel
from model.recorder import Recorder, logits_form_for, trace_meta
from model.tokenizer import encode
from traces import TraceWriter, schema
from traces.background import BackgroundWriter
from traces.chunks import default_threads
from traces.records import KernelMode
from traces.schema import DEFAULT_LOGITS_K

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestPool:
    """Request texts and token ids; id 0 is the probe, ids 1..P the partners."""

    texts: tuple[str, ...]
    tokens: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, probe: str, partners: list[str], encode=encode) -> RequestPool:
        """The probe, then each partner once (a partner equal to the probe is left out); `encode` maps
        a text to token ids (default the byte-level tokenizer)."""
        texts = [probe] + [p for i, p in enumerate(partners) if p != probe and p not in partners[:i]]
        return cls(tuple(texts), tuple(tuple(encode(t)) for t in texts))

    @property
    def n_partners(self) -> int:
        return len(self.texts) - 1

    def prompts(self, comp: Composition) -> list[list[int]]:
        return [list(self.tokens[r]) for r in comp.requests]


@dataclass(frozen=True)
class Models:
    """The MoE checkpoint, and the dense control when there is one (`dense_note` says why not)."""

    moe: GenerationModel
    card: dict
    dense: GenerationModel | None
    dense_note: str


@dataclass(frozen=True, eq=False)
class RunRecord:
    """What the tables need from one recorded run."""

    name: str
    condition: str
    composition: Composition
    tokens: np.ndarray  # [B, T] prompt + generated, MISSING past each row's end
    prompt_len: np.ndarray  # [B]
    wall_time_s: float
    probe_drops: DropCounts
    batch_drops: DropCounts
    arrays: dict[str, np.ndarray] | None = None  # the run's datasets, when kept

    @property
    def probe_tokens(self) -> np.ndarray:
        return self.tokens[self.composition.probe_row]


def _load(path: Path, device: torch.device, flag: str) -> tuple[torch.nn.Module, dict]:
    try:
        return load_checkpoint(path, device=device)
    except ValueError as exc:
        raise ExperimentError(f"{flag}: {exc}") from None


def load_models(checkpoint: Path, dense_checkpoint: Path | None, dense_required: bool, device: torch.device,
                want_dense: bool) -> Models:
    """Load the MoE checkpoint and, if wanted and present, the dense control."""
    model, card = _load(checkpoint, device, "--checkpoint")
    if not model.config.is_moe:
        raise ExperimentError(f"--checkpoint: {checkpoint} is a dense model; the experiments need an MoE")
    if not want_dense:
        return Models(model, card, None, "")
    weights, card_path = checkpoint_paths(dense_checkpoint) if dense_checkpoint else (None, None)
    if dense_checkpoint is None or not (weights.exists() and card_path.exists()):
        if dense_required:
            raise ExperimentError(f"--dense-checkpoint: {weights} or {card_path} not found")
        return Models(model, card, None, f"dense control skipped: no checkpoint at {dense_checkpoint}")
    dense, _ = _load(dense_checkpoint, device, "--dense-checkpoint")
    if dense.config.is_moe:
        raise ExperimentError(f"--dense-checkpoint: {dense_checkpoint} is an MoE, not a dense control")
    if dense.config.vocab_size != model.config.vocab_size:
        raise ExperimentError("--dense-checkpoint: its vocabulary differs from the MoE checkpoint's")
    return Models(model, card, dense, "")


def load_hf_models(settings, device: torch.device):
    """The Hugging Face model of `--model` (no dense control) and the settings adjusted to it: its
    kernel modes are native only unless --kernel-mode asked for batch_invariant (docs/hf-models.md)."""
    import dataclasses

    from model.hf.load import HFLoadError, load_hf

    try:
        model = load_hf(settings.hf_model, dtype=settings.dtype, device=device,
                        device_map=settings.device_map)
    except HFLoadError as exc:
        raise ExperimentError(f"--model: {exc}") from None
    except ImportError as exc:
        raise ExperimentError(f"--model: transformers is not installed (pip install 'moe-inspector[hf]'): "
                              f"{exc}") from None
    if not settings.kernel_modes_given and KernelMode.BATCH_INVARIANT in settings.kernel_modes:
        settings = dataclasses.replace(settings, kernel_modes=("native",))
    note = "dense control skipped: a Hugging Face model has none"
    return Models(model, {"source": settings.hf_model}, None, note), settings


def adapt_policy(model, policy):
    """The policy as `model` runs it (a Hugging Face model's own K and score function)."""
    if policy is None:
        return policy
    try:
        return model.adapt_policy(policy)
    except ValueError as exc:
        raise ExperimentError(f"--presets/--priorities: {exc}") from None


def check_lengths(pool: RequestPool, model: torch.nn.Module, max_new_tokens: int) -> None:
    """Every request plus `max_new_tokens` must fit the model's context; name the option otherwise."""
    context = model.config.context
    if len(pool.tokens[0]) + max_new_tokens > context:
        raise ExperimentError(f"--probe/--new-tokens: the probe's {len(pool.tokens[0])} tokens + "
                              f"{max_new_tokens} new tokens exceed the context length {context}")
    longest = max(range(len(pool.tokens)), key=lambda r: len(pool.tokens[r]))
    if len(pool.tokens[longest]) + max_new_tokens > context:
        raise ExperimentError(f"--partners/--new-tokens: partner {pool.texts[longest][:40]!r} has "
                              f"{len(pool.tokens[longest])} tokens; + {max_new_tokens} new tokens exceed "
                              f"the context length {context}")


def generate_batch(model, pool: RequestPool, comp: Composition, cond: Condition, max_new_tokens: int,
                   recorder: Recorder | None = None) -> GenerationResult:
    """Greedy generation of one composition under one condition (the model is chosen by the caller)."""
    arrivals = list(comp.arrivals) if comp.arrivals else None
    return generate(model, pool.prompts(comp), max_new_tokens, adapt_policy(model, cond.policy),
                    cond.kernel_mode, recorder=recorder, arrivals=arrivals)


class Recording:
    """One trace file being written with one model; `record` adds one run per call."""

    def __init__(self, path: str | Path, model: torch.nn.Module, pool: RequestPool, *, experiment: str,
                 policy, kernel_mode: str, seed: int, logits: str = "auto", logits_k: int = DEFAULT_LOGITS_K):
        self.path = Path(path)
        self.logits_form = logits_form_for(logits, model.config.vocab_size)
        self.logits_k = logits_k
        self.model = model
        self.pool = pool
        self.experiment = experiment
        self.runs: list[str] = []
        try:
            meta = trace_meta(model, adapt_policy(model, policy), kernel_mode=kernel_mode, seed=seed)
            vocab = model.vocab()
            writer = TraceWriter(self.path, meta=meta, vocab=vocab, requests=list(pool.texts),
                                 prompt_tokens=[list(t) for t in pool.tokens], threads=writer_threads())
            self.writer = BackgroundWriter(writer)
        except OSError as exc:
            raise ExperimentError(f"-o/--output: cannot write {self.path} ({exc})") from None

    def record(self, name: str, comp: Composition, cond: Condition, max_new_tokens: int, *, seed: int,
               keep_arrays: bool = False) -> RunRecord:
        """Generate `comp` under `cond`, write it as run `name`, and return its record."""
        recorder = Recorder(self.logits_form, self.logits_k)
        result = generate_batch(self.model, self.pool, comp, cond, max_new_tokens, recorder)
        arrays = recorder.write_run(self.writer, name, result, policy=adapt_policy(self.model, cond.policy),
                                    request_ids=comp.requests,
                                    probe_row=comp.probe_row, label=comp.label, condition=cond.name,
                                    experiment=self.experiment, seed=seed, max_new_tokens=max_new_tokens)
        self.runs.append(name)
        return RunRecord(
            name=name, condition=cond.name, composition=comp, tokens=arrays[schema.TOKENS],
            prompt_len=arrays[schema.PROMPT_LEN], wall_time_s=result.wall_time_s,
            probe_drops=run_drops(arrays, [comp.probe_row]), batch_drops=run_drops(arrays),
            arrays=arrays if keep_arrays else None,
        )

    def write_table(self, name: str, columns: dict, attrs: dict | None = None) -> None:
        self.writer.write_table(name, columns, attrs)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def writer_threads() -> int:
    """Compression threads for a trace written while the model generates: the CPUs torch's own
    threads leave free, at least one. Sharing torch's cores stalls its threads at every barrier."""
    return max(1, default_threads() - torch.get_num_threads())
