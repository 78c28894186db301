"""Data shipped with the capacity models (seed history of Double-11 volumes)."""
