"""The details panel under the run browser: the file's metadata and the selected run's, as small
key/value tables."""

from __future__ import annotations

import html
import json
import os

from inspector.figure_data.browser import RunInfo
from inspector.qt import Qt, QtWidgets
from inspector.terminal import printable_line
from traces.route_check import RouteCheck

#: Model settings named first in the details, in this order: the shipped model's, then a Hugging Face
#: config's. The others follow by name, or, past `SHOWN` settings, are counted.
MODEL_KEYS = ("n_layers", "moe_layers", "n_experts", "top_k", "d_model", "n_heads", "expert_d_ff",
              "dense_d_ff", "context", "model_type", "num_hidden_layers", "hidden_size", "num_local_experts",
              "num_experts", "n_routed_experts", "num_experts_per_tok", "intermediate_size",
              "moe_intermediate_size", "num_attention_heads", "vocab_size")
SHOWN = 24


def model_text(config) -> str:
    """A model config (dict, or its JSON) as `key value` pairs, the usual ones first."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return config
    if not isinstance(config, dict):
        return "" if config is None else str(config)
    known = [k for k in MODEL_KEYS if k in config]
    others = sorted(k for k in config if k not in MODEL_KEYS)
    keys = known + others if len(known) + len(others) <= SHOWN else known

    def value(v) -> str:
        if isinstance(v, (list, tuple)):
            return ",".join(str(x) for x in v) or "none"
        if isinstance(v, dict):
            return ", ".join(f"{a} {b}" for a, b in v.items()) or "none"
        return str(v)

    more = len(config) - len(keys)
    tail = f" · and {more} more settings" if more else ""
    return " · ".join(f"{k} {value(config[k])}" for k in keys) + tail


def engine_text(engine) -> str:
    """A serving engine's name, version and every setting it records, as `info` prints them."""
    if not isinstance(engine, dict):
        return ""
    shown = {k: v for k, v in engine.items() if k not in ("name", "package", "version")}
    settings = " · ".join(f"{k} {json.dumps(v) if isinstance(v, dict | list) else v}"
                          for k, v in shown.items())
    name = f"{engine.get('name', '?')} ({engine.get('package', '?')} {engine.get('version', '?')})"
    return f"{name} · {settings}"


def routes_text(run) -> str:
    """What the check of an engine's run found ('' for the project's loop), as `info` says it."""
    if not getattr(run, "not_recorded", None):
        return ""
    check = run.attrs.get("route_check")
    if not isinstance(check, dict):
        return "NOT CHECKED against the router (recorded before the check existed)"
    return RouteCheck.from_attr(check).describe()


def _shown(text: str) -> str:
    """A trace's text as the panel shows it: controls and bidirectional marks escaped, then HTML."""
    return html.escape(printable_line(text))


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f'<tr><td style="color: #606060; padding-right: 8px;">{_shown(k)}</td>'
                    f"<td>{_shown(v)}</td></tr>" for k, v in rows if v)
    return f'<table cellspacing="0" cellpadding="1">{cells}</table>'


def details_html(trace, run, info: RunInfo | None, reference: str | None) -> str:
    """Two small key/value tables: the file (producer, model, tokenizer, kernels, device) and the run."""
    if trace is None:
        return ""
    meta = trace.record
    name = _shown(os.path.basename(trace.path))
    torch = meta.torch_version if meta.torch_version != meta.default("torch_version") else ""
    parts = [f"<b>{name}</b>", _table([
        ("written by", f"{meta.producer or ''}, {meta.created or ''}".strip(", ")),
        ("model", model_text(meta.model_config)),
        ("tokenizer", meta.tokenizer),
        ("kernels", meta.kernel_mode),
        ("device", f"{meta.device} {meta.dtype}" + (f" · torch {torch}" if torch else "")),
        ("seed", str(meta.seed)),
        ("engine", engine_text(meta.engine)),
    ])]
    if run is not None:
        dims = " ".join(f"{k}={v}" for k, v in run.dims.items())
        rows = [("dims", dims)]
        if info is not None:
            rows += [("batch", info.label), ("condition", info.condition), ("experiment", info.experiment),
                     ("routing", info.routing)]
        rows.append(("reference", reference or run.name))
        routes = routes_text(run)
        if "NOT" in routes:  # a run whose routes were not replayed says so first, in red
            parts.insert(0, f'<span style="color: #b00020;"><b>{_shown(routes)}</b></span><br>')
        else:
            rows.append(("routes", routes))
        parts += [f"<br><b>run {_shown(run.name)}</b>", _table(rows)]
    return "".join(parts)


class DetailsPanel(QtWidgets.QScrollArea):
    """A scrollable, selectable block of `details_html`."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QtWidgets.QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.label.setStyleSheet("padding: 4px;")
        self.setWidgetResizable(True)
        self.setWidget(self.label)
        self.setMinimumHeight(90)

    def show_details(self, trace, run, info: RunInfo | None, reference: str | None) -> None:
        self.label.setText(details_html(trace, run, info, reference))

    def text(self) -> str:
        return self.label.text()
