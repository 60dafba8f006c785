"""Transcript ingest: agent CLIs' conversations into the store (see `service.py`), and their status."""

from threadloom.ingest.report import PassReport, SourcePass, transcript_status
from threadloom.ingest.service import LEASE, IngestConfig, Ingester

__all__ = ["LEASE", "IngestConfig", "Ingester", "PassReport", "SourcePass", "transcript_status"]
