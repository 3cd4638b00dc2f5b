"""Kafka's Java clients as test peers: the sources in ``tests/java/apps`` compiled with ``javac``
against the jars of Apache Kafka 4.0 (``KAFKA_HOME`` or ``../shared/kafka``), run as real JVM
processes.  ``compiled()`` skips, saying why, where there is no JDK or no Kafka distribution."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from tests.serving import find_kafka

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps")

_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{HH:mm:ss,SSS} %-5p [%t] %c{1}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = ${sys:txn.log.level:-warn}
"""


def _sources_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(APPS, "*.java"))):
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


class Jvm:
    """The compiled apps and the classpath to run them with."""

    def __init__(self, home: str, classes: str):
        self.home = home
        self.classes = classes
        self.classpath = os.pathsep.join([classes, os.path.join(home, "libs", "*")])
        self.log_config = os.path.join(classes, "log4j2.properties")
        # e.g. JAVA_APP_OPTS=-Dtxn.log.level=debug: the transaction manager's requests in the log
        self.jvm_options = os.environ.get("JAVA_APP_OPTS", "").split()

    def start(self, main: str, *args: str, log_path: str, env: dict | None = None) -> subprocess.Popen:
        """Run class `main` with `args`; stdout and stderr go to `log_path`."""
        out = open(log_path, "ab")
        try:
            return subprocess.Popen(
                ["java", "-Xmx384m", *self.jvm_options, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 f"-Dlog4j2.configurationFile={self.log_config}", "-cp", self.classpath, main, *args],
                stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})),
                start_new_session=True)
        finally:
            out.close()


def compiled() -> Jvm:
    """The apps compiled once per source digest (cached under the temp dir); skips without a
    JDK (``javac``) or without Kafka's jars."""
    home, why = find_kafka()
    if home is None:
        pytest.skip(why)
    if shutil.which("javac") is None:
        pytest.skip("javac is not on the PATH: Kafka's Java clients need a JDK 17+ "
                    "(Debian's openjdk-17-jdk-headless)")
    classes = os.path.join(tempfile.gettempdir(), f"kafka-engine-java-{_sources_digest()}")
    if not os.path.exists(os.path.join(classes, ".done")):
        # compiled into a fresh directory renamed into place: another test process (pytest -n)
        # compiling at the same time never reads half-written classes
        work = tempfile.mkdtemp(prefix=os.path.basename(classes) + "-", dir=os.path.dirname(classes))
        sources = sorted(glob.glob(os.path.join(APPS, "*.java")))
        res = subprocess.run(["javac", "-nowarn", "-d", work, "-cp", os.path.join(home, "libs", "*"),
                              *sources], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"javac failed:\n{res.stdout}\n{res.stderr}"
        with open(os.path.join(work, "log4j2.properties"), "w") as f:
            f.write(_LOG4J2)
        open(os.path.join(work, ".done"), "w").close()
        if not os.path.exists(os.path.join(classes, ".done")):
            shutil.rmtree(classes, ignore_errors=True)      # a stale, unfinished one (older layout)
        try:
            os.rename(work, classes)
        except OSError:                 # another process got there first
            shutil.rmtree(work, ignore_errors=True)
    return Jvm(home, classes)


def stop(proc: subprocess.Popen, timeout: float = 40.0) -> int | None:
    """SIGTERM (the app's shutdown hook closes it), SIGKILL after `timeout`."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode


def kill9(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
