"""Audit checks, one module per group (integrity, S1 ... S6, sources)."""
