"""Data for the figures: small dataclasses of numpy arrays, computed by pure functions.

No Qt here. The interactive views, the headless export and the tests all draw or check the
same numbers, read from a trace through the public API of `traces/` one slice at a time.
"""
