"""The public surface: engine.__all__ is sorted, complete, and every name resolves."""

import types

import engine
import engine.errors


def test_all_is_sorted_and_resolves():
    assert engine.__all__ == sorted(engine.__all__)
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_no_public_name_left_out():
    public = {n for n, v in vars(engine).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public == set(engine.__all__) - {"errors"}


def test_errors_all_and_codes():
    assert engine.errors.__all__ == sorted(engine.errors.__all__)
    for name in engine.errors.__all__:
        assert hasattr(engine.errors, name)
    assert engine.errors.for_code(2) is engine.CorruptRecordError
    assert engine.errors.for_code(3) is engine.UnknownTopicOrPartitionError
    assert engine.errors.for_code(9999) is engine.errors.KafkaApiError
    assert issubclass(engine.CorruptRecordError, ValueError)
    assert issubclass(engine.KafkaStorageError, OSError)
