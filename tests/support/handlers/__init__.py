"""Tests of handler registries the tests load into real workers."""
