# The embedded producer's per-record path: partition choice (Kafka's murmur2
# or sticky), encoding into the partition's open batch (RecordAccumulator,
# builder.pyx) and the future of the record, in one C call per send().
#
# Futures: every record appended to a partition since its last drain shares
# that drain window's DrainOutcome; record i of the window gets offset
# base_offset + i once the window's bytes are appended (RecordAccumulator
# numbers records per window).
#
# Concurrency: the GIL alone is not enough to make "encode + take the
# window's outcome" and "take the window's bytes + swap its outcome" atomic
# (an allocation can run the garbage collector, whose finalizers may switch
# threads), so each TopicAccumulator has a native mutex around both.  It is
# tried without blocking first; a contended wait releases the GIL, so a
# holder that lost the GIL can always finish.  Appending closed windows to
# the log is the Python Producer's job, under its own lock, so that a
# partition's batches reach the log in order.
from libc.stdint cimport int32_t, int64_t, uint8_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from cpython.bytes cimport PyBytes_CheckExact, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_acquire_lock, PyThread_release_lock, WAIT_LOCK, NOWAIT_LOCK)


cdef inline int lock_acquire(PyThread_type_lock lk) except -1:
    if PyThread_acquire_lock(lk, NOWAIT_LOCK):
        return 0
    with nogil:
        PyThread_acquire_lock(lk, WAIT_LOCK)
    return 0


cdef inline double monotonic_s() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef class DrainOutcome:
    """What happened to one drain window of a partition (shared by its futures)."""
    cdef public int64_t base_offset
    cdef public object error
    cdef public int64_t log_append_time

    def __cinit__(self):
        self.base_offset = -1
        self.error = None
        self.log_append_time = -1


cdef class SendFuture:
    """The outcome of one send(): result() gives RecordMetadata, or raises the append's error."""
    cdef readonly str topic
    cdef readonly int partition
    cdef readonly int64_t timestamp
    cdef DrainOutcome outcome
    cdef int32_t seq
    cdef object flusher

    def done(self):
        return self.outcome.base_offset >= 0 or self.outcome.error is not None

    def result(self, timeout=None):
        """Wait for the record's batch to be appended (appending it now if still open)."""
        if not (self.outcome.base_offset >= 0 or self.outcome.error is not None):
            self.flusher(self.topic, self.partition)
        if self.outcome.error is not None:
            raise self.outcome.error
        ts = self.outcome.log_append_time if self.outcome.log_append_time >= 0 else self.timestamp
        return _RecordMetadata(self.topic, self.partition, self.outcome.base_offset + self.seq, ts)

    def get(self, timeout=None):
        return self.result(timeout)

    def exception(self):
        if not (self.outcome.base_offset >= 0 or self.outcome.error is not None):
            self.flusher(self.topic, self.partition)
        return self.outcome.error

    def __repr__(self):
        state = "done" if self.done() else "pending"
        return "SendFuture(%s-%d, %s)" % (self.topic, self.partition, state)


from engine.client._types import RecordMetadata as _RecordMetadata


cdef class TopicAccumulator:
    """Open batches of one topic, one per partition, and their drain windows."""
    cdef readonly str topic
    cdef readonly int num_partitions
    cdef RecordAccumulator acc
    cdef list outcomes
    cdef list opened_at
    cdef public int sticky
    cdef object flusher
    cdef public bint has_ready
    cdef public object rng
    cdef PyThread_type_lock mutex

    def __cinit__(self, str topic, int num_partitions, int codec, Py_ssize_t batch_size, flusher):
        import random
        self.mutex = PyThread_allocate_lock()
        if self.mutex == NULL:
            raise MemoryError()
        self.topic = topic
        self.num_partitions = num_partitions
        self.acc = RecordAccumulator(num_partitions, codec, batch_size)
        self.outcomes = [DrainOutcome() for _ in range(num_partitions)]
        self.opened_at = [0.0] * num_partitions
        self.flusher = flusher
        self.rng = random.Random()
        self.sticky = self.rng.randrange(num_partitions)
        self.has_ready = False

    def __dealloc__(self):
        if self.mutex != NULL:
            PyThread_free_lock(self.mutex)

    cdef int _partition_for(self, object key) except -1:
        cdef const uint8_t[::1] mv
        cdef int32_t h
        if PyBytes_CheckExact(key):
            h = murmur2_of(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
        else:
            if isinstance(key, str):
                key = (<str>key).encode("utf-8")
            mv = key
            h = murmur2_of(&mv[0] if mv.shape[0] else <const uint8_t*>"", mv.shape[0])
        return (h & 0x7fffffff) % self.num_partitions

    cpdef SendFuture send(self, value, key=None, headers=None, timestamp=None, partition=None):
        cdef int p
        cdef int32_t seq
        cdef int64_t ts
        cdef SendFuture fut
        if partition is None:
            p = self.sticky if key is None else self._partition_for(key)
        else:
            p = partition
            if p < 0 or p >= self.num_partitions:
                raise _errors.UnknownTopicOrPartitionError(
                    "partition %d of %r does not exist" % (p, self.topic))
        ts = now_ms() if timestamp is None else <int64_t>timestamp
        fut = SendFuture.__new__(SendFuture)
        fut.topic = self.topic
        fut.timestamp = ts
        fut.flusher = self.flusher
        lock_acquire(self.mutex)
        try:
            if partition is None and key is None:
                p = self.sticky
            fut.partition = p
            seq = self.acc.append(p, value, key, headers, ts)
            if seq == 0:
                self.opened_at[p] = monotonic_s()
            fut.outcome = <DrainOutcome>self.outcomes[p]
            fut.seq = seq
            if self.acc.pending[p]:
                self.has_ready = True
                if key is None and partition is None and self.num_partitions > 1:
                    self.sticky = (p + 1 + self.rng.randrange(self.num_partitions - 1)) % self.num_partitions
        finally:
            PyThread_release_lock(self.mutex)
        return fut

    def drain(self, int partition):
        """Close `partition`'s window: (bytes, record count, its DrainOutcome); a new window opens."""
        new = DrainOutcome()
        lock_acquire(self.mutex)
        try:
            data, n = self.acc.drain(partition)
            outcome = self.outcomes[partition]
            self.outcomes[partition] = new
        finally:
            PyThread_release_lock(self.mutex)
        return data, n, outcome

    def ready(self):
        """Partitions holding a full batch; clears has_ready."""
        lock_acquire(self.mutex)
        try:
            self.has_ready = False
            return self.acc.ready()
        finally:
            PyThread_release_lock(self.mutex)

    def nonempty(self):
        lock_acquire(self.mutex)
        try:
            return self.acc.nonempty()
        finally:
            PyThread_release_lock(self.mutex)

    def expired(self, double linger_s):
        """Partitions whose open window is at least linger_s old."""
        cdef double now = monotonic_s()
        cdef int p
        lock_acquire(self.mutex)
        try:
            return [p for p in self.acc.nonempty() if now - <double>self.opened_at[p] >= linger_s]
        finally:
            PyThread_release_lock(self.mutex)


cdef class ProducerCore:
    """Base of engine.client.producer.Producer: send() without a Python frame.

    The subclass provides _accumulator(topic) (returns the TopicAccumulator,
    creating it) and _drain_ready(acc) (appends full batches).
    """
    cdef public dict _accs
    cdef public bint _closed
    cdef public bint _eager

    def __cinit__(self, *args, **kwargs):
        self._accs = {}
        self._closed = False
        self._eager = False

    def send(self, topic, value, key=None, headers=None, timestamp=None, partition=None):
        """Queue one record; returns a future whose result() is its RecordMetadata."""
        cdef TopicAccumulator acc
        cdef SendFuture fut
        if self._closed:
            raise _errors.ClosedError("the producer is closed")
        acc = self._accs.get(topic)
        if acc is None:
            acc = self._accumulator(topic)
        fut = acc.send(value, key, headers, timestamp, partition)
        if acc.has_ready or self._eager:
            self._drain_ready(acc, fut.partition)
        return fut
