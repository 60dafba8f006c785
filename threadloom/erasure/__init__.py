"""Erasure: `forget` a user's own transcripts, memories and notes by session, project, source, time or text,
removing the text from the rows, the full-text index, the vectors and the file's bytes."""
