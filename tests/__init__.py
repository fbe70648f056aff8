"""The test suite; `tests.support` holds what its modules share."""
