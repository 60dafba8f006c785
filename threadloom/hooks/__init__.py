"""The agent CLIs' lifecycle hooks (`threadloom hook ...`). Standard library only: a hook runs at every
session's start, so its start-up is the user's wait; the work is done by the warm daemon."""
