"""Python's atomic checkpoint, as programs write it: each checkpoint into a
tempfile.NamedTemporaryFile in the checkpoint folder, flushed (and synced
with --fsync), renamed onto its name with os.replace, and the folder
rotated to the last three by a glob. Prints the loop's time.
  atomic_py.py DIR COUNT MIB [--fsync]"""
import glob
import os
import sys
import tempfile
import time


def main(argv):
    if len(argv) not in (4, 5) or (len(argv) == 5 and argv[4] != "--fsync"):
        print(__doc__, file=sys.stderr)
        return 2
    d, count, size = argv[1], int(argv[2]), int(argv[3]) << 20
    sync = len(argv) == 5
    data = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(count):
        with tempfile.NamedTemporaryFile(dir=d, delete=False) as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(f.name, os.path.join(d, "ck%04d.bin" % i))
        for old in sorted(glob.glob(os.path.join(d, "ck*.bin")))[:-3]:
            os.remove(old)
    loop = time.perf_counter() - t0
    with open(os.path.join(d, "ck%04d.bin" % (count - 1)), "rb") as f:
        if f.read() != data:
            print("atomic_py: the last checkpoint read back wrong", file=sys.stderr)
            return 1
    print("loop_s=%.6f" % loop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
