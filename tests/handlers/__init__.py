"""Tests of the handler API: registry, context, leases."""
