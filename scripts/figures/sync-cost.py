#!/usr/bin/env python3
"""Cost of one 8 KiB direct-I/O write + fdatasync on this machine's disk,
for three kinds of log file: space reserved with fallocate (what epochdb's
logger does today), space written with zeros first, and appending past the
end. Each kind runs ROUNDS times (interleaved); prints p50/p99 in µs.
Usage: scripts/figures/sync-cost.py [DIR] [ROUNDS]  (DIR default: the current one)."""
import mmap, os, sys, time

def run(path, kind, n=2000):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    size = 64 << 20
    if kind == "fallocate":
        os.posix_fallocate(fd, 0, size)
    elif kind == "zero-filled":
        zeros = mmap.mmap(-1, 1 << 20)
        for i in range(size >> 20):
            os.pwrite(fd, zeros, i << 20)
    os.fsync(fd)
    block = mmap.mmap(-1, 8192)  # page-aligned, as O_DIRECT needs
    block.write(b"x" * 8192)
    lat = []
    for i in range(n):
        t = time.perf_counter()
        os.pwrite(fd, block, i * 8192)
        os.fdatasync(fd)
        lat.append(time.perf_counter() - t)
    os.close(fd)
    os.unlink(path)
    lat.sort()
    return lat[n // 2] * 1e6, lat[int(n * 0.99)] * 1e6

directory = sys.argv[1] if len(sys.argv) > 1 else "."
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
path = os.path.join(directory, "sync-cost.probe")
for r in range(rounds):
    for kind in ("fallocate", "zero-filled", "append"):
        p50, p99 = run(path, kind)
        print(f"round {r + 1} {kind:12} p50 {p50:6.1f} us  p99 {p99:6.1f} us")
