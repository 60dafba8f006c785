"""Secret scrubbing before anything is persisted: `scrub(text)` (pure) and the `Scrubber` the services call."""

from threadloom.scrub.engine import Scrubbed, placeholder, scrub
from threadloom.scrub.policy import SCRUB, Collected, Scrubber, collect, collecting

__all__ = ["SCRUB", "Collected", "Scrubbed", "Scrubber", "collect", "collecting", "placeholder", "scrub"]
