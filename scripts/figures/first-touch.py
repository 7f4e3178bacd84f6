#!/usr/bin/env python3
"""What the kernel charges for memory touched for the first time.

Maps fresh anonymous memory, writes one byte per 4 KiB page, and prints
GB/s, for 4 KiB pages and for transparent huge pages (MADV_HUGEPAGE),
alternating, each in its own process so no round reuses another's pages.
The kernel zeroes every new page; on a virtual machine the host may also
have to back it. Recovery and growing benchmarks pay this for every byte
they allocate.

Usage: scripts/figures/first-touch.py [ROUNDS] [GIB]   (default 3 rounds of 1 GiB)
"""
import mmap
import statistics
import subprocess
import sys
import time


def touch(kind, gib):
    n = gib << 30
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if kind == "huge":
        m.madvise(mmap.MADV_HUGEPAGE)
    t = time.perf_counter()
    for off in range(0, n, 4096):
        m[off] = 1
    first = time.perf_counter() - t
    t = time.perf_counter()
    for off in range(0, n, 4096):
        m[off] = 2
    loop = time.perf_counter() - t  # the same loop on touched pages
    print(n / 1e9 / max(first - loop, 1e-9))


if len(sys.argv) > 1 and sys.argv[1] == "--child":
    touch(sys.argv[2], int(sys.argv[3]))
    sys.exit(0)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
gib = int(sys.argv[2]) if len(sys.argv) > 2 else 1
runs = {"4k": [], "huge": []}
for r in range(rounds):
    for kind in (["4k", "huge"] if r % 2 == 0 else ["huge", "4k"]):
        out = subprocess.run([sys.executable, __file__, "--child", kind, str(gib)], capture_output=True, text=True)
        gbs = float(out.stdout.strip())
        runs[kind].append(gbs)
        print(f"round {r + 1} {kind}: {gbs:.2f} GB/s", flush=True)
for kind, v in runs.items():
    print(f"{kind}: median {statistics.median(v):.2f} GB/s of first touch ({', '.join(f'{x:.2f}' for x in v)})")
