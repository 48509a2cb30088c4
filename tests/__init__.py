"""The test suite, grouped by the package each test covers (tests/<package>/), with the
helpers in tests/support/ and the fault-injection suite in tests/faults/."""
