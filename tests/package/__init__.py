"""Tests of the package as a whole: layers, indexes, public API, errors, security."""
