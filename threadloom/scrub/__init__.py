"""Secret scrubbing before anything is persisted: `scrub(text)` (pure) and the `Scrubber` the services call."""

from threadloom.scrub.engine import Scrubbed, placeholder, scrub
from threadloom.scrub.policy import SCRUB, Scrubber, collecting

__all__ = ["SCRUB", "Scrubbed", "Scrubber", "collecting", "placeholder", "scrub"]
