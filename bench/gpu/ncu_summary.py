#!/usr/bin/env python3
"""ncu_summary.py — sums an `ncu --csv --metrics gpu__time_duration.sum` log per
kernel name: calls, total and mean microseconds, share of the total."""
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]
ki, mi, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[hdr + 1:]:
    if len(r) <= vi or r[mi] != "gpu__time_duration.sum": continue
    name = r[ki].split("(")[0][:60]
    v = float(r[vi].replace(",", ""))  # ns with --print-units base
    tot[name] += v; cnt[name] += 1
s = sum(tot.values())
print(f"{'kernel':60s} {'calls':>6s} {'total us':>10s} {'mean us':>8s} {'share':>6s}")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{k:60s} {cnt[k]:6d} {v/1e3:10.1f} {v/1e3/cnt[k]:8.2f} {100*v/s:5.1f}%")
print(f"{'sum':60s} {sum(cnt.values()):6d} {s/1e3:10.1f}")
