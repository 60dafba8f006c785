"""Style memory (issue 18): how the user writes (habits learned from their own messages and the host agent's
hints, applied only past the activation gate) and how they like to work (the interaction profile), given to
agents as a capsule with a revision. `StyleMemory` (service.py) and `Learner` (learn.py) are the entries."""

from threadloom.style.learn import Learner, PassReport
from threadloom.style.service import StyleMemory

__all__ = ["Learner", "PassReport", "StyleMemory"]
