"""Integration tests (real broker processes). A package, so that its test modules (``integration.test_admin``)
never clash with same-named modules in other test folders (tests/client/test_admin.py). The helpers they use
are the test harness's package, ``harness`` (tests/harness)."""
