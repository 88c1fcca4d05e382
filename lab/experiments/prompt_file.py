"""Prompt files (`--partners`, `--probes`): one prompt per line, comments only in the header.

A prompt of code may start with '#' (`# Compute the mean`), so '#' marks a comment only in the file's
header: the lines before its first prompt. After the first prompt every non-blank line is a prompt,
whatever it starts with. Leading spaces are kept (an indented line of code is a prompt too); the
line's end is not.
"""

from __future__ import annotations

from pathlib import Path

from lab.experiments import ExperimentError

#: The rule in words, for help texts and errors.
RULE = "one prompt per line; '#' lines before the first prompt are comments"


def read_prompt_file(path: str | Path, flag: str) -> list[str]:
    """The prompts of `path` in order (blank lines and header comments skipped); `flag` names the
    option in errors. Raises `ExperimentError` for a missing, unreadable or empty file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExperimentError(f"{flag}: file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"{flag}: cannot read {path} as UTF-8 text ({exc})") from None
    prompts: list[str] = []
    for line in text.splitlines():
        line = line.rstrip("\r\n")
        if not line.strip() or (not prompts and line.lstrip().startswith("#")):
            continue
        prompts.append(line)
    if not prompts:
        raise ExperimentError(f"{flag}: {path} holds no prompts ({RULE})")
    return prompts
