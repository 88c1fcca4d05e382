"""The MoE routing trace format: schema, streaming writer, lazy reader, validation (numpy + h5py only)."""

from traces.errors import TraceError
from traces.reader import Run, Trace, open_trace
from traces.schema import FORMAT_VERSION
from traces.validate import Problem, validate
from traces.writer import TraceWriter

__all__ = ["FORMAT_VERSION", "Problem", "Run", "Trace", "TraceError", "TraceWriter", "open_trace", "validate"]
