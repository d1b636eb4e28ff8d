"""Odradek broker package."""
