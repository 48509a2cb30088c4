"""Tests of logs, tracing, metrics, the exporter, Prometheus."""
