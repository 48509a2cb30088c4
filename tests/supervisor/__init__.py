"""Tests of the supervisor: its rules, forks, signals, systemd."""
