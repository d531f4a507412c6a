#!/usr/bin/python3
"""A descriptor open for reading while the program replaces the file three
ways, as a user's script does: rewritten in place ("wb"), removed, and
replaced by a rename. Prints what each reader read, one line per way, so
that the run under the library is compared with the same run without it.

  readers_replaced.py DIR
"""
import hashlib
import os
import subprocess
import sys


def digest(b):
    return f"{len(b)}:{hashlib.sha256(b).hexdigest()[:16]}"


def read_all(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    out = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(out)
        out.append(b)


def main(d):
    v1 = bytes(range(256)) * 4096 * 8          # 8 MiB
    v2 = b"the newer version\n" * 100000       # 1.8 MB
    for way in ("rewrite", "unlink", "rename"):
        p = os.path.join(d, f"{way}.bin")
        with open(p, "wb") as f:
            f.write(v1)
        fd = os.open(p, os.O_RDONLY)
        head = os.read(fd, 4096)
        if way == "rewrite":
            with open(p, "wb") as f:
                f.write(v2)
        elif way == "unlink":
            os.unlink(p)
        else:
            with open(p + ".tmp", "wb") as f:
                f.write(v2)
            os.replace(p + ".tmp", p)
        try:
            rest = digest(read_all(fd))
        except OSError as e:
            rest = f"error {e.errno}"
        os.close(fd)
        print(f"{way}: first {digest(head)}, again {rest}")
    # a file the cache holds nothing of (one written in place, as a file of
    # an earlier run), read at its real path, then rewritten in place; also
    # with a child run meanwhile (a vfork child closing every descriptor of
    # its own), and read through a copy of the descriptor
    for way in ("in place", "after a child", "through a dup"):
        p = os.path.join(d, way.replace(" ", "_") + ".bin")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, v1)
        os.close(fd)
        fd = os.open(p, os.O_RDONLY)
        head = os.read(fd, 4096)
        if way == "after a child":
            subprocess.run(["true"], check=True)
        elif way == "through a dup":
            fd2 = os.dup(fd)
            os.close(fd)
            fd = fd2
        with open(p, "wb") as f:
            f.write(v2)
        print(f"{way}: first {digest(head)}, again {digest(read_all(fd))}")
        os.close(fd)


if __name__ == "__main__":
    main(sys.argv[1])
