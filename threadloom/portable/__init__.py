"""Export and import (issue 20): what a user owns, as JSONL files one per kind plus Markdown for people,
merged back into any store without duplicates. `export.py` writes, `importer.py` reads and merges (the
name `import` is a Python keyword), `registry.py` lists the kinds, one small module each."""
