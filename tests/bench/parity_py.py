#!/usr/bin/python3
"""Python workloads of scripts/bench/parity, written as a user writes them.

  parity_py.py numpy DIR COUNT MIB   np.save COUNT arrays of MIB MiB each to
                                     DIR/arr_NNN.npy, then np.load them back
  parity_py.py pickle DIR ENTRIES    pickle.dump a dict of ENTRIES entries to
                                     DIR/state.pkl, then pickle.load it back

Prints one line "key=value ..." with the seconds each phase took (save_s and
load_s), and checks what was read back: exit 1 on a mismatch.
"""
import os
import pickle
import sys
import time


def numpy_case(d, count, mib):
    import numpy as np
    n = mib << 18  # float32 items
    arrays = [np.full(n, i, dtype=np.float32) for i in range(count)]
    t0 = time.perf_counter()
    for i, a in enumerate(arrays):
        np.save(os.path.join(d, f"arr_{i:03d}.npy"), a)
    save = time.perf_counter() - t0
    del arrays
    t0 = time.perf_counter()
    for i in range(count):
        a = np.load(os.path.join(d, f"arr_{i:03d}.npy"))
        if a.shape != (n,) or a[0] != i or a[-1] != i or a[n // 2] != i:
            print(f"parity_py: arr_{i:03d}.npy read back wrong", file=sys.stderr)
            sys.exit(1)
    load = time.perf_counter() - t0
    print(f"save_s={save:.6f} load_s={load:.6f}")


def pickle_case(d, entries):
    state = {i: (f"key-{i}", i * 0.5, b"x" * (i % 64)) for i in range(entries)}
    path = os.path.join(d, "state.pkl")
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
    save = time.perf_counter() - t0
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        back = pickle.load(f)
    load = time.perf_counter() - t0
    if len(back) != entries or back[entries - 1] != state[entries - 1] or back[7] != state[7]:
        print("parity_py: the pickled dict read back wrong", file=sys.stderr)
        sys.exit(1)
    print(f"save_s={save:.6f} load_s={load:.6f}")


def main(argv):
    if len(argv) == 5 and argv[1] == "numpy":
        numpy_case(argv[2], int(argv[3]), int(argv[4]))
    elif len(argv) == 4 and argv[1] == "pickle":
        pickle_case(argv[2], int(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
