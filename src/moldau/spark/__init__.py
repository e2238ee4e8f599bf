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
pyarrow, numpy) and, on a cluster, moldau installed on the executors too.
"""

from __future__ import annotations

from typing import Any

from .options import OptionError
from .source import MoldauDataSource, kafka_schema

__all__ = ["MoldauDataSource", "OptionError", "kafka_schema", "register"]


def register(spark: Any) -> None:
    """Register the ``moldau`` data source with a SparkSession (once per session)."""
    spark.dataSource.register(MoldauDataSource)
