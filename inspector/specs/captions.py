"""What each view's exported figure shows, in words: the caption an export can write beside the
figure (`moe-inspector export --caption`, the Export dialog's "Caption file"), so that the figure
itself carries no sentence about the app and a paper's caption starts from these words. No Qt here.

Each function takes the view's figure data and returns its caption's paragraphs; `caption_text`
adds what a compact layout left out.
"""

from __future__ import annotations

from traces.schema import DROPLESS_CAPACITY


def _row(data) -> str:
    """'run R, row B (request Q), positions 0-T' of a one-row figure's data."""
    return f"run {data.run}, row {data.row} (request {data.request}), positions 0-{data.n_positions - 1}"


def routing_caption(data) -> list[str]:
    if data.probabilities:
        what = (f"router probability of each expert at each position; chosen experts framed, candidates "
                f"dropped for lack of capacity marked red ({int((~data.kept).sum())} dropped)")
    else:
        what = "the experts chosen at each position, by choice (the router's logits were not recorded)"
    return [f"Routing of {_row(data)}, MoE layer {data.layer} (model layer {data.model_layer}): {what}; "
            f"a dashed line between prompt ({data.prompt_len} tokens) and generation."]


def layers_caption(data) -> list[str]:
    return [f"Every MoE layer of {_row(data)}: the first-choice expert of each token in each layer, cells "
            f"with a dropped candidate marked red ({int(data.n_dropped.sum())} dropped candidates)."]


def load_caption(data) -> list[str]:
    step = "the prefill (step 0)" if data.step == 0 else f"decode step {data.step}"
    capacity = "dropless (no capacity)" if data.capacity == DROPLESS_CAPACITY else f"capacity {data.capacity}"
    return [f"Expert load of run {data.run} at {step}, MoE layer {data.layer}, group {data.group} "
            f"({capacity}): candidates requested and kept per expert ({int(data.requested.sum())} requested, "
            f"{int(data.kept.sum())} kept, {int(data.dropped.sum())} dropped), and each row's share."]


def text_caption(data) -> list[str]:
    return [f"The tokens of {_row(data)}: {data.prompt_len} prompt tokens, then "
            f"{data.n_positions - data.prompt_len} generated, shaded by the measure the figure names."]


def pair_caption(data) -> list[str]:
    """The runs compared and the cause: its headline, sentence, reruns and numbers."""
    cause = data.cause
    out = [f"Run A = {data.run_a} row {data.a.row} and run B = {data.run_b} row {data.b.row} (request "
           f"{data.request}), MoE layer {data.layer} (model layer {data.model_layer}).", cause.headline,
           cause.sentence]
    if cause.counterfactuals:
        out.append("Counterfactual reruns: " + "; ".join(cause.counterfactuals) + ".")
    out += [f"{name}: {value}." for name, value in cause.facts if name != "runs"]
    return out


def compare_caption(data) -> list[str]:
    """The runs compared, what each panel shows, and the largest difference."""
    pair = data.pair
    out = [f"Run A = {data.run_a} row {pair.a.row} and run B = {data.run_b} row {pair.b.row} (request "
           f"{data.request}), MoE layer {data.layer} (model layer {data.model_layer})."]
    if data.recorded:
        out.append(f"Top: A − B, the difference of the router probabilities of each expert at each "
                   f"position, on a diverging scale centred on 0 (largest difference {data.largest():.3g}).")
    else:
        out.append("Top: A − B is absent: a run did not record its router logits, only its choices.")
    out.append(f"Bottom: one heatmap over the same axes, A's routing left of position {data.split} and "
               f"B's from it on; chosen experts framed, dropped candidates crossed.")
    return out


def runs_caption(data) -> list[str]:
    condition = f"condition {data.condition}" if data.condition else "all conditions"
    return [f"{data.n_runs} runs of request {data.request} ({condition}), against reference run "
            f"{data.reference_run}.", f"{data.headline}; {data.first_split}.", data.causes_line]


def caption_text(paragraphs: list[str], left_out: list[str]) -> str:
    """The caption file's text: the view's paragraphs, then what a compact layout left out."""
    out = [p for p in paragraphs if p]
    if left_out:
        out.append("Left out of the figure (too little room on the page): " + "; ".join(left_out) + ".")
    return "\n\n".join(out) + "\n"
