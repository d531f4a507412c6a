#!/usr/bin/python3
"""Python workloads of scripts/bench/parity, written as a user writes them.

  parity_py.py numpy DIR COUNT MIB   np.save COUNT arrays of MIB MiB each to
                                     DIR/arr_NNN.npy, then np.load them back
  parity_py.py pickle DIR ENTRIES    pickle.dump a dict of ENTRIES entries to
                                     DIR/state.pkl, then pickle.load it back
  parity_py.py h5py DIR COUNT MIB    h5py writes COUNT datasets of MIB MiB to
                                     DIR/state.h5, then reads them back
  parity_py.py small DIR COUNT       writes COUNT small files (JSON, pickles
                                     and bytes of 1 B to 4 KiB) to
                                     DIR/s_NNNNN.dat, then reads them back
  parity_py.py replace DIR COUNT NAMES KIB
                                     saves COUNT checkpoints of KIB KiB over
                                     NAMES names the atomic way (open a
                                     temporary name, write, os.replace it
                                     onto DIR/ck_NN.bin), then reads each
                                     name's last version back
  parity_py.py job DIR MIB STOP      a job checkpointing beside a walker:
                                     writes DIR/job_N.bin (4 names, MIB MiB
                                     each) every 10 ms until the file STOP
                                     exists, then checks the last versions

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


def h5py_case(d, count, mib):
    import h5py
    import numpy as np
    n = mib << 18  # float32 items
    arrays = [np.full(n, i, dtype=np.float32) for i in range(count)]
    path = os.path.join(d, "state.h5")
    t0 = time.perf_counter()
    with h5py.File(path, "w") as f:
        for i, a in enumerate(arrays):
            f.create_dataset(f"a{i:03d}", data=a)
    save = time.perf_counter() - t0
    del arrays
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        for i in range(count):
            a = f[f"a{i:03d}"][...]
            if a.shape != (n,) or a[0] != i or a[-1] != i or a[n // 2] != i:
                print(f"parity_py: dataset a{i:03d} read back wrong", file=sys.stderr)
                sys.exit(1)
    load = time.perf_counter() - t0
    print(f"save_s={save:.6f} load_s={load:.6f}")


def small_body(i):
    import json
    import random
    r = random.Random(i)
    k = i % 3
    if k == 0:
        return json.dumps({"step": i, "loss": r.random(), "tags": ["a"] * (i % 40)}).encode()
    if k == 1:
        return pickle.dumps([r.random() for _ in range(r.randrange(0, 500))])
    return r.randbytes(r.randrange(1, 4097))


def small_case(d, count):
    bodies = [small_body(i) for i in range(count)]
    t0 = time.perf_counter()
    for i, b in enumerate(bodies):
        with open(os.path.join(d, f"s_{i:05d}.dat"), "wb") as f:
            f.write(b)
    save = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i, b in enumerate(bodies):
        with open(os.path.join(d, f"s_{i:05d}.dat"), "rb") as f:
            if f.read() != b:
                print(f"s_{i:05d}.dat: read back differs", file=sys.stderr)
                sys.exit(1)
    load = time.perf_counter() - t0
    print(f"save_s={save:.6f} load_s={load:.6f}")


def replace_case(d, count, names, kib):
    # 23 bodies over the names: each version of a name differs from the last
    bodies = [bytes([(7 * k + 1) % 256]) * (kib * 1024) for k in range(23)]
    t0 = time.perf_counter()
    for i in range(count):
        final = os.path.join(d, f"ck_{i % names:02d}.bin")
        with open(final + ".tmp", "wb") as f:
            f.write(bodies[i % 23])
        os.replace(final + ".tmp", final)
    save = time.perf_counter() - t0
    t0 = time.perf_counter()
    for j in range(min(names, count)):
        last = max(i for i in range(count) if i % names == j)
        with open(os.path.join(d, f"ck_{j:02d}.bin"), "rb") as f:
            if f.read() != bodies[last % 23]:
                print(f"ck_{j:02d}.bin: read back differs", file=sys.stderr)
                sys.exit(1)
    load = time.perf_counter() - t0
    print(f"save_s={save:.6f} load_s={load:.6f}")


def job_case(d, mib, stop):
    n = 0
    while not os.path.exists(stop):
        with open(os.path.join(d, f"job_{n % 4}.bin"), "wb") as f:
            f.write(bytes([n % 251]) * (mib << 20))
        n += 1
        time.sleep(0.01)
    for j in range(min(n, 4)):
        last = max(i for i in range(n) if i % 4 == j)
        with open(os.path.join(d, f"job_{j}.bin"), "rb") as f:
            if f.read() != bytes([last % 251]) * (mib << 20):
                print(f"job_{j}.bin: read back differs", file=sys.stderr)
                sys.exit(1)
    print(f"checkpoints={n}")


def main(argv):
    if len(argv) == 5 and argv[1] == "numpy":
        numpy_case(argv[2], int(argv[3]), int(argv[4]))
    elif len(argv) == 4 and argv[1] == "pickle":
        pickle_case(argv[2], int(argv[3]))
    elif len(argv) == 5 and argv[1] == "h5py":
        h5py_case(argv[2], int(argv[3]), int(argv[4]))
    elif len(argv) == 4 and argv[1] == "small":
        small_case(argv[2], int(argv[3]))
    elif len(argv) == 6 and argv[1] == "replace":
        replace_case(argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
    elif len(argv) == 5 and argv[1] == "job":
        job_case(argv[2], int(argv[3]), argv[4])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
