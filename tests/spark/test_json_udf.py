"""The json_struct Arrow UDF: JSON values (binary or string) parsed into a struct,
bad rows null, checked against Python's json module row by row."""

import json

import pyarrow as pa
import pytest

import engine
from engine.errors import InvalidConfigError
from spark_udfs.udfs import json_struct, json_struct_array

T = pa.struct([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
               ("tags", pa.list_(pa.string()))])

GOOD = [b'{"id": 1, "name": "a", "score": 1.5, "tags": ["x", "y"]}',
        b'{"id": 2}',                                   # missing fields -> null fields
        b'{"id": 3, "extra": {"deep": [1, 2]}}',        # unknown fields ignored
        b'{\n  "id": 4,\n  "name": "multi\\nline"\n}',  # pretty-printed, escaped newline
        '{"id": 5, "name": "ünïcode"}'.encode()]
BAD = [None, b"", b"   ", b"not json", b"[1, 2]", b"7", b'{"id": "seven"}', b'{"id": 1}{"id": 2}',
       b'{"id": 1', b"\xff\xfe"]


def _want(v):
    d = json.loads(v)
    return {"id": d.get("id"), "name": d.get("name"), "score": d.get("score"), "tags": d.get("tags")}


def test_good_rows_parse_and_bad_rows_are_null():
    vals = []
    for i in range(60):  # bad rows spread through a larger batch
        vals.append(GOOD[i % len(GOOD)])
        if i % 6 == 0:
            vals.append(BAD[(i // 6) % len(BAD)])
    got = json_struct_array(pa.array(vals, pa.binary()), T).to_pylist()
    want = [None if v in BAD else _want(v) for v in vals]
    assert got == want


def test_string_input_slices_and_empty():
    arr = pa.array([v.decode() for v in GOOD] + [None, "oops"], pa.string())
    assert json_struct_array(arr, T).to_pylist() == [_want(v) for v in GOOD] + [None, None]
    assert json_struct_array(arr.slice(2, 3), T).to_pylist() == [_want(v) for v in GOOD[2:5]]
    assert json_struct_array(pa.array([], pa.binary()), T).to_pylist() == []
    assert json_struct_array(pa.array([b"{]"] * 5), T).null_count == 5


def test_bad_schema_and_column_types():
    with pytest.raises(InvalidConfigError):
        json_struct_array(pa.array([1, 2]), T)
    with pytest.raises(InvalidConfigError):
        json_struct_array(pa.array([b"{}"]), pa.int64())


def test_json_struct_on_the_value_column(spark, spark_tmp):
    path = str(spark_tmp / "json-data")
    vals = [json.dumps({"id": i, "name": f"n{i}", "score": i / 2, "tags": [str(i)]}).encode()
            for i in range(500)]
    vals[17] = b"{broken"
    vals[300] = b'{"id": "not a number"}'
    with engine.open(path, background=False) as eng:
        eng.create_topic("j", partitions=2)
        with eng.producer(linger_ms=0) as p:
            p.send_batch("j", vals[:250], partition=0)
            p.send_batch("j", vals[250:], partition=1)
    df = spark.read.format("kafka-engine").option("path", path).option("subscribe", "j").load()
    out = df.select("partition", "offset", json_struct("value", "id long, name string, score double, "
                                                        "tags array<string>").alias("j"))
    assert out.schema["j"].dataType.simpleString() == \
        "struct<id:bigint,name:string,score:double,tags:array<string>>"
    rows = {(r.partition * 250 + r.offset): r.j for r in out.collect()}
    assert len(rows) == 500
    assert rows[17] is None and rows[300] is None
    for i in (0, 1, 299, 499):
        assert rows[i].asDict(recursive=True) == {"id": i, "name": f"n{i}", "score": i / 2, "tags": [str(i)]}
    # The same on a string column, with a StructType schema; a filter on a field works.
    from pyspark.sql.types import LongType, StructField, StructType
    st = StructType([StructField("id", LongType())])
    n = (df.selectExpr("CAST(value AS STRING) AS s").select(json_struct("s", st).alias("j"))
         .where("j.id >= 100").count())
    assert n == 399  # ids 100..499 (400) minus the bad row 300


def test_json_struct_rejects_a_bad_schema(spark):
    with pytest.raises(InvalidConfigError, match="cannot parse"):
        json_struct("value", "id lng,,")
    with pytest.raises(InvalidConfigError, match="struct"):
        json_struct("value", 5)
