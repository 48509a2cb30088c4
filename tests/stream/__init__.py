"""Tests of the stream side: producer, groups, dead letters, the wire, server topologies."""
