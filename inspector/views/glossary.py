"""The words the app shows, each explained once: the tooltips of the views say the same as
docs/glossary.md (the tests hold them equal). `explain(text)` gives the entries a sentence uses, for
the tooltip of a headline or a readout.
"""

from __future__ import annotations

import re

#: Term -> what it means, in the order docs/glossary.md lists them.
GLOSSARY: dict[str, str] = {
    "A": "the reference run of a comparison: the run whose tokens and routing are taken as given",
    "B": "the run compared with A; every sentence says what B does differently from A",
    "reference": "the run every other run of a condition is compared with (A); the explanation table's, "
                 "else the condition's first run",
    "request": "one prompt as it was sent, held by a batch row of every run that served it",
    "condition": "a way of running the batch (routing, capacity factor, batch composition) that a group "
                 "of runs shares",
    "probe": "the row whose request is followed across the batch compositions",
    "prompt | generation": "the line between the prompt's tokens and the tokens the model generated",
    "t*": "the first position where B's token differs from A's; past it the inputs differ, so nothing "
          "after it is compared",
    "first difference": "the earliest routing decision (position, layer) where B's routing leaves A's, "
                        "as recorded; what it is called until explain proves a cause",
    "first differing decision": "in each layer, the first position where the experts chosen or kept differ",
    "proven cause": "an event that explain's counterfactual reruns show to make the difference: undoing it "
                    "alone gives B A's tokens",
    "counterfactual rerun": "a rerun of the recorded batch with one thing changed, to test whether that "
                            "thing causes the divergence",
    "capacity": "the most tokens an expert takes in one group; a token past it is dropped",
    "kept": "a chosen expert that processed the token",
    "dropped": "a chosen expert that did not process the token because its slots were full",
    "router probability": "the softmax of the router's logits: how strongly the router prefers each expert",
    "expert choice": "what a serving engine records instead of router probabilities: which experts it "
                     "chose, first and second",
    "A − B": "A's router probability minus B's, at one layer, position and expert: positive where A "
             "prefers the expert more, negative where B does, 0 where they agree",
    "split": "in the compare view, the position where the lower panel changes from showing A to showing B",
    "flicker": "showing A and B in turn over the same cells, so that what differs blinks",
    "not recorded": "a value the trace does not hold (a serving engine keeps no router logits and no "
                    "log-probabilities of prompt tokens): drawn as a hatched gap, never as a value",
    "not compared": "positions after t*, where A and B read different tokens",
    "KL(A‖B)": "how far B's next-token distribution is from A's, in nats (0: the same)",
    "max |logit difference|": "the largest difference between A's and B's next-token logits over the "
                              "vocabulary",
    "top-2 margin": "A's top next-token logit minus its second: how near the next token was to a tie",
    "U(N)": "the number of distinct completions among N runs of one request",
    "completion cluster": "the runs that produced the same completion",
    "MoE layer": "a mixture-of-experts layer, counted from 0; the model layer is the model's own number "
                 "of that layer",
    "router flip": "the router chose other experts because its logits differed",
    "seeded random": "a seeded random choice (of a router that samples) differed",
    "renormalization": "the chosen experts' weights were renormalized differently",
    "upstream numeric": "a floating-point difference before the router changed what follows",
    "output numeric": "routing was identical; a floating-point difference at the output flipped the "
                      "next token",
    "numeric routing": "routing differs without a capacity limit: a floating-point difference changed the "
                       "router's choice",
    "token near-tie": "the next token was nearly tied between two candidates, so a tiny difference "
                      "flipped it",
    "mixed": "a minimal set of events of more than one kind makes the difference",
    "unexplained": "no cause was found; the goal is that none is",
    "unconfirmed": "the counterfactual reruns did not confirm the cause observed",
    "not reproduced": "a rerun of the recorded batch did not give the recorded tokens",
    "causal map": "for a split, how much each routing cell where A and B differ moves the logit "
                  "difference at t* (the other run's token minus the run's own) when it takes the other "
                  "run's decision",
    "position-matched null": "random routing changes of the same size at cells where A and B agree, at the "
                             "same kind of position (the prompt, or the same distance to t*): what a change "
                             "there does by chance",
    "beats its null": "moves the logit difference more than the null's draws do, at a corrected 5% level",
    "near-tie": "a run's own token leads by no more than what most random changes of its strongest "
                "cell's size at its position do (at least half of the null's draws move it that far), so "
                "no cell is called the cause",
    "decisive": "not a near-tie, and a cell beats its null and alone flips its run's token: that cell "
                "decides the split",
    "no decisive cell": "neither a near-tie nor a cell that beats its null and alone flips the token",
    "borderline": "the near-tie share's 95% interval holds one half: the draws cannot tell a near-tie from "
                  "none",
}


def explain(text: str) -> str:
    """The glossary's entries for the terms `text` uses, one a line ('' for none)."""
    lines = []
    for term, meaning in GLOSSARY.items():
        if len(term) == 1:  # "A" and "B" are explained where a run is named by its letter
            continue
        if re.search(r"(?<![\w])" + re.escape(term) + r"(?![\w])", text, flags=re.IGNORECASE):
            lines.append(f"{term}: {meaning}")
    return "\n".join(lines)


def tip(*terms: str) -> str:
    """A tooltip of the glossary's entries for `terms`."""
    return "\n".join(f"{term}: {GLOSSARY[term]}" for term in terms)


def markdown() -> str:
    """docs/glossary.md's list of terms."""
    return "\n".join(f"- **{term}**: {meaning}." for term, meaning in GLOSSARY.items()) + "\n"
