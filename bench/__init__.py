"""The benchmark runner and the page checks it shares with the tests."""
