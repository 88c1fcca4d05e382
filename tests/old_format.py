"""A trace as the writer left it before the run summary table: the same file without
/tables/run_summary (and without /tables when that was its only table)."""

import h5py

from traces.schema import RUN_SUMMARY_TABLE, TABLES


def without_run_summaries(path):
    """Remove the run summary table of the trace at `path`; returns `path`."""
    with h5py.File(path, "r+") as f:
        del f[f"{TABLES}/{RUN_SUMMARY_TABLE}"]
        if not len(f[TABLES]):
            del f[TABLES]
    return path
