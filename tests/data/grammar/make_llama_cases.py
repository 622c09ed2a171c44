#!/usr/bin/env python3
"""make_llama_cases.py — strings for llama.cpp's grammars/ with llama.cpp's verdicts.

usage: make_llama_cases.py --peer CMD [--gen BUILD/tests/test_grammar] [DIR]

For every DIR/*.gbnf (default: llama-grammars/ beside this script) writes NAME.cases:
{"strings": [...], "llama": [1 or 0 per string]}. The strings are 25 derived from the
grammar by theseus' generator (test_grammar --generate) and, for each of those, 3 random
mutations (a character deleted, inserted or replaced; seeded, so the file is stable), plus
"". The verdicts come from CMD, a peer that must print, for grammar file FILE and one
JSON string per stdin line, 1 when llama.cpp's matcher (llama_grammar_accept over the
code points, then an empty stack) accepts the whole string and 0 otherwise:
    CMD FILE < strings.jsonl
The peer used for the committed files was a small harness around llama.cpp's
src/llama-grammar.cpp (ggerganov/llama.cpp, February 2025); it is not part of this
repository. test_grammar checks that theseus gives the same verdict for every string.
"""
import glob
import json
import os
import random
import subprocess
import sys

ALPHABET = list(' abcxyz019{}[]()",:.-+*/\\\n\t#=<>é中😀')


def mutate(s, rnd):
    cps = list(s)
    op = rnd.randrange(3)
    if op == 0 and cps:
        del cps[rnd.randrange(len(cps))]
    elif op == 1:
        cps.insert(rnd.randrange(len(cps) + 1), rnd.choice(ALPHABET))
    elif cps:
        cps[rnd.randrange(len(cps))] = rnd.choice(ALPHABET)
    return ''.join(cps)


def main():
    args = sys.argv[1:]
    peer = gen = None
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'llama-grammars')
    while args:
        a = args.pop(0)
        if a == '--peer':
            peer = args.pop(0)
        elif a == '--gen':
            gen = args.pop(0)
        else:
            here = a
    if not peer:
        sys.exit(__doc__)
    gen = gen or 'build/tests/test_grammar'
    for path in sorted(glob.glob(os.path.join(here, '*.gbnf'))):
        out = subprocess.run([gen, '--generate', path, '25', '1'], capture_output=True, text=True, check=True).stdout
        base = [json.loads(l) for l in out.splitlines() if l.strip()]
        rnd = random.Random(os.path.basename(path))
        strings = [''] + base
        for s in base:
            strings += [mutate(s, rnd) for _ in range(3)]
        seen, uniq = set(), []
        for s in strings:
            if s not in seen and '\0' not in s:
                seen.add(s)
                uniq.append(s)
        res = subprocess.run(peer.split() + [path], input=''.join(json.dumps(s) + '\n' for s in uniq),
                             capture_output=True, text=True, check=True).stdout.split()
        assert len(res) == len(uniq), (path, len(res), len(uniq))
        with open(path[:-5] + '.cases', 'w') as f:
            json.dump({'strings': uniq, 'llama': [int(x) for x in res]}, f, indent=0, ensure_ascii=False)
            f.write('\n')
        print('%s: %d strings, %d accepted by llama.cpp' % (os.path.basename(path), len(uniq), sum(map(int, res))))


if __name__ == '__main__':
    main()
