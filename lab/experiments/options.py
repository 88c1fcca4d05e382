"""The settings of one recording, and the parsing of option values into them (no torch here).

Each experiment has its own defaults (docs/experiments.md); an option left out takes the experiment's
default, and an option that means nothing to the chosen experiment is an error, not silently
ignored. Every error is an `ExperimentError` whose message starts with the option's name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from lab.experiments import ExperimentError
from lab.experiments.prompt_file import read_prompt_file
from traces.schema import DEFAULT_LOGITS_K

EXPERIMENTS = ("e0", "e1", "e3", "e4", "e7", "quality", "continuous", "example", "against")
KERNEL_CHOICES = ("native", "batch_invariant", "both")

#: The repository's assets folder: the shipped checkpoints and the partner pool.
ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_CHECKPOINT = ASSETS / "moe-default"
DEFAULT_DENSE_CHECKPOINT = ASSETS / "dense-control"
DEFAULT_PARTNERS = ASSETS / "partners.txt"
#: Five probes for E1's statistics over probes (`--probes`), the default probe first.
DEFAULT_PROBES = ASSETS / "probes.txt"

#: The probe request: documentation-style prose whose completion, under capacity routing, leaves
#: the probe-alone completion at many different positions depending on the batch (checked with
#: the shipped checkpoint), and shorter than many partners, so their pads reach its prefill.
DEFAULT_PROBE = "The result is a new list of"

#: Per experiment: the default of every option that applies to it (absent = does not apply).
DEFAULTS: dict[str, dict[str, object]] = {
    "e0": dict(batch_sizes=(1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64), kernel_modes=("native", "batch_invariant")),
    "e1": dict(compositions=30, batch_sizes=tuple(range(1, 9)), capacity_factors=(1.0, 1.25, 2.0),
               presets=("gshard",), kernel_modes=("native", "batch_invariant"), new_tokens=(128, 256),
               repeats=3, min_capacities=(0,), probes=()),
    "e3": dict(compositions=1, batch_sizes=(2, 4, 8), capacity_factors=(1.0, 1.25, 2.0),
               presets=("gshard",), priorities=("kmajor_position", "kmajor_score"),
               kernel_modes=("native",), new_tokens=(64,), min_capacities=(0,)),
    "e4": dict(compositions=5, batch_sizes=(1, 2, 3, 4, 8, 16), kernel_modes=("native",), new_tokens=(128,)),
    "e7": dict(compositions=4, batch_sizes=(8,), capacity_factors=(1.0,), presets=("gshard",),
               new_tokens=(128,), repeats=5),
    "quality": dict(compositions=4, batch_sizes=(8,), capacity_factors=(1.0, 1.25, 2.0), presets=("gshard",),
                    kernel_modes=("native",), new_tokens=(192,), min_capacities=(0, 1, 4)),
    "continuous": dict(compositions=10, batch_sizes=(1, 2, 4, 8, 16, 32, 64), capacity_factors=(1.0,),
                       presets=("gshard",), kernel_modes=("native",), new_tokens=(64,),
                       min_capacities=(0, 4)),
    "against": dict(compositions=4, batch_sizes=(2, 3, 4, 8), new_tokens=(64,)),
    "example": dict(compositions=30, batch_sizes=(2, 3, 4), capacity_factors=(1.0, 1.25),
                    presets=("gshard",), new_tokens=(64,)),
}

#: Option flag of each setting, for error messages.
FLAGS = {
    "compositions": "-n/--compositions", "batch_sizes": "--batch-sizes",
    "capacity_factors": "--capacity-factors",
    "presets": "--presets", "priorities": "--priorities", "kernel_modes": "--kernel-mode",
    "new_tokens": "--new-tokens", "repeats": "--repeats", "min_capacities": "--min-capacities",
    "probes": "--probes",
}

MAX_BATCH = 256
#: Most next-token logits the top-k form keeps per position.
MAX_LOGITS_K = 4096
_INT_OR_RANGE = re.compile(r"(-?\d+)(?:\s*-\s*(\d+))?")
MAX_COMPOSITIONS = 10_000


@dataclass(frozen=True)
class Settings:
    """Everything one recording needs, resolved and checked (paths are not opened yet)."""

    experiment: str
    output: Path
    checkpoint: Path = DEFAULT_CHECKPOINT
    dense_checkpoint: Path | None = DEFAULT_DENSE_CHECKPOINT
    dense_required: bool = False        # --dense-checkpoint was given: a missing file is an error
    probe: str = DEFAULT_PROBE
    partners: Path = DEFAULT_PARTNERS
    compositions: int = 1
    batch_sizes: tuple[int, ...] = (1,)
    capacity_factors: tuple[float, ...] = (1.0,)
    presets: tuple[str, ...] = ("gshard",)
    priorities: tuple[str, ...] = ("kmajor_position",)
    kernel_modes: tuple[str, ...] = ("native",)
    new_tokens: tuple[int, ...] = (64,)
    repeats: int = 1
    min_capacities: tuple[int, ...] = (0,)
    probes: tuple[str, ...] = ()        # e1: every probe (--probes FILE); () = just `probe`
    seed: int = 0
    device: str = "cpu"
    threads: int = 1
    hf_model: str | None = None         # --model: a Hugging Face folder or cached hub id (docs/hf-models.md)
    dtype: str = "float32"              # --dtype of a Hugging Face model
    device_map: str | None = None       # --device-map auto (accelerate) for a Hugging Face model
    kernel_modes_given: bool = False    # --kernel-mode was typed (not the experiment's default)
    logits: str = "auto"                # --logits: full, topk, or auto (model/recorder.py)
    logits_k: int = DEFAULT_LOGITS_K    # --logits-k: J of the top-k form
    extra: dict = field(default_factory=dict)

    @property
    def recording_logits(self) -> dict:
        """The logits options of a `Recording`."""
        return {"logits": self.logits, "logits_k": self.logits_k}

    @property
    def max_new_tokens(self) -> int:
        return max(self.new_tokens)

    @property
    def all_probes(self) -> tuple[str, ...]:
        """The probes to run: `probes` when given, else the one `probe`."""
        return self.probes or (self.probe,)


def parse_int_list(flag: str, text: str, minimum: int = 1, maximum: int | None = None) -> tuple[int, ...]:
    """`"1-8"`, `"1,2,4"` or `"2-4,8"` -> sorted distinct ints, each in [minimum, maximum]."""
    values: set[int] = set()
    for part in str(text).split(","):
        match = _INT_OR_RANGE.fullmatch(part.strip())
        if match is None:
            raise ExperimentError(f"{flag}: expected integers or ranges like 1-8,16, got {text!r}")
        lo = int(match[1])
        hi = int(match[2]) if match[2] is not None else lo
        if hi < lo:
            raise ExperimentError(f"{flag}: range {part.strip()!r} runs backwards")
        values.update(range(lo, hi + 1))
    bad = [v for v in sorted(values) if v < minimum or (maximum is not None and v > maximum)]
    if bad:
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise ExperimentError(f"{flag}: values must be at least {minimum}{upper}, got {bad[0]}")
    return tuple(sorted(values))


def parse_float_list(flag: str, text: str) -> tuple[float, ...]:
    """`"1.0,1.25,2"` -> distinct finite floats > 0 in the order given."""
    out: list[float] = []
    for part in str(text).split(","):
        try:
            value = float(part)
        except ValueError:
            raise ExperimentError(f"{flag}: expected numbers separated by commas, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise ExperimentError(f"{flag}: values must be finite and > 0, got {part.strip()!r}")
        if value not in out:
            out.append(value)
    return tuple(out)


def parse_choice_list(flag: str, text: str, choices: tuple[str, ...]) -> tuple[str, ...]:
    """`"a,b"` -> names, each one of `choices`."""
    out: list[str] = []
    for part in str(text).split(","):
        name = part.strip()
        if name not in choices:
            raise ExperimentError(f"{flag}: {name!r} is not one of {', '.join(choices)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def read_probes(path) -> tuple[str, ...]:
    """Probe prompts of a file (`lab.experiments.prompt_file`), in order, each once."""
    return tuple(dict.fromkeys(read_prompt_file(path, "--probes")))


def _positive(flag: str, value: int | None, maximum: int | None = None) -> int | None:
    if value is None:
        return None
    if value < 1 or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise ExperimentError(f"{flag}: must be at least 1{upper}, got {value}")
    return value


def resolve(args, presets: tuple[str, ...], priorities: tuple[str, ...]) -> Settings:
    """Settings from parsed command-line arguments (strings as typed), with experiment defaults.

    `presets` and `priorities` are the names the routing module offers (passed in so this module
    needs no torch).
    """
    experiment = args.experiment
    if experiment not in EXPERIMENTS:
        raise ExperimentError(f"--experiment: {experiment!r} is not one of {', '.join(EXPERIMENTS)}")
    defaults = DEFAULTS[experiment]
    given = {
        "compositions": _positive("-n/--compositions", args.compositions, MAX_COMPOSITIONS),
        "batch_sizes": None if args.batch_sizes is None else parse_int_list("--batch-sizes", args.batch_sizes,
                                                                            1, MAX_BATCH),
        "capacity_factors": None if args.capacity_factors is None else parse_float_list(
            "--capacity-factors", args.capacity_factors),
        "presets": None if args.presets is None else parse_choice_list("--presets", args.presets, presets),
        "priorities": None if args.priorities is None else parse_choice_list(
            "--priorities", args.priorities, priorities),
        "kernel_modes": None if args.kernel_mode is None else (
            ("native", "batch_invariant") if args.kernel_mode == "both" else
            parse_choice_list("--kernel-mode", args.kernel_mode, KERNEL_CHOICES[:2])),
        "new_tokens": None if args.new_tokens is None else parse_int_list("--new-tokens", args.new_tokens, 1),
        "repeats": _positive("--repeats", args.repeats, 100),
        "min_capacities": None if getattr(args, "min_capacities", None) is None else parse_int_list(
            "--min-capacities", args.min_capacities, 0, 4096),
        "probes": None if getattr(args, "probes", None) is None else read_probes(args.probes),
    }
    values = {}
    for name, value in given.items():
        if value is not None and name not in defaults:
            raise ExperimentError(f"{FLAGS[name]}: does not apply to experiment {experiment}")
        if name in defaults:
            values[name] = defaults[name] if value is None else value
    if args.seed is not None and not 0 <= args.seed < 2**31:
        raise ExperimentError(f"--seed: must be in [0, 2**31), got {args.seed}")
    if not args.probe or not str(args.probe).strip():
        raise ExperimentError("--probe: the probe prompt must not be empty")
    if values.get("probes") and args.probe != DEFAULT_PROBE:
        raise ExperimentError("--probes: give either --probe TEXT or --probes FILE, not both")
    _positive("--threads", args.threads, 256)
    dense = args.dense_checkpoint
    hf_model = getattr(args, "model", None)
    dtype = getattr(args, "dtype", None)
    device_map = getattr(args, "device_map", None)
    if hf_model is not None:
        if args.checkpoint or dense:
            raise ExperimentError("--model: give either --model or --checkpoint/--dense-checkpoint")
        if experiment == "e0":
            raise ExperimentError("--model: e0 probes the shipped model's own kernels; it does not apply to "
                                  "a Hugging Face model")
        if experiment == "quality":
            raise ExperimentError("--model: quality scores the shipped byte-level model on its held-out "
                                  "corpus; it does not apply to a Hugging Face model")
        if experiment == "continuous":
            raise ExperimentError("--model: continuous needs rows joining a running batch, which a Hugging "
                                  "Face model's shared cache columns do not allow")
    elif dtype is not None or device_map is not None:
        raise ExperimentError(f"{'--dtype' if dtype is not None else '--device-map'}: applies to a Hugging "
                              f"Face model (--model) only")
    logits, logits_k = getattr(args, "logits", None) or "auto", getattr(args, "logits_k", None)
    if logits_k is not None and logits == "full":
        raise ExperimentError("--logits-k: applies to the top-k logits (--logits topk or auto)")
    logits_k = DEFAULT_LOGITS_K if logits_k is None else int(logits_k)
    if not 2 <= logits_k <= MAX_LOGITS_K:
        raise ExperimentError(f"--logits-k: must be at least 2 (the margin needs the top two) and at most "
                              f"{MAX_LOGITS_K}, got {logits_k}")
    if experiment == "e0" and logits == "topk":
        raise ExperimentError("--logits topk: e0 compares the probe's full logits across batch sizes")
    output = Path(args.output) if args.output else Path(f"{experiment}.h5")
    try:
        if output.exists() and output.is_dir():
            raise ExperimentError(f"-o/--output: {output} is a directory, expected a trace file path")
        if not output.parent.exists() and str(output.parent) not in ("", "."):
            raise ExperimentError(f"-o/--output: folder {output.parent} does not exist")
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise ExperimentError(f"-o/--output: {str(output)[:60]}...: {exc.strerror}") from None
    return Settings(
        experiment=experiment, output=output,
        checkpoint=Path(args.checkpoint) if args.checkpoint else DEFAULT_CHECKPOINT,
        dense_checkpoint=Path(dense) if dense else DEFAULT_DENSE_CHECKPOINT, dense_required=bool(dense),
        probe=str(values["probes"][0] if values.get("probes") else args.probe),
        partners=Path(args.partners) if args.partners else DEFAULT_PARTNERS,
        seed=int(args.seed or 0), device=str(args.device), threads=int(args.threads),
        hf_model=None if hf_model is None else str(hf_model), dtype=str(dtype or "float32"),
        device_map=device_map, kernel_modes_given=args.kernel_mode is not None, logits=logits,
        logits_k=logits_k, **values,
    )
