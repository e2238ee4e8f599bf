"""The test harness: what every test directory (and bench/) shares to start real brokers and drive them.

Importable as the package ``harness``: pytest puts tests/ on sys.path (``pythonpath`` in pyproject.toml);
scripts outside pytest (bench/, tools/) put it there themselves. Tests import it by its package name::

    from harness.brokerproc import BrokerProcess
    from harness.kafkautil import unique_topic

Modules:

* ``brokerproc``: broker processes (moldau, the tansu reference broker, a three-broker cluster, Apache Kafka).
* ``fixtures``: the broker fixtures (``broker``, ``make_topic``, ...) a directory's conftest.py imports, and
  the broker markers' handling.
* ``kafkautil``, ``clients``, ``rawkafka``: topics and clients; raw requests on a socket.
* ``faultproxy``: a TCP proxy that injects faults between a client and a broker.
* ``cluster``, ``clusterutil``: the ZooKeeper clusters of tests/cluster and their fixtures.
* ``clientutil``, ``consoleutil``, ``registryutil``: the moldau client, console and schema registry in tests.
* ``spark_helpers``, ``sparkkafka``, ``spark_cluster``, ``apiproxy``: the Spark tests.
* ``jvm``, ``jvmtarget``, ``connectproc``: Kafka's Java clients, tools and applications (tests/jvm).
* ``gobuild``: the Go programs of tests/go.
* ``groups_harness``: drives the group coordinator in process (tests/unit).
"""
