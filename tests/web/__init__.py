"""Tests of the web console."""
