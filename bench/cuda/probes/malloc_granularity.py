"""How much device memory cudaMalloc and a stream-ordered pool take for a list of sizes.

Prints JSON lines: per scheme the sum asked and the cudaMemGetInfo delta. Run on the GPU
machine with the sizes file written by the caller (a JSON object name -> list of bytes):
    python3 bench/cuda/probes/malloc_granularity.py sizes.json
"""
import ctypes, ctypes.util, json, sys

rt = ctypes.CDLL(ctypes.util.find_library("cudart") or "libcudart.so")
MiB = 1 << 20


def used():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
    return total.value - free.value


def malloc(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p


def scheme_each(sizes):
    ptrs = [malloc(n) for n in sizes]
    return ptrs


def scheme_slab(sizes):
    return [malloc(sum((n + 255) // 256 * 256 for n in sizes))]


def scheme_pool(sizes):
    # A fresh pool (cudaMemPoolCreate) with the default properties, allocations on stream 0.
    class Props(ctypes.Structure):
        _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int), ("locType", ctypes.c_int),
                    ("locId", ctypes.c_int), ("win32", ctypes.c_void_p), ("maxSize", ctypes.c_size_t),
                    ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 54)]
    props = Props()
    props.allocType, props.locType, props.locId = 1, 1, 0  # pinned, device 0
    pool = ctypes.c_void_p()
    assert rt.cudaMemPoolCreate(ctypes.byref(pool), ctypes.byref(props)) == 0
    ptrs = []
    for n in sizes:
        p = ctypes.c_void_p()
        assert rt.cudaMallocFromPoolAsync(ctypes.byref(p), ctypes.c_size_t(n), pool, None) == 0
        ptrs.append(p)
    assert rt.cudaDeviceSynchronize() == 0
    return ptrs


def main():
    assert rt.cudaFree(None) == 0
    cases = json.load(open(sys.argv[1]))
    cases["1MiB x 12"] = [MiB] * 12
    cases["4MiB x 6"] = [4 * MiB] * 6
    cases["2KiB x 200"] = [2048] * 200
    cases["3MiB x 6"] = [3 * MiB] * 6
    for name, sizes in cases.items():
        for scheme in (scheme_each, scheme_slab, scheme_pool):
            before = used()
            scheme(sizes)  # leaked on purpose: each case measures on top of the last
            delta = used() - before
            print(json.dumps({"case": name, "scheme": scheme.__name__[7:], "tensors": len(sizes),
                              "asked_mib": round(sum(sizes) / MiB, 3), "measured_mib": round(delta / MiB, 3)}))


main()
