"""Per-kernel GPU time per forward from Nsight Compute CSV (gpu__time_duration.sum).

usage: kernel_profile_report.py PLANRT.csv PASSES TORCH.csv PASSES
Kernels are grouped by name (template arguments and parameters dropped); times are
divided by the number of forwards the profiled process ran.
"""
import collections
import csv
import re
import sys

PARAMS = re.compile(r"\(.*")


def kernels(path):
    lines = [line for line in open(path) if line.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header, out = rows[0], []
    for row in rows[1:]:
        record = dict(zip(header, row))
        if record["Metric Name"] == "gpu__time_duration.sum":
            name = PARAMS.sub("", record["Kernel Name"])[:90]
            out.append((name, float(record["Metric Value"].replace(",", "")) / 1000.0))
    return out


def report(path, passes):
    found = kernels(path)
    total = collections.defaultdict(float)
    count = collections.Counter()
    for name, us in found:
        total[name] += us
        count[name] += 1
    print(f"== {path}: {sum(us for _, us in found) / passes:.1f} us of kernels per forward")
    for name, us in sorted(total.items(), key=lambda item: -item[1]):
        print(f"{us / passes:9.1f} us  x{count[name] / passes:5.1f}  {name}")
    return len(found)


if __name__ == "__main__":
    args = sys.argv[1:]
    empty = [args[i] for i in range(0, len(args), 2) if report(args[i], int(args[i + 1])) == 0]
    if empty:
        # A profile without kernels means the profiled process failed or ncu saw nothing.
        sys.exit(f"kernel_profile_report.py: no kernels in {', '.join(empty)}")
