"""Arrow UDFs to use beside the ``kafka-engine`` source (Spark's ``arrow_udf``:
``pyarrow.Array`` in, ``pyarrow.Array`` out, one call per Arrow batch).

Contract:

* :func:`header_value` ``(headers_col, name)`` -> binary column: the value of
  the *last* header called `name` in each row (Kafka's
  ``Headers.lastHeader``), null when the row has none.  Computed with
  pyarrow.compute / numpy over the flattened header arrays, no Python object
  per row.
* :func:`kafka_partition` ``(key_col, num_partitions)`` -> int column: the
  partition Kafka's Java producer picks for a non-null key,
  ``(murmur2(key) & 0x7fffffff) % num_partitions`` (``engine._native.murmur2``);
  null for a null key (Kafka's sticky partitioner does not hash those).
  One native hash call per key.
* :func:`json_struct` ``(value_col, schema)`` -> struct column: each value
  (binary -- the ``value`` column as it comes from the source -- or string)
  parsed as one JSON object into a struct of `schema` (a DDL string such as
  ``"id long, name string"`` or a ``StructType``), like Spark's
  ``from_json`` but without a cast to string first.  Fields missing from the
  object are null; fields of the object not in the schema are ignored.  A
  row is **null** when its value is null or blank, is not one JSON object
  (malformed, an array, a scalar, two objects), or has a field whose value
  does not convert to the field's type (e.g. ``"x"`` for a long): the row,
  not the batch, fails.  Parsing is pyarrow's JSON reader over the whole
  batch at once; a batch with bad rows is bisected to isolate them, so the
  cost grows with the number of bad rows (about log2(batch) parses each).

The plain-array functions (``header_value_array``, ``kafka_partition_array``,
``json_struct_array``) are what the UDFs run, usable without Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidConfigError

__all__ = ["header_value", "header_value_array", "json_struct", "json_struct_array",
           "kafka_partition", "kafka_partition_array"]


def header_value_array(headers: pa.Array, name: str) -> pa.Array:
    """Per row, the value of the last header named `name` (null if none)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    n = len(headers)
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return pa.nulls(n, pa.binary())
    parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
    hit = pc.fill_null(pc.equal(flat.field("key"), name), False).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(hit)
    out = np.full(n, -1, dtype=np.int64)
    out[parents[idx]] = idx  # ascending idx: the last header of a row wins
    take = pa.array(out, mask=out < 0)
    return pc.take(flat.field("value"), take)


def kafka_partition_array(keys: pa.Array, num_partitions: int) -> pa.Array:
    """Kafka's default partition of each non-null key (int32; null keys -> null)."""
    from engine._native import murmur2

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    n = len(keys)
    out = np.zeros(n, dtype=np.int32)
    valid = np.ones(n, dtype=bool)
    if n:
        if keys.type != pa.binary():
            keys = keys.cast(pa.binary())
        bufs = keys.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=keys.offset * 4)
        data = memoryview(bufs[2]).cast("B") if bufs[2] is not None else memoryview(b"")
        if keys.null_count:
            valid = ~keys.is_null().to_numpy(zero_copy_only=False)
        for i in range(n):
            if valid[i]:
                out[i] = (murmur2(data[offs[i]:offs[i + 1]]) & 0x7FFFFFFF) % num_partitions
    return pa.array(out, mask=~valid)


def header_value(headers_col, name: str):
    """Column: the value of the last header `name` (binary, null if absent)."""
    from pyspark.sql.functions import arrow_udf

    if not isinstance(name, str):
        raise InvalidConfigError(f"header name must be a string, got {name!r}")

    @arrow_udf("binary")
    def _header_value(h: pa.Array) -> pa.Array:
        return header_value_array(h, name)

    return _header_value(headers_col)


def kafka_partition(key_col, num_partitions: int):
    """Column: Kafka's default partition of the key (int, null for a null key)."""
    from pyspark.sql.functions import arrow_udf

    if not isinstance(num_partitions, int) or isinstance(num_partitions, bool) or num_partitions < 1:
        raise InvalidConfigError(f"num_partitions must be a positive integer, got {num_partitions!r}")

    @arrow_udf("int")
    def _kafka_partition(k: pa.Array) -> pa.Array:
        return kafka_partition_array(k, num_partitions)

    return _kafka_partition(key_col)


def _json_rows(data, n: int, struct_type: pa.StructType, parse_options) -> pa.Array | None:
    """Parse `data` (n newline-terminated JSON texts) into a struct array of n rows,
    or None when pyarrow refuses it or it does not hold exactly n objects."""
    import pyarrow.json as pj

    try:
        t = pj.read_json(pa.BufferReader(data), parse_options=parse_options,
                         read_options=pj.ReadOptions(use_threads=False,
                                                     block_size=max(len(data) + 1, 1 << 16)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if t.num_rows != n:
        return None
    cols = [t.column(f.name).combine_chunks() if t.column(f.name).num_chunks != 1 else t.column(f.name).chunk(0)
            for f in struct_type]
    return pa.StructArray.from_arrays(cols, fields=list(struct_type))


def json_struct_array(values: pa.Array, struct_type: pa.StructType) -> pa.Array:
    """Each value parsed as one JSON object into `struct_type` (rules in the module docstring)."""
    import pyarrow.json as pj

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(struct_type, pa.StructType):
        raise InvalidConfigError(f"json_struct needs a struct type, got {struct_type}")
    n = len(values)
    if n == 0:
        return pa.array([], type=struct_type)
    large = pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type)
    btype = pa.large_binary() if large else pa.binary()
    if values.type != btype:
        if not (pa.types.is_binary(values.type) or pa.types.is_string(values.type) or large):
            raise InvalidConfigError(f"json_struct takes a binary or string column, got {values.type}")
        values = values.cast(btype)
    # Blank and null rows are null; they parse as "{}" to keep one line per row.
    blank = pc.invert(pc.fill_null(pc.match_substring_regex(values, r"\S"), False))
    # A raw line break can only be whitespace between tokens in valid JSON (inside a
    # string it must be escaped), so replacing it keeps each row on one line.
    flat = pc.replace_substring_regex(values, "[\r\n]", " ")
    flat = pc.if_else(blank, pa.scalar(b"{}", btype), flat)
    lines = pc.binary_join_element_wise(flat, pa.scalar(b"\n", btype), pa.scalar(b"", btype))
    owidth = 8 if large else 4
    offs = np.frombuffer(lines.buffers()[1], dtype=np.int64 if large else np.int32,
                         count=n + 1, offset=lines.offset * owidth)
    data = lines.buffers()[2]
    popts = pj.ParseOptions(explicit_schema=pa.schema(list(struct_type)), unexpected_field_behavior="ignore")

    pieces: list[pa.Array] = []

    def parse(lo: int, hi: int) -> None:  # rows [lo, hi)
        got = _json_rows(data[int(offs[lo]):int(offs[hi])], hi - lo, struct_type, popts)
        if got is not None:
            pieces.append(got)
        elif hi - lo == 1:
            pieces.append(pa.nulls(1, struct_type))
        else:
            mid = (lo + hi) // 2
            parse(lo, mid)
            parse(mid, hi)

    parse(0, n)
    out = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
    mask = pc.or_(blank, out.is_null())
    return pa.StructArray.from_arrays([out.field(i) for i in range(out.type.num_fields)],
                                      fields=list(struct_type), mask=mask)


def _spark_struct(schema):
    from pyspark.errors import PySparkException
    from pyspark.sql.types import StructType, _parse_datatype_string

    if isinstance(schema, str):
        try:
            schema = _parse_datatype_string(schema)
        except (PySparkException, ValueError) as e:
            raise InvalidConfigError(f"json_struct: cannot parse the schema {schema!r}: {e}") from None
    if not isinstance(schema, StructType):
        raise InvalidConfigError(f"json_struct needs a struct schema (DDL string or StructType), got {schema!r}")
    return schema


def json_struct(value_col, schema):
    """Column: the JSON object in each value as a struct of `schema` (null for bad rows)."""
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import to_arrow_type

    spark_type = _spark_struct(schema)
    arrow_type = to_arrow_type(spark_type)

    @arrow_udf(spark_type)
    def _json_struct(v: pa.Array) -> pa.Array:
        return json_struct_array(v, arrow_type)

    return _json_struct(value_col)
