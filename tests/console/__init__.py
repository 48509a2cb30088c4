"""Tests of the operator's queries the CLI and the web share."""
