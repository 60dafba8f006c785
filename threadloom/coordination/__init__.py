"""Several agents at once: presence, signals between sessions, catching up."""
