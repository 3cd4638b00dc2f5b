"""The ZooKeeper plumbing of broker-wide state that every broker keeps a copy of (SCRAM
credentials, ACLs), as Kafka's ZooKeeper-mode brokers did it:

- :func:`update_node`: a read-modify-write of one znode conditional on the version read
  (``create`` when absent, ``set``/``delete`` at that version), read again and retried when
  another broker wrote in between (Kafka's AclAuthorizer ``updateResourceAcls``: at most
  :data:`MAX_UPDATE_RETRIES` tries, then :class:`ConcurrentUpdateError`);
- :func:`notify`: the sequential change notification (``/kafka-acl-changes/acl_changes_<seq>``,
  ``/config/changes/config_change_<seq>``) that tells the other brokers to re-read;
- :class:`ChangeListener`: Kafka's ZkNodeChangeNotificationListener -- a children watch on a
  change path hands each new notification's data to a handler, in sequence order, on its own
  thread (never kazoo's callback thread, which the cluster's other watches share); it deletes
  the notifications older than :data:`CHANGE_EXPIRATION_MS` as Kafka's brokers do.

Every ZooKeeper call is bounded (:meth:`ZkStore.bounded <engine.cluster.zk.ZkStore.bounded>`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from ..errors import KafkaApiError
from .zk import ZkStore

__all__ = ["CHANGE_EXPIRATION_MS", "MAX_UPDATE_RETRIES", "ChangeListener", "ConcurrentUpdateError",
           "notify", "update_node"]

log = logging.getLogger("engine.cluster")

MAX_UPDATE_RETRIES = 10                 # Kafka's AclAuthorizer.maxUpdateRetries
CHANGE_EXPIRATION_MS = 15 * 60 * 1000   # Kafka's ZkNodeChangeNotificationListener default
_RETRY_S = 1.0                          # a notification ZooKeeper could not give: try again after


class ConcurrentUpdateError(KafkaApiError):
    """Other brokers kept changing the node: no conditional write succeeded in
    :data:`MAX_UPDATE_RETRIES` tries (Kafka: an IllegalStateException, UNKNOWN_SERVER_ERROR)."""


def update_node(zk: ZkStore, path: str, transform: Callable[[bytes | None], bytes | None],
                retries: int = MAX_UPDATE_RETRIES) -> tuple[bytes | None, bytes | None]:
    """Write ``transform(data)`` to ``path`` if nobody wrote it since it was read (``None``
    in or out: the node absent / to delete); ``transform`` may be called again with the newer
    data.  Nothing is written when it answers the data it was given.  (before, after)."""
    for _ in range(max(1, retries)):
        try:
            data, stat = zk.bounded("get", path)
        except NoNodeError:
            data, stat = None, None
        new = transform(data)
        if new == data:
            return data, data
        try:
            if stat is None:
                zk.bounded("create", path, new, makepath=True)
            elif new is None:
                zk.bounded("delete", path, version=stat.version)
            else:
                zk.bounded("set", path, new, version=stat.version)
            return data, new
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue                # another broker wrote (or removed) it meanwhile: read again
    raise ConcurrentUpdateError(f"failed to update {path} after trying a maximum of {retries} times")


def notify(zk: ZkStore, prefix: str, data: bytes) -> str:
    """Create the sequential change notification ``<prefix><seq>`` (its parents if absent)."""
    return zk.bounded("create", prefix, data, sequence=True, makepath=True)


class ChangeListener:
    """Hands the data of each notification ``<root>/<prefix><seq>`` created after :meth:`start`
    to ``handler``, in sequence order, on the listener's thread.  A handler's ZooKeeper trouble
    (KazooException, a timeout) retries that notification; any other exception is logged and
    the notification skipped (it is malformed)."""

    def __init__(self, zk: ZkStore, root: str, prefix: str, handler: Callable[[bytes], None],
                 expiration_ms: int = CHANGE_EXPIRATION_MS):
        self.zk = zk
        self.root = root.rstrip("/")
        self.prefix = prefix
        self.handler = handler
        self.expiration_ms = expiration_ms
        self.last = -1                       # the sequence number of the last notification done
        self._children: list[str] = []
        self._ctime: dict[str, float] = {}   # notification -> its ctime (ms), once read
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> ChangeListener:
        """Skip the notifications there now (the caller reads the state itself after this),
        then watch for new ones."""
        from kazoo.recipe.watchers import ChildrenWatch
        self.zk.bounded("ensure_path", self.root)
        self.last = max((self._seq(c) for c in self.zk.bounded("get_children", self.root)), default=-1)
        self._thread = threading.Thread(target=self._run, name=f"change-listener {self.root}", daemon=True)
        self._thread.start()
        ChildrenWatch(self.zk.watch_client, self.root, self._changed)
        return self

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _seq(self, child: str) -> int:
        try:
            return int(child[len(self.prefix):]) if child.startswith(self.prefix) else -1
        except ValueError:
            return -1

    def _changed(self, children: list[str]) -> bool | None:     # kazoo's thread: hand over only
        if self._closed:
            return False                     # stop watching
        self._children = children
        self._wake.set()
        return None

    def _run(self) -> None:
        retry = False
        while True:
            self._wake.wait(_RETRY_S if retry else None)
            if self._closed:
                return
            self._wake.clear()
            retry = not self._process(sorted((self._seq(c), c) for c in self._children))

    def _process(self, notifications: list[tuple[int, str]]) -> bool:
        """Handle the new ones; False when ZooKeeper failed us (try again later)."""
        for seq, child in notifications:
            if seq <= self.last:
                continue
            try:
                try:
                    data, _ = self.zk.bounded("get", f"{self.root}/{child}")
                except NoNodeError:
                    data = None                  # purged already: nothing to re-read for it
                if data is not None:
                    self.handler(data)
            except KazooException as e:
                log.warning("change notification %s/%s: ZooKeeper failed (%s%s); trying again",
                            self.root, child, type(e).__name__, f": {e}" if str(e) else "")
                return False
            except Exception as e:      # a malformed notification must not stop the others
                log.warning("change notification %s/%s ignored: %s", self.root, child, e)
            self.last = seq
        self._purge(notifications)
        return True

    def _purge(self, notifications: list[tuple[int, str]]) -> None:
        """Delete the notifications handled more than ``expiration_ms`` ago (by their ctime)."""
        now_ms = time.time() * 1000
        present = {child for _, child in notifications}
        for child in [c for c in self._ctime if c not in present]:
            del self._ctime[child]
        for seq, child in notifications:
            if seq > self.last or seq < 0:
                continue
            path = f"{self.root}/{child}"
            try:
                ctime = self._ctime.get(child)
                if ctime is None:
                    stat = self.zk.bounded("exists", path)
                    if stat is None:
                        continue
                    ctime = self._ctime[child] = stat.ctime
                if now_ms - ctime > self.expiration_ms:
                    self.zk.bounded("delete", path)
                    self._ctime.pop(child, None)
            except NoNodeError:
                self._ctime.pop(child, None)     # another broker purged it
            except KazooException as e:
                log.debug("purging %s: %s", path, e)
                return
