"""A trace of many runs in a second: one run written by the writer, then as many more runs as asked
made of hard links to its datasets (HDF5's own links, as any reader follows them), each with its own
attributes and its row in the run summary table. What a browser reads of a large trace, without
writing a thousand runs."""

from dataclasses import replace

import h5py

from traces import run_table
from traces.run_table import References
from traces.schema import RUN_SUMMARY_TABLE, RUNS, TABLES
from traces.synthetic import write_synthetic_trace


def linked_trace(path, n_runs: int, **shape):
    """Write one synthetic run (`write_synthetic_trace` keywords `shape`) and link it into `n_runs`
    runs r0000, r0001, ... in write order, each summarised in the table; returns `path`."""
    write_synthetic_trace(path, 1, **shape)
    with h5py.File(path, "r+") as f:
        runs, table = f[RUNS], f[f"{TABLES}/{RUN_SUMMARY_TABLE}"]
        first = runs["r000"]
        columns = {name: table[name].asstr()[()] if name in run_table.TEXT_COLUMNS else table[name][()]
                   for name in run_table.COLUMN_NAMES}
        summary = run_table.from_columns(columns)[0][0]
        references, rows = References(), []
        attrs = dict(first.attrs)
        for i in range(n_runs):
            name = f"r{i:04d}"
            group = runs.create_group(name)
            for key, value in {**attrs, "index": i, "label": f"copy {i}"}.items():
                group.attrs[key] = value
            for key in first:
                group[key] = first[key]   # a hard link: the same datasets
            copy = replace(summary, run=name, index=i, label=f"copy {i}")
            rows.append(run_table.row(references.place(copy)))
        del runs["r000"]
        for name in run_table.COLUMN_NAMES:  # the rows at once (the writer adds them one by one)
            table[name].resize((n_runs,))
            table[name][:] = [row[name] for row in rows]
    return path
