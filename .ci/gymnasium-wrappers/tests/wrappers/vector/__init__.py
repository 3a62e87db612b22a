"""Test suite for `gymnasium.wrappers.vector`."""
