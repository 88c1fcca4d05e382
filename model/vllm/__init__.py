"""vLLM as a recording engine: its offline engine (`offline`) and its OpenAI-compatible server
(`server`) generate each batch composition; `outputs` and `arrays` turn what they return (tokens,
routed expert ids, top-k log-probabilities) into a trace run (docs/engines.md). Nothing here imports
vLLM until an engine is started, so the rest of the project never needs it.
"""
