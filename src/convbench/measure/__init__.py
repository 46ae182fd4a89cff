"""Measurement: the problem (reference, inputs, checker), Op Time, verify."""
