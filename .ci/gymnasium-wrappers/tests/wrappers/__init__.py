"""Test suite for the wrappers."""
