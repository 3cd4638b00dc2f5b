import engine


def test_all_is_sorted_and_complete():
    assert engine.__all__ == sorted(engine.__all__, key=lambda s: (not s.isupper(), s))
    for name in engine.__all__:
        assert hasattr(engine, name), name
    public = {n for n in dir(engine) if not n.startswith("_") and not isinstance(getattr(engine, n), type(engine))}
    public |= {"errors"}
    assert public - {"client", "config", "metadata", "storage", "records", "arrow"} <= set(engine.__all__) | {"__version__"}
