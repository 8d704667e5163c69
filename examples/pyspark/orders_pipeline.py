"""Order totals per customer per minute, from a Kafka topic of JSON order events to another
topic, with PySpark Structured Streaming and Spark's own Kafka connector.

    python examples/pyspark/orders_pipeline.py --bootstrap-servers 127.0.0.1:9092

reads ``orders`` (``{"order_id": "o-1", "customer": "alice", "amount": 12.5,
"event_time": "2026-01-01T10:00:05Z"}``), sums each customer's orders in one-minute event-time
windows, and writes each changed total to ``order-totals``: key ``customer@window start``,
value a JSON object. The newest record of a key is that window's current total (output mode
update), so a compacted topic or a consumer keeping the last value per key has the answer.

The watermark (``--watermark``, 30 seconds) bounds how late an event may be: Spark drops events
older than the latest event time seen minus the watermark, and forgets a window's state once the
watermark passes its end. The checkpoint directory holds the Kafka offsets read so far and the
windows' state: started again with the same ``--checkpoint``, the query resumes where it stopped
and keeps adding to the same totals.

On a cluster, the same file runs under spark-submit; see docs/pyspark.md.
"""
from __future__ import annotations

import argparse
import glob
import os

WINDOW = "1 minute"


def connector_package() -> str:
    """Maven coordinates of Spark's Kafka connector for the installed PySpark (Scala 2.13 is
    the only Scala that Spark 4 is built for)."""
    import pyspark
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def session(master: str | None, jars: str | None):
    """A SparkSession with the connector: the jars given (a directory or a comma-separated
    list), else spark.jars.packages, which Spark resolves from Maven Central. Under spark-submit
    (which starts the JVM first and passes --master and --packages itself) nothing is set."""
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName("orders-pipeline")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        builder = builder.master(master or "local[2]")
        if jars:
            paths = sorted(glob.glob(os.path.join(jars, "*.jar"))) if os.path.isdir(jars) \
                else jars.split(",")
            builder = builder.config("spark.jars", ",".join(paths))
        else:
            builder = builder.config("spark.jars.packages", connector_package())
        builder = (builder.config("spark.sql.shuffle.partitions", "2")
                   .config("spark.ui.enabled", "false"))
    return builder.getOrCreate()


def totals(spark, bootstrap_servers: str, topic: str, watermark: str,
           starting_offsets: str = "earliest"):
    """The streaming DataFrame of (key, value) records to write: per customer and window, the
    order count and the revenue."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

    schema = StructType([StructField("order_id", StringType()),
                         StructField("customer", StringType()),
                         StructField("amount", DoubleType()),
                         StructField("event_time", TimestampType())])
    orders = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", starting_offsets)
              .load()
              .select(F.from_json(F.col("value").cast("string"), schema).alias("order"))
              .select("order.*")
              .where(F.col("customer").isNotNull() & F.col("event_time").isNotNull()))
    per_window = (orders.withWatermark("event_time", watermark)
                  .groupBy(F.window("event_time", WINDOW), "customer")
                  .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("revenue")))
    start = F.date_format(F.col("window.start"), "yyyy-MM-dd'T'HH:mm:ss'Z'")
    end = F.date_format(F.col("window.end"), "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return per_window.select(
        F.concat_ws("@", "customer", start).alias("key"),
        F.to_json(F.struct(F.col("customer"), start.alias("window_start"),
                           end.alias("window_end"), "orders", "revenue")).alias("value"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--input", default="orders", help="topic of JSON order events")
    parser.add_argument("--output", default="order-totals", help="topic of the totals")
    parser.add_argument("--checkpoint", default="/tmp/orders-pipeline-checkpoint",
                        help="where the query keeps its offsets and state (a shared "
                             "filesystem such as HDFS or S3 on a cluster)")
    parser.add_argument("--watermark", default="30 seconds")
    parser.add_argument("--trigger", default="5 seconds",
                        help="processing-time interval between micro-batches")
    parser.add_argument("--available-now", action="store_true",
                        help="process what the topic holds now, then stop (a batch-like run "
                             "that resumes from the checkpoint next time)")
    parser.add_argument("--master", help="Spark master when not run by spark-submit "
                                         "(default local[2])")
    parser.add_argument("--jars", help="the Kafka connector's jars (a directory or a comma-"
                                       "separated list) instead of resolving "
                                       f"{connector_package()} from Maven Central")
    args = parser.parse_args(argv)

    spark = session(args.master, args.jars)
    spark.sparkContext.setLogLevel("WARN")
    writer = (totals(spark, args.bootstrap_servers, args.input, args.watermark)
              .writeStream.format("kafka")
              .option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("topic", args.output)
              .option("checkpointLocation", args.checkpoint)
              .outputMode("update"))
    writer = writer.trigger(availableNow=True) if args.available_now \
        else writer.trigger(processingTime=args.trigger)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    if query.exception() is not None:
        print(f"the query failed: {query.exception()}")
        return 1
    for progress in query.recentProgress:
        print(f"batch {progress['batchId']}: {progress['numInputRows']} orders read, "
              f"watermark {progress.get('eventTime', {}).get('watermark', '-')}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
