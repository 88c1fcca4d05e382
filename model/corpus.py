"""Training text that ships with CPython: pydoc topics, stdlib docstrings and comments.

Built deterministically from the local install (sorted file walk, fixed extraction), so the same
Python gives the same bytes; the card stores the corpus's sha256 so a different install is noticed.
"""

from __future__ import annotations

import ast
import hashlib
import io
import logging
import os
import sys
import sysconfig
import tokenize
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.tokenizer import BOS, EOS

log = logging.getLogger(__name__)

# Directories of the standard library that hold tests, vendored data or generated tables rather than
# documentation prose; skipping them keeps the corpus about Python, not about test fixtures.
_SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__",
              "encodings", "lib2to3", "turtledemo", "ensurepip", "config-3.11-x86_64-linux-gnu"}
HELD_OUT_EVERY = 20  # one document in 20 (by a stable hash of its name) goes to the held-out split


@dataclass(frozen=True)
class Document:
    """One unit of text: a pydoc topic, a module's docstrings or a module's comments."""

    name: str
    text: str


@dataclass(frozen=True)
class Corpus:
    """Token streams of the two splits (BOS doc EOS BOS doc EOS ...) and a description for the card."""

    train: np.ndarray  # int64 [N_train]
    held_out: np.ndarray  # int64 [N_held_out]
    description: dict


def _docstrings(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc) >= 20:
                out.append(doc)
    return out


def _comment_blocks(source: str) -> list[str]:
    """Runs of consecutive comment lines, `#` kept, so the model also sees Python-shaped text."""
    blocks: list[str] = []
    current: list[str] = []
    last_row = -2
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            row = tok.start[0]
            if row != last_row + 1 and current:
                blocks.append("\n".join(current))
                current = []
            current.append(tok.string.rstrip())
            last_row = row
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    if current:
        blocks.append("\n".join(current))
    # Shebangs, coding lines and one-word markers carry no language.
    return [b for b in blocks if len(b) >= 30 and not b.startswith("#!")]


def stdlib_files(root: Path) -> list[Path]:
    """Every .py file of the standard library under `root`, in sorted walk order."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("config-"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                files.append(Path(dirpath) / name)
    return files


def documents(max_files: int | None = None) -> list[Document]:
    """All documents in a fixed order: pydoc topics (sorted by key), then each stdlib file's docstrings
    and comments. `max_files` limits the file walk (for quick checks)."""
    from pydoc_data.topics import topics

    docs = [Document(f"topic:{key}", topics[key].strip()) for key in sorted(topics)]
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in stdlib_files(root)[:max_files]:
        rel = path.relative_to(root).as_posix()
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue
        strings = _docstrings(tree)
        if strings:
            docs.append(Document(f"doc:{rel}", "\n\n".join(strings)))
        comments = _comment_blocks(source)
        if comments:
            docs.append(Document(f"comment:{rel}", "\n\n".join(comments)))
    return docs


def is_held_out(name: str) -> bool:
    """Stable split by document name (crc32, not Python's salted hash)."""
    return zlib.crc32(name.encode("utf-8")) % HELD_OUT_EVERY == 0


def _stream(docs: list[Document]) -> np.ndarray:
    parts = []
    for doc in docs:
        parts.append(np.array([BOS], dtype=np.int64))
        parts.append(np.frombuffer(doc.text.encode("utf-8"), dtype=np.uint8).astype(np.int64))
        parts.append(np.array([EOS], dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def build_corpus(max_files: int | None = None) -> Corpus:
    """Build both splits from the running Python's standard library."""
    docs = documents(max_files)
    train_docs = [d for d in docs if not is_held_out(d.name)]
    held_docs = [d for d in docs if is_held_out(d.name)]
    train, held = _stream(train_docs), _stream(held_docs)
    digest = hashlib.sha256()
    for doc in docs:
        digest.update(doc.name.encode("utf-8") + b"\0" + doc.text.encode("utf-8") + b"\0")
    description = {
        "source": "pydoc_data.topics + standard library docstrings and comments "
                  f"(Python {sys.version.split()[0]}, sorted walk, tests and vendored dirs skipped)",
        "documents": len(docs),
        "train_documents": len(train_docs),
        "held_out_documents": len(held_docs),
        "train_tokens": int(train.size),
        "held_out_tokens": int(held.size),
        "held_out_rule": f"crc32(document name) % {HELD_OUT_EVERY} == 0",
        "sha256": digest.hexdigest(),
    }
    log.info("corpus: %d documents, %d train / %d held-out tokens", len(docs), train.size, held.size)
    return Corpus(train=train, held_out=held, description=description)
