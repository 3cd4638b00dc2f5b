"""The wheel as a user gets it: built from this tree, installed in a fresh virtual environment
(dependencies from the package index, nothing from this checkout), ``python -m engine serve``
started from that environment, and a real client round trip against it.

CI otherwise only sees the editable install, which imports from the tree and so cannot notice a
package missing from the wheel (it happened: ``engine.coordinator`` was not in it).

The wheel is built the way pip builds it for a user, with build isolation: the build requirements
come from ``[build-system].requires`` in a throwaway environment, not from whatever the running
interpreter happens to have. With ``--no-build-isolation`` the test depended on Cython being
installed beside the test runner, which the README's ``pip install -e '.[test]'`` (itself
isolated) never does, so it failed in a fresh virtual environment; and it could not notice a build
requirement missing from ``pyproject.toml``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source_packages() -> set[str]:
    out = set()
    for top in ("engine", "spark_udfs"):
        for d, _dirs, names in os.walk(os.path.join(ROOT, top)):
            if "__init__.py" in names and "__pycache__" not in d:
                out.add(os.path.relpath(d, ROOT).replace(os.sep, "."))
    return out


def test_wheel_installs_in_a_fresh_venv_and_serves_real_clients(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    # build from a copy without build/ (setuptools packs whatever build/lib holds, so an
    # in-tree build can pass with a package the configuration leaves out)
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "*.egg-info", "__pycache__", "*.so", ".pytest_cache", ".hypothesis",
        ".benchmarks", "data"))
    dist = tmp_path / "dist"
    # isolated build (pip's default): [build-system].requires is all the build gets
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "-w", str(dist), str(src)],
                           capture_output=True, text=True, timeout=900,
                           env={**os.environ, "ENGINE_OPT_LEVEL": "0"})   # packaging, not speed: -O0 builds faster
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = dist.glob("kafka_engine-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    inst = subprocess.run([py, "-m", "pip", "install", "-q", str(wheel)], capture_output=True,
                          text=True, timeout=900, env=clean_env, cwd=tmp_path)
    assert inst.returncode == 0, inst.stderr[-2000:]

    # every package of the tree is in the installed wheel, and it imports from the venv
    probe = subprocess.run(
        [py, "-c", "import engine, engine._native, pkgutil, os; print(os.path.dirname(engine.__file__)); "
                   "import spark_udfs; "
                   "print('\\n'.join(sorted(['engine'] + [m.name for m in pkgutil.walk_packages("
                   "engine.__path__, 'engine.') if m.ispkg] + ['spark_udfs'])))"],
        capture_output=True, text=True, timeout=120, env=clean_env, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-2000:]
    where, *installed = probe.stdout.split()
    assert where.startswith(str(env_dir)), f"imported from {where}, not the venv"
    assert _source_packages() <= set(installed), _source_packages() - set(installed)

    data = tmp_path / "data"
    proc = subprocess.Popen([py, "-m", "engine", "serve", "--data-dir", str(data), "--listen",
                             "127.0.0.1:0"], stderr=subprocess.PIPE, text=True, env=clean_env,
                            cwd=tmp_path)
    try:
        port, seen, deadline = None, [], time.monotonic() + 60
        while port is None:
            line = proc.stderr.readline()
            seen.append(line)
            found = re.search(r"serving .* on [\d.]+:(\d+)", line)
            if found:
                port = int(found.group(1))
            elif (not line and proc.poll() is not None) or time.monotonic() > deadline:
                pytest.fail("the installed broker did not start: " + "".join(seen))
        bs = f"127.0.0.1:{port}"
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bs})
        assert admin.list_topics(timeout=15).brokers
        admin.create_topics([NewTopic("wheel", 1)])["wheel"].result(15)
        p = confluent_kafka.Producer({"bootstrap.servers": bs})
        for i in range(10):
            p.produce("wheel", b"v%d" % i)
        assert p.flush(15) == 0
        c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "wheel",
                                      "auto.offset.reset": "earliest"})
        c.subscribe(["wheel"])
        got, t0 = [], time.monotonic()
        while len(got) < 10 and time.monotonic() - t0 < 30:
            got += [m.value() for m in c.consume(10, timeout=1) if not m.error()]
        c.commit(asynchronous=False)
        c.close()
        assert got == [b"v%d" % i for i in range(10)]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
