"""How much a claim is believed: a smoothed ratio of weighted support to contradiction, and the discrete
tier that gates what an agent does with it.

Weights are in units of one piece of the user's own evidence (a statement, a message of theirs): weight
1.0 from the user, half that from an automated loop (a miner, a validator, a spawned child), so a loop
that reads a claim back out of the brief and "confirms" it buys half as much as the user saying it.

Confidence is the mean of a Beta(1 + S, 1 + C) posterior (Laplace's rule of succession), where S and C
are the weighted support and contradiction. The uniform prior is the least informative one: a claim
with no evidence sits at 0.5 (no belief either way), one statement of the user's gives 0.67, and
"high" (0.8) needs three unopposed statements, so a single remark never reads as settled. Thread
Keeper's anchor uses (S - C) / (S + C + 3) on [-1, 1]; the posterior mean is on the scale of a
probability, which the bands below and a reader can take at face value.

Tiers follow the anchor's thresholds (weights as above):
    hypothesis -> observed:   S >= 2.0 (two of the user's own pieces, or four automated ones)
    observed -> validated:    S >= 4.0 and no contradiction in the last 14 days
    validated -> observed:    a contradiction in the last 14 days (the user pushed back)
    any -> disputed:          C > S
    disputed -> hypothesis:   S > C again (recovery starts over, it does not jump back up)
A claim moves at most one step per piece of evidence, so every step is its own timestamped transition
and a single weighty write cannot carry a new claim straight to validated. Tiers change only when
evidence is written, never on a read or with the passing of time: the picture does not churn.
"""

from __future__ import annotations

from typing import Final

PRIOR_SUPPORT: Final = 1.0
PRIOR_CONTRADICT: Final = 1.0
AUTOMATED_DISCOUNT: Final = 0.5
OBSERVED_SUPPORT: Final = 2.0
VALIDATED_SUPPORT: Final = 4.0
QUIET_MS: Final = 14 * 24 * 3600 * 1000  # no contradiction this recently, to be validated
LOW: Final = 0.6  # under this a claim is "low" and left out of the synthesis
HIGH: Final = 0.8


def confidence(support: float, contradict: float) -> float:
    return (support + PRIOR_SUPPORT) / (support + contradict + PRIOR_SUPPORT + PRIOR_CONTRADICT)


def band(support: float, contradict: float) -> str:
    """low / medium / high, or disputed when the contradiction outweighs the support."""
    if contradict > support:
        return "disputed"
    value = confidence(support, contradict)
    return "high" if value >= HIGH else "medium" if value >= LOW else "low"


def effective_weight(weight: float, origin: str) -> float:
    return weight * (AUTOMATED_DISCOUNT if origin == "automated" else 1.0)


def next_tier(
    current: str, support: float, contradict: float, last_contradict_at: int | None, now: int
) -> tuple[str, str] | None:
    """The one step the evidence now calls for, with its reason, or None to stay."""
    recent = last_contradict_at is not None and now - last_contradict_at < QUIET_MS
    if contradict > support and current != "disputed":
        return "disputed", f"contradiction {contradict:g} outweighs support {support:g}"
    if current == "disputed":
        return (
            ("hypothesis", f"support {support:g} overtook contradiction {contradict:g}")
            if support > contradict
            else None
        )
    if current == "validated" and recent:
        return "observed", "contradicted in the last 14 days"
    if current == "hypothesis" and support >= OBSERVED_SUPPORT:
        return "observed", f"support {support:g} >= {OBSERVED_SUPPORT:g}"
    if current == "observed" and support >= VALIDATED_SUPPORT and not recent:
        return "validated", f"support {support:g} >= {VALIDATED_SUPPORT:g}, no contradiction in 14 days"
    return None
