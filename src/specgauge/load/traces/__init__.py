"""Timed traces: read streaming (formats, selection), built into a suite with trace times (replay)."""
