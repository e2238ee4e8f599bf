"""moldau for Apache Spark: a PySpark data source named ``moldau`` (batch and streaming, read and write).

::

    import moldau.spark
    moldau.spark.register(spark)
    df = (spark.readStream.format("moldau")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Same schema and options as Spark's Kafka connector (key, value, topic, partition, offset, timestamp,
timestampType[, headers]); see docs/spark.md. Needs ``pip install 'moldau[spark]'`` (pyspark>=4.2,
pyarrow, numpy). On a cluster the executors need moldau and its dependencies too:
``moldau.spark.pack`` builds an archive for ``spark.archives`` (docs/spark.md, "On a cluster").
"""

from __future__ import annotations

from typing import Any

from .options import OptionError
from .source import MoldauDataSource, kafka_schema
from .workers import WorkerPythonError, ensure_worker_python

__all__ = ["MoldauDataSource", "OptionError", "WorkerPythonError", "kafka_schema", "register"]


def register(spark: Any) -> None:
    """Register the ``moldau`` data source with a SparkSession (once per session).

    In local mode (``local``, ``local[N]``, ``local-cluster[...]``) it first makes sure PySpark's Python
    workers run an interpreter that can import moldau: with neither ``PYSPARK_PYTHON`` nor
    ``spark.pyspark.python`` set, PySpark would start them with ``python3`` from PATH, so the session's
    Python functions (this data source included) are switched to the driver's interpreter; an interpreter
    that was set explicitly and cannot import moldau raises :class:`WorkerPythonError` here, naming what to
    set, instead of failing later in every task.
    """
    ensure_worker_python(spark)
    spark.dataSource.register(MoldauDataSource)
