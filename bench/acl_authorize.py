"""What one ACL decision costs: engine.security.authorizer.Authorizer.authorize() with thousands
of ACLs, as the request path will call it for every partition of every request.

    python -m bench.acl_authorize [--acls 10000] [--calls 1000000]

Builds ``--acls`` ACLs (topics and groups; literal, prefixed and wildcard patterns; 500
principals; specific hosts and ``*``; one in 17 a DENY), then times ``--calls`` decisions:

- cold: each question new and the answer memo emptied before every call, so every decision is
  computed from the index (the figure for the first request about a resource);
- warm: the same questions again, answered from the memo (every later partition and request);
- per-call median and p99 of cold decisions, each timed alone (the issue's "< 5 us median with
  10,000 ACLs").

Figures are from a shared machine: compare runs, not absolutes.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
    from engine.security.authorizer import Authorizer

    ap = argparse.ArgumentParser()
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    rnd = random.Random(1)
    ops = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL]
    bindings = []
    for i in range(args.acls):
        kind = i % 8
        rtype = ResourceType.GROUP if kind == 7 else ResourceType.TOPIC
        if kind == 1:
            ptype, name = PatternType.PREFIXED, f"team{i % 97}-"[: 3 + i % 6]
        elif kind == 2 and i % 400 == 2:
            ptype, name = PatternType.LITERAL, "*"
        else:
            ptype, name = PatternType.LITERAL, f"team{i % 97}-svc{i}"
        bindings.append(AclBinding(rtype, name, ptype, f"User:u{i % 500}", "*" if i % 3 else "10.0.0.1",
                                   rnd.choice(ops),
                                   AclPermissionType.DENY if i % 17 == 0 else AclPermissionType.ALLOW))
    auth = Authorizer()
    auth.create(bindings)
    names = [f"team{i % 97}-svc{i}" for i in range(args.acls)]
    questions = [(f"User:u{rnd.randrange(500)}", "10.0.0.1", rnd.choice(ops[:3]), ResourceType.TOPIC,
                  rnd.choice(names)) for _ in range(args.calls)]
    authorize = auth.authorize

    t = time.perf_counter()
    allowed = 0
    for q in questions:
        auth._cache = {}
        allowed += authorize(*q)
    cold = time.perf_counter() - t
    for q in questions:                       # fill the memo (it holds up to 200,000 answers)
        authorize(*q)
    warm_q = questions[: min(len(questions), 100_000)] * max(1, len(questions) // 100_000)
    t = time.perf_counter()
    for q in warm_q:
        authorize(*q)
    warm = time.perf_counter() - t
    samples = []
    clock = time.perf_counter_ns
    for q in questions[:100_000]:
        auth._cache = {}
        t0 = clock()
        authorize(*q)
        samples.append(clock() - t0)
    samples.sort()
    print(f"{len(auth)} ACLs, {len(questions):,} authorize() calls, {allowed:,} allowed")
    print(f"cold: {cold:.2f} s = {cold / len(questions) * 1e6:.2f} us/call (memo emptied before each)")
    print(f"warm: {warm:.2f} s for {len(warm_q):,} = {warm / len(warm_q) * 1e6:.2f} us/call (answers memoised)")
    print(f"cold per call: median {statistics.median(samples) / 1000:.2f} us, "
          f"p99 {samples[int(len(samples) * 0.99)] / 1000:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
