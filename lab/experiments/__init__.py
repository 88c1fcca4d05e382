"""The recorder's experiments (docs/experiments.md): each one runs the model and writes one trace.

- `options`: the settings of a recording and the parsing of option values (no torch).
- `compositions`: seeded batch compositions (partners, batch size, probe row).
- `conditions`: named routing and kernel conditions (dense control, dropless, cf per batch, ...).
- `session`: the models, the request pool and a trace being written, one run at a time.
- `measures`: U(N) over the probe's completions, drop shares; `tables`: plain-text tables.
- `e0_kernels`, `e1_table`, `e3_capacity`, `e4_near_tie`, `e7_cost`, `example`: the experiments.
- `engine`, `engine_recording`: e1, example and against through a serving engine (vLLM), each run's
  routes checked before it is written.
- `progress`: a plain text progress bar; `cli`: the `moe-inspector record` options and entry point.
"""


class ExperimentError(ValueError):
    """A bad option value or unusable input; the command line prints it and exits with status 2."""
