"""One warm threadloom daemon per OS user, and the thin stdio bridge that agent CLIs start.

`protocol`, `bridge` and `control` import only the standard library: the bridge
runs once per agent conversation and its start-up time is the user's wait.
"""
