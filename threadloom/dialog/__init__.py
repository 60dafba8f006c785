"""Ingested conversations, read back: dialog search (`search.py`), paging through a session (`read.py`) and
what happened on a day or a range (`day.py`). The store's reads are in `store/dialog.py`; every one is
limited to the caller's own transcripts."""
