"""The cause of a divergent run as table fields, for the tables of the pair and runs views: the cause
shown, whether counterfactual reruns confirmed it and a proof is stored, and where its event is, read
from the analysis' structured results (`Verdict`, `ExplainRecord`, `CauseText`), never from the
sentences made of them. No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass

from inspector.figure_data.table import BOOLEAN, INTEGER, TEXT, Column
from traces.analysis import Verdict
from traces.analysis.proof import NO_PROOF


@dataclass(frozen=True)
class CauseEvent:
    """The event a run's cause points at: the proof's first event when a proof is stored, else the
    first difference of the recorded routing."""

    position: int          # -1 none
    layer: int             # MoE layer; -1 for the next-token logits (no layer) or none
    proof_events: int = 0  # events in the proof (1 single, more a 1-minimal set); 0 no proof

    def describe(self) -> str:
        """'proven at position 31, layer 0 (3 events, minimal set)', or 'first difference (no proof yet)'."""
        if not self.proof_events:
            return NO_PROOF
        size = f" ({self.proof_events} events, minimal set)" if self.proof_events > 1 else ""
        return f"proven at position {self.position}, layer {self.layer}{size}"


#: The cause's columns, in the order both tables give them.
COLUMNS = (
    Column("cause", TEXT, "the cause: the one explain's counterfactual reruns confirmed, else the kind of "
                          "the first difference (docs/experiments.md#cause-of-a-divergence)",
           empty="the run does not diverge"),
    Column("confirmed", BOOLEAN, "explain's counterfactual reruns confirmed the cause",
           empty="the run does not diverge"),
    Column("proven", BOOLEAN, "an event, or a minimal set of events, is proven to carry the split: its "
                              "intervention alone restores the other run's tokens through t*",
           empty="the run does not diverge"),
    Column("proof_events", INTEGER, "events in the proof (1: one event; more: a 1-minimal set)",
           empty="no proof is stored"),
    Column("cause_position", INTEGER, "position of the cause's event: the proof's first event, else the "
                                      "first difference", empty="the run does not diverge"),
    Column("cause_layer", INTEGER, "MoE layer of the cause's event",
           empty="the run does not diverge, or its event is in the next-token logits (no layer)"),
)


def cause_fields(diverged: bool, cause: str, confirmed: bool, event: CauseEvent | None) -> dict[str, object]:
    """The values of `COLUMNS` for one run (None: empty); `event` None for a run that does not diverge."""
    if event is None or not diverged:
        event = CauseEvent(-1, -1)
    return {
        "cause": cause if diverged else None,
        "confirmed": bool(confirmed) if diverged else None,
        "proven": event.proof_events > 0 if diverged else None,
        "proof_events": event.proof_events or None,
        "cause_position": event.position if event.position >= 0 else None,
        "cause_layer": event.layer if event.position >= 0 and event.layer >= 0 else None,
    }


#: When the fields of the dropped candidate are empty.
NOT_A_DROP = "the first difference is not a dropped candidate"

#: The first difference of a pair and the candidate it dropped, when it is a drop (the pair's table).
FIRST_DIFFERENCE = (
    Column("first_difference", TEXT, "kind of the first difference of the recorded routing, walking "
                                     "positions then layers (identical: none)"),
    Column("first_difference_position", INTEGER, "its position", empty="the runs do not differ"),
    Column("first_difference_layer", INTEGER, "its MoE layer",
           empty="the runs do not differ, or only in the next-token logits (no layer)"),
    Column("candidate_run", TEXT, "the run that dropped a candidate at the first difference",
           empty=NOT_A_DROP),
    Column("candidate_row", INTEGER, "batch row of the dropped candidate in that run", empty=NOT_A_DROP),
    Column("candidate_expert", INTEGER, "the expert that refused it", empty=NOT_A_DROP),
    Column("candidate_choice", INTEGER, "its choice rank (1 = first choice)", empty=NOT_A_DROP),
    Column("candidate_slot", INTEGER, "its place in the expert's queue (0 = first)", empty=NOT_A_DROP),
    Column("candidate_capacity", INTEGER, "capacity of its group",
           empty=f"{NOT_A_DROP}, or its capacity is unknown"),
    Column("candidate_group", INTEGER, "its capacity group", empty=NOT_A_DROP),
    Column("candidate_step", INTEGER, "forward step that routed it", empty=NOT_A_DROP),
)


def first_difference_fields(v: Verdict) -> dict[str, object]:
    """The values of `FIRST_DIFFERENCE` for verdict `v` (None: empty)."""
    d = v.displacement
    has = v.position >= 0
    return {
        "first_difference": v.cause,
        "first_difference_position": v.position if has else None,
        "first_difference_layer": v.layer if has and v.layer >= 0 else None,
        "candidate_run": d.run if d else None,
        "candidate_row": d.row if d else None,
        "candidate_expert": d.expert if d else None,
        "candidate_choice": d.rank + 1 if d else None,
        "candidate_slot": d.slot if d else None,
        "candidate_capacity": d.capacity if d and d.capacity >= 0 else None,
        "candidate_group": d.group if d else None,
        "candidate_step": d.step if d else None,
    }
