"""Integration tests (real broker processes). A package, so that its test modules (``integration.test_admin``)
never clash with same-named modules in other test folders (tests/client/test_admin.py). Its helper modules
(brokerproc, kafkautil, clients, ...) stay importable by their plain names: conftest.py puts this folder on
sys.path, as tests/client and tests/spark and bench/ do."""
