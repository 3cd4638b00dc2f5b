"""A standalone ZooKeeper server from Debian's ``zookeeper`` package, for ``python -m engine
cluster`` and the tests.

::

    zk = ZooKeeperServer(directory, port=0).start()    # port 0: a free one
    zk.connect                                          # "127.0.0.1:PORT"
    zk.stop()

Runs ``java org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg`` with the package's jars
(``/usr/share/java/zookeeper.jar`` and its two dependencies); ``find_zookeeper()`` says why not
when the package or Java is missing (``apt-get install zookeeper``).  The server listens on
127.0.0.1 only, keeps its data in ``<directory>/zk-data`` and logs to ``<directory>/zookeeper.log``.

``settings`` adds ``zoo.cfg`` lines and ``jvm_args`` JVM options, e.g. a ZooKeeper that requires
SASL (its JAAS file's ``Server`` section lists the users)::

    ZooKeeperServer(d, settings={"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                                 "enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"},
                    jvm_args=["-Djava.security.auth.login.config=/path/zk_jaas.conf"])

``secure_port`` (0: a free one) adds a TLS port (``secureClientPort`` on 127.0.0.1, at
``secure_connect``) served by ZooKeeper's ``NettyServerCnxnFactory``, with Debian's netty jars
(``libnetty-java``) on the classpath; its key and trust stores come in ``settings``
(``ssl.keyStore.location``, ``ssl.trustStore.location``, ``ssl.clientAuth``, ...).  The plaintext
port stays (``ruok`` is asked there).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence

__all__ = ["ZooKeeperServer", "find_zookeeper"]

_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar")
_JAVA_DIRS = ("/usr/share/java", "/usr/share/zookeeper/lib")
# what NettyServerCnxnFactory loads (Debian's libnetty-java, a dependency of the zookeeper package)
_NETTY_JARS = ("netty-buffer.jar", "netty-codec.jar", "netty-common.jar", "netty-handler.jar", "netty-resolver.jar",
               "netty-transport.jar", "netty-transport-native-epoll.jar", "netty-transport-native-unix-common.jar")


def find_zookeeper() -> tuple[str | None, str]:
    """(classpath, '') or (None, why not)."""
    if shutil.which("java") is None:
        return None, "java is not on the PATH (ZooKeeper needs a Java runtime)"
    for d in _JAVA_DIRS:
        jars = [os.path.join(d, j) for j in _JARS]
        if all(os.path.exists(j) for j in jars):
            return os.pathsep.join(jars), ""
    return None, ("ZooKeeper not found: install Debian's package (apt-get install zookeeper), "
                  "which puts zookeeper.jar in /usr/share/java")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    def __init__(self, directory: str, port: int = 0, tick_ms: int = 500, *,
                 settings: Mapping[str, str] | None = None, jvm_args: Sequence[str] = (),
                 secure_port: int | None = None):
        self.dir = os.path.abspath(directory)
        self.settings = dict(settings or {})
        self.jvm_args = list(jvm_args)
        self.port = port or _free_port()
        self.tick_ms = tick_ms
        self.connect = f"127.0.0.1:{self.port}"
        self.secure_port = None if secure_port is None else (secure_port or _free_port())
        self.secure_connect = None if self.secure_port is None else f"127.0.0.1:{self.secure_port}"
        self.log_path = os.path.join(self.dir, "zookeeper.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        classpath, why = find_zookeeper()
        if classpath is None:
            raise RuntimeError(why)
        settings = dict(self.settings)
        if self.secure_port is not None:
            netty = [os.path.join(d, j) for d in _JAVA_DIRS for j in _NETTY_JARS
                     if os.path.exists(os.path.join(d, j))]
            if len(netty) < len(_NETTY_JARS):
                raise RuntimeError("ZooKeeper over TLS needs Netty's jars in /usr/share/java "
                                   "(apt-get install libnetty-java)")
            classpath = os.pathsep.join([classpath, *netty])
            settings = {"secureClientPort": str(self.secure_port), "secureClientPortAddress": "127.0.0.1",
                        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory", **settings}
        data = os.path.join(self.dir, "zk-data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_ms}\ndataDir={data}\nclientPort={self.port}\n"
                    "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                    f"minSessionTimeout={2 * self.tick_ms}\nmaxSessionTimeout=60000\n"
                    "4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n")
            f.writelines(f"{k}={v}\n" for k, v in settings.items())
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *self.jvm_args, "-cp", classpath,
             "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited at start (log: {self.log_path}):\n{self.log_tail()}")
            if _ruok(self.port):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not start in {timeout}s (log: {self.log_path})")

    def log_tail(self, n: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.running:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(20)
