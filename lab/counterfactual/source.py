"""Which model reruns a trace: the checkpoint it names (or the one given), checked against the trace.

A trace stores the model configuration (`model_config`), not the weights. The checkpoint is, in
order: the one given (`--checkpoint`); a `checkpoint` root attribute or `model_config.extra.checkpoint`
when the recorder stored one (a name that is no checkpoint here is refused, never replaced); else the
shipped `assets/moe-default` (or `assets/dense-control` for a dense trace). A relative path is looked
up beside the trace, then in the working folder, then in the repository. The loaded model's
configuration must equal the trace's (the free-form `extra` aside); whether the weights are the
recorded ones is what the bitwise reproduction check then shows.

A trace may come from anyone, so a folder it names is used only when it lies (symbolic links
resolved) inside the trace's own folder or the project's `assets/` (`allowed`); any other is used
only when the user names it with `--checkpoint`. No model code is ever run from a folder: every
Hugging Face load passes `trust_remote_code=False`, and the shipped model's weights are safetensors.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import torch

from model.checkpoint import checkpoint_paths, load_checkpoint
from traces.records import RootMeta

log = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parents[2] / "assets"


class ExplainError(ValueError):
    """A bad option or an unusable input of `explain`; the command line prints it and exits with 2."""


def named_checkpoint(meta: RootMeta) -> str | None:
    """The checkpoint a trace names, if its recorder stored one."""
    named = meta.checkpoint
    if not named:
        extra = meta.model_config.get("extra") or {}
        named = extra.get("checkpoint") if isinstance(extra, dict) else None
    return str(named) if named else None


def resolve_checkpoint(meta: RootMeta, trace_path: str | Path, given: str | None) -> Path:
    """The checkpoint stem to load for a trace (see the module docstring); ExplainError if absent."""
    if given:
        stem = Path(given)
        if not _exists(stem):
            raise ExplainError(f"--checkpoint: {_weights(stem)} not found")
        return stem
    named = named_checkpoint(meta)
    dense = meta.moe_layers == []
    default = ASSETS / ("dense-control" if dense else "moe-default")
    candidates = [default]
    if named:  # the checkpoint named, or none: never the shipped model in its place
        p = Path(named)
        candidates = [p] if p.is_absolute() else [Path(trace_path).parent / p, p, ASSETS.parent / p]
    for stem in candidates:
        if _exists(stem):
            refuse_unless_allowed(named, _weights(stem), trace_path)
            return stem
    what = f"the trace names {named!r}; " if named else ""
    raise ExplainError(f"--checkpoint: {what}no checkpoint (a .safetensors file and its .json card) found at "
                       f"{', '.join(str(c) for c in candidates)}; give one with --checkpoint")


def load_model(meta: RootMeta, stem: Path, device: torch.device) -> torch.nn.Module:
    """Load the checkpoint and check its configuration against the trace's `model_config`."""
    try:
        model, _ = load_checkpoint(stem, device=device)
    except ValueError as exc:
        raise ExplainError(f"--checkpoint: {exc}") from None
    recorded = dict(meta.model_config)
    loaded = model.config.to_dict()
    differ = sorted(k for k in set(recorded) | set(loaded)
                    if k != "extra" and recorded.get(k) != loaded.get(k))
    if differ:
        shown = ", ".join(f"{k} {loaded.get(k)!r} (trace {recorded.get(k)!r})" for k in differ[:4])
        raise ExplainError(f"--checkpoint: {stem} is not the trace's model: {shown}")
    log.info("rerunning with %s on %s", stem, device)
    return model


#: Hugging Face config keys that say where or how a model was loaded, not what it is.
_HF_PROVENANCE = ("_name_or_path", "transformers_version", "dtype", "torch_dtype")


def load_hf_model(meta: RootMeta, given: str | None, device: torch.device, trace_path: str | Path = "."):
    """(model, name) of a Hugging Face trace (`model_source` "huggingface"): the folder or hub id given
    or the one the trace names in `checkpoint`, in the trace's dtype, checked against `model_config`.
    A relative folder the trace names is looked for from here, beside the trace and in the repository."""
    from model.hf.load import HFLoadError, load_hf

    named = given or meta.checkpoint
    if not named:
        raise ExplainError("--checkpoint: the trace names no Hugging Face model; give its folder")
    name = named
    if not given and not Path(named).is_absolute():
        places = (Path(named), Path(trace_path).parent / named, ASSETS.parent / named)
        found = [p for p in places if p.is_dir()]
        name = str(found[0]) if found else named
    if not given and (Path(name).is_absolute() or Path(name).is_dir()):
        refuse_unless_allowed(named, Path(name), trace_path)
    try:
        model = load_hf(str(name), dtype=meta.dtype, device=device)
    except HFLoadError as exc:
        raise ExplainError(f"--checkpoint: {exc}") from None
    except ImportError as exc:
        raise ExplainError(f"--checkpoint: transformers is not installed ({exc})") from None
    recorded = dict(meta.model_config)
    loaded = model.config.to_dict()
    differ = sorted(k for k in set(recorded) | set(loaded)
                    if k not in _HF_PROVENANCE and recorded.get(k) != loaded.get(k))
    if differ:
        shown = ", ".join(f"{k} {loaded.get(k)!r} (trace {recorded.get(k)!r})" for k in differ[:4])
        raise ExplainError(f"--checkpoint: {name} is not the trace's model: {shown}")
    log.info("rerunning with %s on %s", name, device)
    return model, str(named)


def checkpoint_name(checkpoint: str | Path, trace_path: str | Path) -> str:
    """How a table names the checkpoint it was made with, the same in every clone: `assets/...` for one
    under the project's assets, a path relative to the trace's folder for one beside it, else as
    given (a hub id, or a folder elsewhere, absolute)."""
    path = Path(checkpoint)
    if not path.exists() and not path.with_suffix(".safetensors").exists():
        return portable_checkpoint(str(checkpoint))
    real = path.resolve()
    if real.is_relative_to(ASSETS.resolve()):
        return str(Path("assets") / real.relative_to(ASSETS.resolve()))
    folder = Path(trace_path).parent.resolve()
    return str(real.relative_to(folder)) if real.is_relative_to(folder) else str(real)


def checkpoint_digest(checkpoint: str | Path) -> str:
    """'sha256:<hex>' of a checkpoint's content: a project checkpoint's weights then card (whatever its
    stem is called), or a Hugging Face folder's weights (*.safetensors, *.bin) and config.json, each
    file's name in the folder and bytes in name order; '' for a name that is no local file or folder
    (a hub id). Two clones with the same checkpoint, wherever it lies and however it is named, give
    the same digest."""
    path = Path(checkpoint)
    if path.is_dir():
        files = [(f.name, f) for f in sorted(path.iterdir()) if f.is_file() and
                 (f.suffix in (".safetensors", ".bin") or f.name == "config.json")]
    else:
        files = [(f.suffix, f) for f in checkpoint_paths(path) if f.is_file()]
    if not files:
        return ""
    digest = hashlib.sha256()
    for name, f in files:
        digest.update(name.encode() + b"\0")
        with open(f, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def portable_checkpoint(name: str) -> str:
    """A stored checkpoint name as `checkpoint_name` gives it: an absolute path into some clone's
    `assets/` (tables written before names were portable) becomes `assets/...`."""
    parts = Path(name).parts
    if Path(name).is_absolute() and "assets" in parts:
        at = len(parts) - 1 - parts[::-1].index("assets")
        return str(Path(*parts[at:]))
    return name


def allowed(path: Path, trace_path: str | Path) -> bool:
    """Whether `path` lies inside the trace's folder or the project's `assets/` (links resolved)."""
    real = Path(path).resolve()
    return any(real.is_relative_to(Path(root).resolve()) for root in (Path(trace_path).parent, ASSETS))


def refuse_unless_allowed(named: str | None, path: Path, trace_path: str | Path) -> None:
    """ExplainError when the checkpoint a trace names lies outside the places a trace may name."""
    if named is None or allowed(path, trace_path):
        return
    raise ExplainError(f"--checkpoint: the trace names the checkpoint {named!r} ({Path(path).resolve()}), "
                       f"outside its own folder and assets/; a trace cannot choose what runs here: "
                       f"name it yourself with --checkpoint {path} to use it")


def _weights(stem: Path) -> Path:
    return checkpoint_paths(stem)[0]


def _exists(stem: Path) -> bool:
    weights, card = checkpoint_paths(stem)
    return weights.is_file() and card.is_file()
