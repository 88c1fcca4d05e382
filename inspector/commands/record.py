"""`moe-inspector record`: run the experiments with the model and write traces.

A thin shell over `lab.experiments.cli`, imported only here and only when needed (with
`explain`, the one place the inspector reaches the model). Bad option values come back as the
experiments' `ExperimentError` and leave as a `UsageError`: exit status 2 with the message.
"""

from __future__ import annotations

import argparse

from inspector.commands.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.experiments import cli

    cli.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from lab.experiments import ExperimentError, cli

    try:
        return cli.run(args)
    except ExperimentError as exc:
        raise UsageError(str(exc)) from None
