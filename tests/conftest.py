"""Shared pytest configuration for the unit and integration tests."""
