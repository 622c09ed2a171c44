#!/usr/bin/env python3
"""cmp_gguf_tensors.py A.gguf B.gguf — do two GGUF files hold the same tensors (names,
types, shapes, data bytes)? Metadata is not compared. A minimal GGUF v2/v3 reader of our
own (no type table needed: a tensor's bytes run from its offset to the next tensor's
offset, alignment padding included, or to the end of the file). Exit 0 when identical;
prints one line per difference otherwise. Used by make_ternary_goldens.sh to check that
`theseus quantize --type T` writes the tensors the peer's `llama-quantize --pure` writes."""
import struct
import sys


def read(path):
    b = open(path, 'rb').read()
    o = 0

    def u(fmt):
        nonlocal o
        v = struct.unpack_from('<' + fmt, b, o)
        o += struct.calcsize('<' + fmt)
        return v[0]

    def s():
        nonlocal o
        n = u('Q')
        v = b[o:o + n].decode()
        o += n
        return v

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def value(t):
        nonlocal o
        if t == 8:
            return s()
        if t == 9:
            et, n = u('I'), u('Q')
            return [value(et) for _ in range(n)]
        v = b[o:o + sizes[t]]
        o += sizes[t]
        return v

    assert b[:4] == b'GGUF', path
    o = 4
    _ver, nt, nkv = u('I'), u('Q'), u('Q')
    align = 32
    for _ in range(nkv):
        k, t = s(), u('I')
        v = value(t)
        if k == 'general.alignment':
            align = struct.unpack('<I', v)[0]
    ts = []
    for _ in range(nt):
        name, nd = s(), u('I')
        ne = [u('Q') for _ in range(nd)]
        t, off = u('I'), u('Q')
        ts.append((name, ne, t, off))
    start = (o + align - 1) // align * align
    offs = sorted(t[3] for t in ts) + [len(b) - start]
    out = {}
    for name, ne, t, off in ts:
        end = offs[offs.index(off) + 1]
        out[name] = (ne, t, b[start + off:start + end])
    return out


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    bad = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f'{name}: only in one file')
            bad += 1
            continue
        (na, ta, da), (nb, tb, db) = a[name], b[name]
        if na != nb or ta != tb:
            print(f'{name}: shape/type {na}/{ta} vs {nb}/{tb}')
            bad += 1
        elif da.rstrip(b'\0') != db.rstrip(b'\0'):
            print(f'{name}: data differs')
            bad += 1
    print(f'{len(a)} tensors, {bad} differ')
    sys.exit(1 if bad else 0)


main()
