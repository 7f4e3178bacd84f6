"""redis-py over TLS against `epochdb serve --tls-port`: a client whose
certificate the CA signed gets in, one without is refused, and writes,
reads, a pipeline and a 1 MiB value go through.

Usage: redis_py_tls_check.py PORT PASSWORD CA_FILE CERT_FILE KEY_FILE
"""
import sys

import redis

port, password, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
r = redis.Redis(port=port, password=password, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key)
r.set("tls:k", "v")
assert r.get("tls:k") == b"v"
p = r.pipeline(transaction=False)
for _ in range(100):
    p.incr("tls:n")
assert p.execute()[-1] == 100
big = b"x" * (1 << 20)
r.set("tls:big", big)
assert r.get("tls:big") == big
try:
    redis.Redis(port=port, password=password, ssl=True, ssl_ca_certs=ca).ping()
    sys.exit("a client with no certificate was let in")
except redis.exceptions.ConnectionError:
    pass
print("redis-py over TLS: ok")
