"""Conformance kit for dynamic backends."""
