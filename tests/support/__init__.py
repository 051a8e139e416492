"""Builders that only the tests use."""
