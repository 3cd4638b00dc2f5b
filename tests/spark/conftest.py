"""One SparkSession (local[2], UI off) for every test in tests/spark, and the
data directories they read, written once per session by engine.open + producer.

Not collected when pyspark (or Java) is missing; the README's test command
installs pyspark.  Python workers import this worktree's engine/spark_udfs
(PYTHONPATH is set before the JVM starts).
"""

import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import pyspark  # noqa: F401
    HAVE_SPARK = shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))
except ImportError:
    HAVE_SPARK = False
if not HAVE_SPARK:  # nothing here runs without pyspark and a Java runtime
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def spark():
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"        # the JVM's own address choice: loopback too
    from pyspark.sql import SparkSession

    from spark_udfs.datasource import KafkaEngineDataSource

    s = (SparkSession.builder.master("local[2]")
         .appName("kafka-engine-tests")
         .config("spark.driver.host", "127.0.0.1")          # loopback only (else eth0's address)
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "1g")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(KafkaEngineDataSource)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def spark_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("spark")
