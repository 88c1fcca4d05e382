"""The `moe-inspector` command line: one entry point, one module per subcommand.

Each module in `inspector.commands` exposes `add_arguments(parser)` and `run(args) -> int`.
Modules are imported only when their subcommand runs, so `info` never loads Qt and only
`record` and `explain` load torch.
"""

from __future__ import annotations

import os
import signal
import sys

from inspector import stop_at_once as _stop_at_once


def launched() -> bool:
    """Whether this process is the command line itself (the installed script or `python -m`)."""
    return __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "moe-inspector"


if launched():  # before any other import: an interruption from the first line on is one line
    for _signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_signal, _stop_at_once)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import difflib  # noqa: E402
import importlib  # noqa: E402

from inspector.commands.errors import UsageError  # noqa: E402

COMMANDS: dict[str, str] = {
    "view": "open traces in the desktop app (the default)",
    "info": "print a summary of a trace file",
    "record": "run the experiments with the model and write a trace",
    "explain": "confirm divergence causes by counterfactual reruns and store them in the trace",
    "export": "render a view of a trace to PNG, SVG, PDF or CSV without a display",
}


class ParseError(Exception):
    """A command line argparse cannot read; `main` prints it as one line and exits with status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block) that name the choices of a bad choice."""

    #: The parser of each command (`_parser` fills it), for the options an error names.
    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str):
        raise ParseError(message)

    # argparse's own hooks for `type` and `choices`: the same tests, in the words of the other errors.
    def _get_value(self, action: argparse.Action, text: str):
        try:
            return super()._get_value(action, text)
        except argparse.ArgumentError:
            kind = {int: "a whole number", float: "a number"}.get(action.type)
            if kind is None:
                raise
            raise argparse.ArgumentError(None, f"{_flag(action)} expects {kind}, got {text!r}") from None

    def _check_value(self, action: argparse.Action, value) -> None:
        if action.choices is None or value in action.choices:
            return
        names = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), names, n=1, cutoff=CLOSE)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise argparse.ArgumentError(None, f"{_flag(action)} must be one of {', '.join(names)}, got "
                                           f"{value!r}{hint}")


#: How alike a mistyped name and a choice must be for the error to suggest it (difflib's ratio).
CLOSE = 0.75


def _flag(action: argparse.Action) -> str:
    return "/".join(action.option_strings) if action.option_strings else str(action.metavar)


def _parser() -> _Parser:
    parser = _Parser(
        prog="moe-inspector",
        description="Record and inspect routing in Mixture-of-Experts language models.",
    )
    parser.add_argument("--version", action="version", version=f"moe-inspector {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.commands = {}
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"inspector.commands.{name}")
        parser.commands[name] = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(parser.commands[name])
    return parser


def _version() -> str:
    """The installed distribution's version, or the source tree's when it is run uninstalled."""
    from importlib import metadata

    try:
        return metadata.version("moe-inspector")
    except metadata.PackageNotFoundError:
        return "(not installed)"


#: File name endings that make a first argument a file to open, not a mistyped command.
TRACE_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")


def _with_default_command(argv: list[str]) -> list[str]:
    """`moe-inspector` and `moe-inspector FILE` mean `moe-inspector view [FILE]`; a first argument that
    is neither a command nor something to open (an existing path, a trace's name, an option) is a
    mistyped command: UsageError."""
    if not argv:
        return ["view"]
    first = argv[0]
    if first in COMMANDS or first in ("-h", "--help", "--version"):
        return argv
    if (first.startswith("-") or os.path.exists(first) or os.sep in first
            or first.lower().endswith(TRACE_SUFFIXES)):
        return ["view", *argv]
    close = difflib.get_close_matches(first, list(COMMANDS), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UsageError(f"unknown command {first!r}: {hint}commands are {', '.join(COMMANDS)} (to open a trace, "
                     f"give the path of an existing file)")


#: Options whose values may start with '-' (`--levels -1:1`), which argparse would take for an option.
DASH_VALUES = ("--levels", "--range")


def _glue_dash_values(argv: list[str]) -> list[str]:
    """`--levels -inf:1` as `--levels=-inf:1`, so argparse reads the value instead of an unknown option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in DASH_VALUES and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


class Terminated(KeyboardInterrupt):
    """SIGTERM while a command runs: it stops as on Ctrl-C (what it wrote is kept whole or removed)."""


def _terminate(signum, frame) -> None:
    raise Terminated()


def _note_only(signum, frame) -> None:
    """A signal once the command has finished: its work is done and its status stands."""


def main(argv: list[str] | None = None) -> int:
    """Run the command `argv` (default: this process's arguments); its exit status. Run as the program
    (`argv` None), Ctrl-C and SIGTERM are one line and status 130 or 143 at any moment: before the
    command they end the process at once (`_stop_at_once`), while it runs they stop it as Ctrl-C does,
    and after it they are only noted (its outputs are in place, its status stands). Called with
    `argv`, the caller's handlers are back when it returns."""
    program = argv is None
    if program and not launched():  # called as the program by other means: the signals noted from here
        _handle(_stop_at_once, _stop_at_once)
    previous = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    try:
        return _main(sys.argv[1:] if program else argv, running=_running if program else lambda start: None)
    finally:
        _handle(*([_note_only, _note_only] if program else previous))


def _handle(on_int, on_term) -> None:
    """Set the handlers of SIGINT and SIGTERM (only the main thread may; elsewhere nothing changes)."""
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGINT, on_int)
        signal.signal(signal.SIGTERM, on_term)


def _running(start: bool) -> None:
    """While a command runs (`start`), Ctrl-C and SIGTERM raise KeyboardInterrupt (`Terminated`);
    once it has returned they are only noted."""
    _handle(signal.default_int_handler, _terminate) if start else _handle(_note_only, _note_only)


def _main(argv: list[str], running=lambda start: None) -> int:
    try:
        argv = _with_default_command(list(argv))
    except UsageError as exc:
        print(f"moe-inspector: error: {exc}", file=sys.stderr)
        return 2
    argv = _glue_dash_values(argv)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except ParseError as exc:
        print(_parse_error_line(parser, argv, str(exc)), file=sys.stderr)
        return 2
    try:
        try:
            running(True)
            module = importlib.import_module(f"inspector.commands.{args.command}")
            status = int(module.run(args) or 0)
            sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
            return status
        finally:
            running(False)  # from here a signal is only noted (one just before is caught below)
    except UsageError as exc:
        print(f"moe-inspector {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        what = "terminated" if terminated else "interrupted"
        print(f"moe-inspector {args.command}: {what}", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else 130
    except BrokenPipeError:
        return _reader_went_away()


def _parse_error_line(parser: _Parser, argv: list[str], message: str) -> str:
    """One line for an argparse error: the command, the message, and for an unknown option the
    command's option nearest to it (or where to find them)."""
    command = argv[0] if argv and argv[0] in COMMANDS else ""
    prog = f"moe-inspector {command}".strip()
    message = message.removeprefix("argument ")
    if command and message.startswith(("unrecognized arguments", "the following arguments are required")):
        options = [o for a in parser.commands[command]._actions for o in a.option_strings]
        unknown = [w.split("=")[0] for w in argv[1:] if w.startswith("-") and w.split("=")[0] not in options]
        close = difflib.get_close_matches(unknown[0], options, n=1, cutoff=CLOSE) if unknown else []
        hint = f"did you mean {close[0]}?" if close else f"see moe-inspector {command} --help"
        message = f"{message} ({hint})"
    return f"{prog}: error: {message}"


def _reader_went_away() -> int:
    """The reader of stdout closed it (`info T | head`): stop quietly, as Unix tools do, with the
    status of a process ended by SIGPIPE. stdout goes to /dev/null so that the flush at exit cannot
    raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
