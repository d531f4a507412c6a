#!/usr/bin/python3
"""Python programs for the end-to-end tests, run with libckptcache.so preloaded.

  pycase.py io DIR EXPECT_DIR     plain file I/O on tagged paths in DIR; copies
                                  of what each file must hold at exit go to
                                  EXPECT_DIR (untagged)
  pycase.py order N               an irregular restore order of N items
  pycase.py numpy DIR HINTS N     np.save N arrays (and one np.savez bundle)
                                  to DIR, then np.load them in the order of
                                  the hint file HINTS, all in this process

  pycase.py start DIR             in a process with a second thread: reading
                                  DIR/r.bin starts no thread and no socket and
                                  leaves the descriptor table as it was;
                                  writing DIR/w.bin starts the node registry's
                                  service (one socket), still without growing
                                  the table

Exits 0 when every byte read back is right, 1 on a mismatch, 3 when numpy
cannot be imported.
"""
import os
import pathlib
import random
import sys


def check(cond, what):
    if not cond:
        print(f"pycase: FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def io_case(d, expect):
    rnd = random.Random(42)
    data = rnd.randbytes(3_000_017)
    p1 = os.path.join(d, "p1.bin")

    # buffered writes in odd pieces, then whole and partial reads with seek
    with open(p1, "wb") as f:
        f.write(data[:1000])
        f.write(data[1000:2_000_000])
        f.write(data[2_000_000:])
        check(f.tell() == len(data), "tell after writing")
    check(os.stat(p1).st_size == len(data), "os.stat size of a fresh checkpoint")
    check(os.path.getsize(p1) == len(data), "os.path.getsize")
    with open(p1, "rb") as f:
        check(f.read() == data, "read() of the whole file")
    with open(p1, "rb") as f:
        f.seek(12345)
        check(f.read(1000) == data[12345:13345], "seek(12345) + read(1000)")
        f.seek(-100, os.SEEK_END)
        check(f.read() == data[-100:], "seek(-100, SEEK_END) + read()")
        f.seek(500_000)
        f.seek(77, os.SEEK_CUR)
        check(f.tell() == 500_077, "tell after SEEK_CUR")
        buf = bytearray(65536)
        n = f.readinto(buf)
        check(n == 65536 and bytes(buf) == data[500_077:500_077 + 65536], "readinto")
        f.seek(0)
        check(f.read(3) == data[:3], "seek(0) + read(3)")
    with open(p1, "rb", buffering=0) as f:
        check(f.readall() == data, "unbuffered readall")

    # text mode
    p2 = os.path.join(d, "p2.txt")
    lines = [f"line {i} of a text checkpoint\n" for i in range(20000)]
    with open(p2, "w") as f:
        f.writelines(lines)
    with open(p2) as f:
        check(f.readlines() == lines, "text readlines")
    with open(os.path.join(expect, "p2.txt"), "w") as f:
        f.writelines(lines)

    # os-level calls
    p3 = os.path.join(d, "p3.bin")
    fd = os.open(p3, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    check(os.write(fd, data[:100_000]) == 100_000, "os.write")
    check(os.pwrite(fd, data[100_000:150_000], 100_000) == 50_000, "os.pwrite")
    check(os.fstat(fd).st_size == 150_000, "os.fstat size")
    check(os.lseek(fd, 0, os.SEEK_SET) == 0, "os.lseek")
    check(os.read(fd, 150_001) == data[:150_000], "os.read on the writer")
    check(os.pread(fd, 10, 149_995) == data[149_995:150_000], "os.pread at the end")
    os.close(fd)

    # write to a temporary name, rename into place
    final = os.path.join(d, "final.bin")
    tmp = final + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data[:777_777])
    os.replace(tmp, final)
    check(not os.path.exists(tmp), "the temporary name is gone after os.replace")
    with open(final, "rb") as f:
        check(f.read() == data[:777_777], "read after os.replace")

    # unlink
    gone = os.path.join(d, "gone.bin")
    pathlib.Path(gone).write_bytes(data[:4096])
    check(pathlib.Path(gone).read_bytes() == data[:4096], "pathlib round trip")
    os.remove(gone)
    try:
        open(gone, "rb")
        check(False, "open after os.remove succeeded")
    except FileNotFoundError:
        pass

    # update in place (r+b): the file at its real path takes the bytes
    upd = bytearray(data)
    with open(p1, "r+b") as f:
        f.seek(1_000_000)
        f.write(b"X" * 5000)
    upd[1_000_000:1_005_000] = b"X" * 5000
    with open(p1, "rb") as f:
        check(f.read() == bytes(upd), "read after an in-place r+b update")

    for name, content in (("p1.bin", bytes(upd)), ("p3.bin", data[:150_000]),
                          ("final.bin", data[:777_777])):
        with open(os.path.join(expect, name), "wb") as f:
            f.write(content)
    print("pycase io: ok")


def order(n):
    # a fixed permutation with no monotone run longer than two
    step = 7 if n % 7 else 5
    return [(i * step + 3) % n for i in range(n)]


def make_array(np, i):
    rng = np.random.default_rng(1000 + i)
    if i % 3 == 0:
        return rng.random(262_144)                                  # 2 MiB float64
    if i % 3 == 1:
        return rng.integers(-2**31, 2**31, size=(512, 1024), dtype=np.int32)
    return rng.random((64, 64, 96), dtype=np.float32) * (i + 1)


def numpy_case(d, hints, n):
    try:
        import numpy as np
    except Exception as e:  # the reason goes into the test's failure line
        print(f"pycase: numpy cannot be imported ({e}); install python3-numpy", file=sys.stderr)
        sys.exit(3)
    for i in range(n):
        np.save(os.path.join(d, f"arr_{i:03d}.npy"), make_array(np, i))
    bundle = os.path.join(d, "bundle.npz")
    np.savez(bundle, a=make_array(np, 100), b=make_array(np, 101), c=np.arange(10))
    paths = []
    with open(hints) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                paths.append(line)
    check(len(paths) == n + 1, f"the hint file lists {len(paths)} entries, expected {n + 1}")
    for p in paths:
        name = os.path.basename(p)
        if name == "bundle.npz":
            with np.load(p) as z:
                check(np.array_equal(z["a"], make_array(np, 100)), "bundle.npz a")
                check(np.array_equal(z["b"], make_array(np, 101)), "bundle.npz b")
                check(np.array_equal(z["c"], np.arange(10)), "bundle.npz c")
        else:
            i = int(name[4:7])
            a = np.load(p)
            want = make_array(np, i)
            check(a.dtype == want.dtype and a.shape == want.shape, f"{name}: dtype/shape")
            check(np.array_equal(a, want), f"{name}: values differ")
    print(f"pycase numpy: {n} arrays and a bundle loaded in hint order, equal")


def process_state():
    """The descriptor table's slots, the threads and the sockets of this
    process."""
    import re
    with open("/proc/self/status") as f:
        slots = int(re.search(r"FDSize:\s+(\d+)", f.read()).group(1))
    socks = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            socks += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return slots, len(os.listdir("/proc/self/task")), socks


def start_case(d):
    import threading
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    before = process_state()
    with open(os.path.join(d, "r.bin"), "rb") as f:
        data = f.read()
    check(len(data) > 0, "r.bin read back empty")
    after_read = process_state()
    with open(os.path.join(d, "w.bin"), "wb") as f:
        f.write(data)
    with open(os.path.join(d, "w.bin"), "rb") as f:
        check(f.read() == data, "w.bin read back")
    after_write = process_state()
    done.set()
    other.join()
    print(f"pycase start: (slots, threads, sockets) {before} -> read {after_read} -> write {after_write}")
    check(after_read == before, f"reading a checkpoint changed (slots, threads, sockets) {before} to {after_read}")
    check(after_write[0] == before[0], f"writing one grew the descriptor table from {before[0]} to {after_write[0]} slots")
    check(after_write[2] == before[2] + 1, "writing one did not start the node registry's service")


def main(argv):
    if len(argv) >= 3 and argv[0] == "io":
        io_case(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "order":
        print(" ".join(str(i) for i in order(int(argv[1]))))
    elif len(argv) == 4 and argv[0] == "numpy":
        numpy_case(argv[1], argv[2], int(argv[3]))
    elif len(argv) == 2 and argv[0] == "start":
        start_case(argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
