"""The Spark driver of the Spark-cluster pipeline test (``test_spark_cluster.py``), run as its own process:

    python spark_driver.py MASTER ARCHIVE BOOTSTRAP OUT CHECKPOINT COUNTS_TOPIC EVENTS SEED MAX_OFFSETS

It runs the example pipeline (``examples/clickstream.py``) as a structured-streaming query with an
``availableNow`` trigger cut into micro-batches of ``MAX_OFFSETS`` records, checkpoints in ``CHECKPOINT``, the
Parquet sink (one directory per batch id, overwritten when a batch is replayed: exactly once) in ``OUT``. A
query that fails (a lost executor or broker past Spark's retries) is started again from its checkpoint. One
JSON line per new micro-batch (``{"batch": id, "rows": n}``), per restart, and at the end ``{"result":
{...}}`` with the comparison against the counts computed in plain Python and the seconds the query took.
``ARCHIVE`` ``-`` means no ``spark.archives`` (local mode).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def main() -> int:
    master, archive, bootstrap, out, checkpoint, counts = sys.argv[1:7]
    n, seed, max_offsets = (int(x) for x in sys.argv[7:10])
    sys.path.insert(0, str(EXAMPLES))
    import clickstream
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import SparkSession

    import moldau.spark

    b = (
        SparkSession.builder.master(master)
        .appName("moldau-faults-pipeline")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if archive != "-":
        b = (
            b.config("spark.archives", archive + "#environment")
            .config("spark.executor.memory", "512m")
            .config("spark.executor.cores", "1")
            .config("spark.cores.max", "2")
            .config("spark.task.maxFailures", "8")
        )
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    moldau.spark.register(spark)
    t0 = time.monotonic()
    restarts = 0
    last = -1
    while True:
        q = clickstream.start_job(
            spark, bootstrap, out, checkpoint, "availableNow", max_offsets=max_offsets, counts=counts
        )
        try:
            while not q.awaitTermination(0.5):
                p = q.lastProgress
                if p and p["batchId"] != last:
                    last = p["batchId"]
                    emit({"batch": last, "rows": p["numInputRows"], "t": round(time.monotonic() - t0, 1)})
            break
        except StreamingQueryException as e:
            restarts += 1
            emit({"restart": str(e).splitlines()[0][:300]})
            if restarts > 5:
                raise
    seconds = time.monotonic() - t0
    report = clickstream.verify(spark, bootstrap, out, n, seed, counts=counts)
    report.update(seconds=round(seconds, 1), restarts=restarts, records_per_s=round(n / seconds, 1))
    emit({"result": report})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
