"""Learning loops: turn what happened in sessions into candidates, skills and lessons."""
