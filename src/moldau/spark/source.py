"""The ``moldau`` PySpark data source: Spark's Kafka source/sink schema and options, in Python."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .options import OptionError

__all__ = ["MoldauDataSource", "kafka_schema"]


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders=true)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def _value_format(options: Any) -> Any:
    from .options import _lower
    from .valueformat import parse_value_format

    opts = _lower(options)
    topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
    if "assign" in opts:
        import json

        try:
            topics = list(json.loads(opts["assign"]))
        except (ValueError, TypeError):
            topics = []
    return parse_value_format(opts, topics, sink=False)


def _include_headers(options: Any) -> bool:
    v = {str(k).lower(): v for k, v in options.items()}.get("includeheaders", "false")
    return str(v).strip().lower() in ("true", "1", "yes")


class MoldauDataSource(DataSource):
    """``spark.read/readStream.format("moldau")`` and ``df.write/writeStream.format("moldau")``.

    Register with ``moldau.spark.register(spark)``. The options are Spark's Kafka source/sink options;
    see docs/spark.md.
    """

    @classmethod
    def name(cls) -> str:
        return "moldau"

    def schema(self) -> StructType:
        base = kafka_schema(_include_headers(self.options))
        vf = _value_format(self.options)
        if vf is None:
            return base
        from .valueformat import source_value_type, with_value_type

        return with_value_type(base, source_value_type(vf)[0])

    def _check_schema(self, schema: StructType) -> None:
        expected = kafka_schema(_include_headers(self.options))
        if _value_format(self.options) is not None and "value" in schema.names:
            from .valueformat import with_value_type

            expected = with_value_type(expected, schema["value"].dataType)  # resolved again by the reader
        if schema != expected:
            raise OptionError("the moldau source has a fixed schema (Spark's Kafka schema) and cannot be "
                              f"given a custom one: expected {expected.simpleString()}, got "
                              f"{schema.simpleString()}")

    def reader(self, schema: StructType) -> DataSourceReader:
        from .reader import MoldauBatchReader

        self._check_schema(schema)
        return MoldauBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .reader import MoldauStreamReader

        self._check_schema(schema)
        return MoldauStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import make_batch_writer

        return make_batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .writer import make_stream_writer

        return make_stream_writer(self.options, schema, overwrite)
