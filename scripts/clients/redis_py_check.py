"""redis-py against `epochdb serve`, as an application would use it.

Usage: python redis_py_check.py PORT PASSWORD PROTOCOL (2 or 3) [REPLICA_PORT]

Run by scripts/client-libraries.sh, which installs redis-py and starts the
server with --requirepass PASSWORD (a `--safety sync` replication primary)
and a replica of it on REPLICA_PORT. Exits non-zero at the first check
that fails, naming it.
"""

import sys
import threading
import time

import redis

port, password, protocol = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
replica_port = int(sys.argv[4]) if len(sys.argv) > 4 else None


def client(**kw):
    return redis.Redis(port=port, password=password, protocol=protocol, decode_responses=True, **kw)


def check(what, got, want):
    if got != want:
        sys.exit(f"redis-py (RESP{protocol}): {what}: got {got!r}, want {want!r}")


r = client()
check("PING", r.ping(), True)
r.flushall()

# Without the password, the server refuses the connection's first command.
try:
    redis.Redis(port=port, protocol=2).get("a")
    sys.exit("redis-py: a client without the password was served")
except redis.AuthenticationError:
    pass

# Strings, counters, expiry.
check("SET EX", r.set("a", "1", ex=100), True)
check("GET", r.get("a"), "1")
check("TTL", r.ttl("a"), 100)
check("INCR", r.incr("n"), 1)
check("INCRBY", r.incrby("n", 5), 6)
check("INCRBYFLOAT", r.incrbyfloat("f", 1.5), 1.5)
check("MSET", r.mset({"x": "1", "y": "2"}), True)
check("MGET", r.mget(["x", "y", "z"]), ["1", "2", None])
check("SET NX on a present key", r.set("x", "9", nx=True), None)
check("GETEX PX", r.getex("x", px=5000), "1")
check("PERSIST", r.persist("x"), True)
check("GETDEL", r.getdel("y"), "2")
check("EXISTS", r.exists("a", "x", "y"), 2)
check("APPEND", r.append("x", "23"), 3)
check("GETRANGE", r.getrange("x", 1, -1), "23")

# Hashes and iterators.
check("HSET", r.hset("h", mapping={"a": "1", "b": "2"}), 2)
check("HINCRBY", r.hincrby("h", "a", 3), 4)
check("HGETALL", r.hgetall("h"), {"a": "4", "b": "2"})
check("HSCAN", sorted(r.hscan_iter("h")), [("a", "4"), ("b", "2")])
for i in range(300):
    r.set(f"scan:{i:03}", i)
check("SCAN MATCH", sorted(r.scan_iter(match="scan:*", count=50)), [f"scan:{i:03}" for i in range(300)])
check("TYPE", (r.type("h"), r.type("a"), r.type("none")), ("hash", "string", "none"))

# Errors come back as the library's exceptions.
try:
    r.hget("a", "f")
    sys.exit("redis-py: HGET on a string succeeded")
except redis.ResponseError as e:
    check("WRONGTYPE", str(e).split()[0], "WRONGTYPE")

# Pipelines, with and without MULTI.
p = r.pipeline(transaction=False)
for i in range(1000):
    p.set(f"k{i}", i)
check("pipeline", p.execute(), [True] * 1000)
p = r.pipeline(transaction=True)
p.set("t", "v").incr("n").get("t")
check("MULTI pipeline", p.execute(), [True, 7, "v"])

# WATCH through the library's transaction helper, under contention: every
# increment lands exactly once, whatever the retries.
r.set("counter", 0)


def add(times):
    c = client()
    for _ in range(times):

        def step(pipe):
            v = int(pipe.get("counter"))
            pipe.multi()
            pipe.set("counter", v + 1)

        c.transaction(step, "counter")


threads = [threading.Thread(target=add, args=(200,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("WATCH/MULTI counter under 4 clients", r.get("counter"), "800")

# Numbered databases, INFO, ACL users.
d3 = client(db=3)
check("SELECT 3 SET", d3.set("in3", "1"), True)
check("GET in db 0", r.get("in3"), None)
check("DBSIZE in db 3", d3.dbsize(), 1)
check("INFO keyspace db3", r.info("keyspace").get("db3", {}).get("keys"), 1)
check("ACL SETUSER", r.acl_setuser("reader", enabled=True, passwords=["+pw"], keys=["*"], commands=["+get", "+ping"]), True)
reader = redis.Redis(port=port, username="reader", password="pw", protocol=protocol, decode_responses=True)
check("GET as reader", reader.get("a"), "1")
try:
    reader.set("a", "2")
    sys.exit("redis-py: a user without +set wrote")
except redis.exceptions.NoPermissionError:
    pass
try:
    reader.acl_whoami()
    sys.exit("redis-py: a user without +acl ran ACL WHOAMI")
except redis.exceptions.NoPermissionError:
    pass
check("ACL WHOAMI", r.acl_whoami(), "default")
check("CLIENT SETNAME/GETNAME", (r.client_setname("app"), r.client_getname()), (True, "app"))
# A checkpoint on request; LASTSAVE as the library's datetime.
check("BGSAVE SCHEDULE", r.bgsave(schedule=True) in (True, "Background saving started", "Background saving scheduled"), True)
check("LASTSAVE", type(r.lastsave()).__name__, "datetime")
# SAVE replies once a checkpoint begun after it is installed.
before = r.info("persistence")["epochdb_checkpoints"]
check("SAVE", r.save(), True)
check("SAVE's checkpoint", r.info("persistence")["epochdb_checkpoints"] > before, True)

# A replica: WAIT counts it, it serves the write once replayed, refuses
# writes with READONLY (the library's ReadOnlyError), and ROLE says so.
if replica_port is not None:
    check("SET on the primary", r.set("replicated", f"v{protocol}"), True)
    check("WAIT for the replica", r.wait(1, 5000), 1)
    rep = redis.Redis(port=replica_port, password=password, protocol=protocol, decode_responses=True)
    deadline = time.monotonic() + 10
    while rep.get("replicated") != f"v{protocol}" and time.monotonic() < deadline:
        time.sleep(0.01)
    check("GET on the replica", rep.get("replicated"), f"v{protocol}")
    try:
        rep.set("replicated", "no")
        sys.exit("redis-py: a replica took a write")
    except redis.exceptions.ReadOnlyError:
        pass
    check("ROLE on the replica", rep.role()[0], "slave")
print(f"redis-py {redis.__version__}, RESP{protocol}{', with a replica' if replica_port else ''}: ok")
