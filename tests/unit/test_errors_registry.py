"""One error registry: the engine/errors package declares every Kafka error code once (ErrorCode
in engine/errors/codes.py, Kafka's names), holds every KafkaApiError class (its family modules,
each class re-exported by and reporting the module engine.errors), and for_code() maps each code
back to its class.  No module outside the package defines a class with a code of its own,
re-declares a code as an integer constant or writes one as a literal."""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import pkgutil
import re
from pathlib import Path

import pytest

import engine
import engine.errors as errors
from engine.errors import ErrorCode, KafkaApiError, for_code

ENGINE = Path(engine.__file__).parent
PACKAGE = Path(errors.__file__).parent          # engine/errors/
CSRC = ENGINE.parent / "csrc"

# No allow-lists: every module under engine/ names its codes as ErrorCode.X and raises
# engine.errors' classes.

_NAMES = set(ErrorCode.__members__)


def _engine_modules():
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        yield importlib.import_module(info.name)


def _api_error_classes():
    """(qualified name, class) of every KafkaApiError subclass defined in a module under engine/."""
    seen = {}
    for mod in [engine, *_engine_modules()]:
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, KafkaApiError) and obj.__module__ == mod.__name__:
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return seen


def _sources():
    """(path under engine/, tree) of every module outside the registry package."""
    for path in sorted(ENGINE.rglob("*.py")):
        if PACKAGE not in path.parents:
            yield path.relative_to(ENGINE).as_posix(), ast.parse(path.read_text(), str(path))


def _package_sources():
    """(file name, tree) of every module of the registry package."""
    for path in sorted(PACKAGE.glob("*.py")):
        yield path.name, ast.parse(path.read_text(), str(path))


def _int_literal(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


# -- the table ------------------------------------------------------------------------------------

def test_kafka_names_and_codes():
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3 and ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.NOT_COORDINATOR == 16 and ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.UNSUPPORTED_ENDPOINT_TYPE == 115 and ErrorCode.TRANSACTION_ABORTABLE == 120
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.PRODUCER_FENCED.retriable


def test_every_code_declared_once():
    # an IntEnum silently makes a second name with the same value an alias: none here
    assert len(ErrorCode.__members__) == len(list(ErrorCode))
    tables = [(name, n) for name, tree in _package_sources() for n in tree.body
              if isinstance(n, ast.ClassDef) and n.name == "ErrorCode"]
    assert [name for name, _ in tables] == ["codes.py"], "ErrorCode is declared once, in codes.py"
    names = [t.id for n in tables[0][1].body if isinstance(n, ast.Assign) for t in n.targets]
    assert len(names) == len(set(names))
    # the classes, in every module of the package, take their code from the table, never from a literal
    for file, tree in _package_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name != "ErrorCode":
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "code" for t in stmt.targets):
                        assert not _int_literal(stmt.value), f"{file}: {node.name}.code is a literal"


def test_against_kio_when_installed():
    kio_errors = pytest.importorskip("kio.schema.errors")
    for kc in kio_errors.ErrorCode:
        ours = ErrorCode(int(kc))
        assert ours.name == kc.name.upper() and ours.retriable == bool(kc.retriable), ours


# -- the classes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("code,name", [
    (5, "LeaderNotAvailableError"), (6, "NotLeaderOrFollowerError"), (7, "RequestTimedOutError"),
    (16, "NotCoordinatorError"), (19, "NotEnoughReplicasError"), (20, "NotEnoughReplicasAfterAppendError"),
    (41, "NotControllerError"), (48, "InvalidTxnStateError"), (90, "ProducerFencedError"),
])
def test_for_code_gives_the_typed_class(code, name):
    assert for_code(code) is getattr(errors, name)
    assert for_code(ErrorCode(code)) is getattr(errors, name)
    assert for_code(code).code == code and for_code(code).name == ErrorCode(code).name


def test_for_code_of_unknown_codes():
    assert for_code(9999) is KafkaApiError
    assert for_code(-1) is KafkaApiError
    assert for_code(0) is KafkaApiError


def test_registry_classes_carry_their_codes_facts():
    for code, cls in errors._BY_CODE.items():
        assert cls.code == code and isinstance(cls.code, ErrorCode)
        assert cls.name == cls.code.name and cls.retriable == cls.code.retriable, cls


def test_every_api_error_class_under_engine_is_registered():
    classes = _api_error_classes()
    assert "engine.errors.NotLeaderOrFollowerError" in classes
    stray = []
    for qual, cls in classes.items():
        if cls is KafkaApiError:
            continue
        if for_code(cls.code) is not cls and not issubclass(cls, for_code(cls.code)):
            stray.append(qual)
        elif "code" in cls.__dict__ and cls.__module__ != "engine.errors":
            stray.append(qual)          # a class with its own code must live in the engine/errors package
    assert not stray, f"KafkaApiError classes outside the registry: {stray}"


def test_package_classes_are_engine_errors():
    """Every class of the package's modules is engine.errors.<Name>: importable from there and
    reporting that module (tracebacks, reprs, pickle), whichever file of the package holds it."""
    defined = []
    for file, tree in _package_sources():
        defined += [(file, n.name) for n in tree.body if isinstance(n, ast.ClassDef)]
    assert len(defined) > 90
    for file, name in defined:
        cls = getattr(errors, name, None)
        assert isinstance(cls, type), f"{file}: {name} is not re-exported by engine.errors"
        assert cls.__module__ == "engine.errors", (file, name, cls.__module__)
    assert repr(errors.NotLeaderOrFollowerError) == "<class 'engine.errors.NotLeaderOrFollowerError'>"
    err = pickle.loads(pickle.dumps(errors.NotCoordinatorError("group g")))
    assert type(err) is errors.NotCoordinatorError and err.args == ("group g",)


def test_every_code_we_send_has_a_class():
    """The codes the modules under engine/ name (ErrorCode.X) all map to a class of their own."""
    used = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "ErrorCode" and node.attr in _NAMES):
                used.add(ErrorCode[node.attr])
    used -= {ErrorCode.NONE, ErrorCode.UNKNOWN_SERVER_ERROR}
    missing = sorted(c.name for c in used if for_code(c) is KafkaApiError)
    assert not missing, f"codes sent without a class in the engine/errors package: {missing}"


def test_native_core_raises_registered_classes():
    if not CSRC.is_dir():
        pytest.skip("no csrc/ next to the package (an installed wheel)")
    for path in sorted(CSRC.glob("*.p[yx][xi]")):
        text = path.read_text()
        assert not re.search(r"^\s*(cdef\s+)?class \w+\(.*(Error|Exception)", text, re.M), path
        for name in re.findall(r"_errors\.(\w+)", text):
            assert hasattr(errors, name), f"{path.name}: _errors.{name}"


# -- no re-declarations ---------------------------------------------------------------------------

def _module_level_codes(tree):
    """Names bound at module level to an int literal (or to ErrorCode.X) that are Kafka error names,
    with or without leading underscores: ``NOT_COORDINATOR = 16``, ``_INVALID_REQUEST = 42``,
    ``A, B = 14, 15``."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            pairs = []
            if isinstance(target, ast.Name):
                pairs = [(target, value)]
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                pairs = list(zip(target.elts, value.elts, strict=False))
            for t, v in pairs:
                if not isinstance(t, ast.Name) or t.id.lstrip("_") not in _NAMES:
                    continue
                alias = (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)
                         and v.value.id in ("ErrorCode", "_EC"))
                if _int_literal(v) or alias:
                    found.add(t.id.lstrip("_"))
    return found


def test_no_module_redeclares_error_codes():
    offenders = {}
    for rel, tree in _sources():
        found = _module_level_codes(tree)
        if found:
            offenders[rel] = sorted(found)
    assert not offenders, f"declare error codes only in the engine/errors package (ErrorCode): {offenders}"


def _literal_codes(tree):
    """Error codes written as literals: api_error(48, ...), for_code(6), {"error_code": 15},
    ``{tp: 15 for tp in tps}``, ``code in (120, 42)``, ``e.code != 36``, ``error = 35``.  Zero
    (NONE) is allowed."""
    def nonzero(node):
        if _int_literal(node):
            return ast.literal_eval(node) != 0
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(nonzero(e) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return nonzero(node.body) or nonzero(node.orelse)
        return False

    def codeish(node):
        if isinstance(node, ast.Subscript):     # res["error_code"]
            node = ast.Name(id=getattr(node.slice, "value", ""))
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        return isinstance(name, str) and bool(re.fullmatch(r"_?(code|err|error|error_code|ec|top)", name))

    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                "api_error", "for_code") and node.args and nonzero(node.args[0]):
            hits.append(node.lineno)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "error_code" and nonzero(v):
                    hits.append(node.lineno)
        elif (isinstance(node, ast.DictComp) and isinstance(node.value, ast.Constant)
              and type(node.value.value) is int and node.value.value > 0):   # -1: an offset (LATEST)
            hits.append(node.lineno)
        elif isinstance(node, ast.Compare) and codeish(node.left):
            if any(nonzero(c) for c in node.comparators):
                hits.append(node.lineno)
        elif isinstance(node, ast.Assign) and any(codeish(t) for t in node.targets) and nonzero(node.value):
            hits.append(node.lineno)
    return hits


def test_no_error_code_literals():
    offenders = {}
    for rel, tree in _sources():
        hits = _literal_codes(tree)
        if hits:
            offenders[rel] = hits
    assert not offenders, f"name error codes as ErrorCode.X, not literals (file: lines): {offenders}"



def test_errors_with_their_own_init_pickle_whole():
    """A class whose __init__ takes other arguments than its message rebuilds from them when
    pickled (a Spark executor's error crosses to the driver; multiprocessing): Exception's
    default would call it with the formatted message alone -- a TypeError, or a message that
    repeats its prefix."""
    for file, tree in _package_sources():
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            if "__init__" in methods:
                assert "__reduce__" in methods, f"{file}: {node.name} has __init__ without __reduce__"
    cases = [
        errors.CorruptRecordError("bad crc", "/d/t-0/00000000000000000000.log", 61),
        errors.CorruptIndexError("entry 3 below the base offset"),
        errors.DataDirLockedError("/data", "pid 7 on host h"),
        errors.SslConfigError("ssl.keystore.location", "no such file"),
        errors.AuthorizerConfigError("authorizer.class.name", "unknown"),
    ]
    for err in cases:
        err.detail = "kept"
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert vars(back) == vars(err)


# Exception classes defined outside the package: private control flow (a leading underscore) or
# one of these, each caught inside the engine (or a test hook) and never raised to a user.
_INTERNAL = {
    "storage/checkpoint.py": {"CheckpointError"},          # a garbled checkpoint: treated as missing
    "storage/producer_state.py": {"SnapshotError"},        # a bad snapshot: the loader rebuilds state
    "storage/cleaner_types.py": {"SimulatedCrash"},        # a test hook of the cleaner
    "storage/cleaner_state.py": {"LogCleaningAbortedError"},   # caught by the cleaner (Kafka's too)
    "cluster/registration.py": {"RegistrationError"},      # a garbled /brokers/ids node: skipped
    "cluster/zk.py": {"ZooKeeperTimeoutError"},            # a kazoo exception; answered REQUEST_TIMED_OUT
    "cluster/zk_change.py": {"ConcurrentUpdateError"},     # answered UNKNOWN_SERVER_ERROR
    "security/quotas.py": {"DescribeFilterError"},         # answered as DescribeClientQuotas' error code
    "security/oauthbearer_unsecured.py": {"OAuthBearerTokenError"},   # answered SASL_AUTHENTICATION_FAILED
}


def test_error_classes_live_in_the_registry():
    """An error a user can meet is a class of engine/errors (importable from engine.errors);
    elsewhere only private control-flow exceptions and the few internal ones above."""
    found: dict[str, set[str]] = {}
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith(("Error", "Exception")) for b in bases):
                found.setdefault(rel, set()).add(node.name)
    stray = {rel: names - _INTERNAL.get(rel, set()) for rel, names in found.items()}
    stray = {rel: names for rel, names in stray.items() if names}
    assert not stray, f"error classes outside engine/errors (move them there, or list why not): {stray}"
