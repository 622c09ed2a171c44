#!/usr/bin/env python3
"""port_llama.py — turn llama.cpp's grammar tests into our test data (JSON, data only).

usage: port_llama.py LLAMA_CPP_SOURCE_DIR OUT_DIR

Reads, from a llama.cpp checkout (ggerganov/llama.cpp, Feb 2025):
  tests/test-grammar-parser.cpp        -> parser.json       grammar + llama.cpp's symbol ids and
                                                             element layout, or an expected failure
  tests/test-grammar-integration.cpp   -> integration.json  grammar (or JSON schema) + passing and
                                                             failing strings, or an expected failure
  tests/test-json-schema-to-grammar.cpp-> schemas.json      schema + expected status + llama.cpp's grammar
The expectations are llama.cpp's own; nothing here comes from theseus. The three
left-recursion / missing-rule checks of the integration test are code, not tables; they
are written out below as the grammars they build. A small C++ lexer is enough for these
files (string, raw-string and char literals, comments, punctuation).
"""
import json
import os
import re
import sys


def lex(src):
    toks, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            i = src.index('\n', i) if '\n' in src[i:] else n
        elif src.startswith('/*', i):
            i = src.index('*/', i) + 2
        elif c.isspace():
            i += 1
        elif src.startswith('R"', i):
            j = src.index('(', i)
            delim = src[i + 2:j]
            end = src.index(')' + delim + '"', j)
            toks.append(('str', src[j + 1:end]))
            i = end + len(delim) + 2
        elif c == '"' or c == "'":
            j, out = i + 1, []
            while src[j] != c:
                if src[j] == '\\':
                    e = src[j + 1]
                    simple = {'n': '\n', 't': '\t', 'r': '\r', '0': '\0', '\\': '\\', '"': '"', "'": "'"}
                    if e in simple:
                        out.append(simple[e]); j += 2
                    elif e == 'x':
                        m = re.match(r'[0-9a-fA-F]+', src[j + 2:])
                        out.append(chr(int(m.group(0), 16))); j += 2 + len(m.group(0))
                    else:
                        raise ValueError('escape \\%s' % e)
                else:
                    out.append(src[j]); j += 1
            toks.append(('str' if c == '"' else 'char', ''.join(out)))
            i = j + 1
        elif c.isalnum() or c == '_':
            m = re.match(r'[A-Za-z0-9_]+', src[i:])
            toks.append(('id', m.group(0)))
            i += len(m.group(0))
        else:
            toks.append(('p', c))
            i += 1
    return toks


class P:
    def __init__(self, toks):
        self.t, self.i = toks, 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ('eof', None)

    def take(self, kind=None, val=None):
        tok = self.peek()
        if (kind and tok[0] != kind) or (val is not None and tok[1] != val):
            raise ValueError('expected %s %s, got %s at token %d' % (kind, val, tok, self.i))
        self.i += 1
        return tok

    def string(self):
        parts = []
        while self.peek()[0] == 'str':   # adjacent literals concatenate
            parts.append(self.take()[1])
        if not parts:
            raise ValueError('expected a string, got %s' % (self.peek(),))
        return ''.join(parts)

    def string_list(self):
        self.take('p', '{')
        out = []
        while self.peek() != ('p', '}'):
            out.append(self.string())
            if self.peek() == ('p', ','):
                self.take()
        self.take('p', '}')
        return out

    def find_call(self, names):
        while self.peek()[0] != 'eof':
            tok = self.peek()
            if tok[0] == 'id' and tok[1] in names and self.peek(1) == ('p', '('):
                return self.take()[1]
            self.i += 1
        return None


def port_parser(src):
    p, cases = P(lex(src)), []
    while True:
        name = p.find_call({'verify_parsing', 'verify_failure'})
        if not name:
            break
        if p.peek(1)[0] == 'id':        # the definition, not a call
            continue
        p.take('p', '(')
        grammar = p.string()
        if name == 'verify_failure':
            cases.append({'grammar': grammar, 'error': True})
            continue
        p.take('p', ',')
        p.take('p', '{')
        symbols = {}
        while p.peek() != ('p', '}'):
            p.take('p', '{')
            sym = p.string()
            p.take('p', ',')
            symbols[sym] = int(p.take('id')[1])
            p.take('p', '}')
            if p.peek() == ('p', ','):
                p.take()
        p.take('p', '}')
        p.take('p', ',')
        p.take('p', '{')
        elems = []
        while p.peek() != ('p', '}'):
            p.take('p', '{')
            typ = p.take('id')[1].replace('LLAMA_GRETYPE_', '')
            p.take('p', ',')
            tok = p.take()
            val = ord(tok[1]) if tok[0] == 'char' else int(tok[1])
            p.take('p', '}')
            elems.append([typ, val])
            if p.peek() == ('p', ','):
                p.take()
        p.take('p', '}')
        # split the flat element list into rules in id order (each ends with END)
        rules, cur = [], []
        for e in elems:
            cur.append(e)
            if e[0] == 'END':
                rules.append(cur)
                cur = []
        names = {v: k for k, v in symbols.items()}
        lines = []
        for rid, r in enumerate(rules):
            lines.append('%d %s: %s' % (rid, names[rid], ', '.join('%s %d' % (t, v) for t, v in r)))
        cases.append({'grammar': grammar, 'rules': lines})
    return cases


def port_integration(src):
    p, cases = P(lex(src)), []
    while True:
        name = p.find_call({'test_grammar', 'test_schema'})
        if not name:
            break
        if p.peek() == ('p', '(') and p.peek(1)[0] == 'id':   # the definitions themselves
            continue
        p.take('p', '(')
        desc = p.string()
        p.take('p', ',')
        body = p.string()
        p.take('p', ',')
        passing = p.string_list()
        p.take('p', ',')
        failing = p.string_list()
        case = {'name': desc, 'pass': passing, 'fail': failing}
        if name == 'test_schema':
            case['schema'] = json.loads(body)
        else:
            case['grammar'] = body
        cases.append(case)
    # test_failure_missing_root / _missing_reference / _left_recursion build these grammars
    # and expect llama_grammar_init_impl (or the parser) to fail
    cases.append({'name': 'missing root', 'error': 'root', 'grammar':
                  '\n        rot ::= expr\n        expr ::= term ("+" term)*\n        term ::= number\n        number ::= [0-9]+'})
    cases.append({'name': 'missing reference', 'error': 'numero', 'grammar':
                  'root ::= expr\n        expr ::= term ("+" term)*\n        term ::= numero\n        number ::= [0-9]+'})
    for i, g in enumerate([
            'root ::= "a" | root "a"',
            '\n        root ::= asdf\n        asdf ::= "a" | asdf "a"\n        ',
            '\n        root ::= asdf\n        asdf ::= "a" | foo "b"\n        foo ::= "c" | asdf "d" | "e"',
            '\n        root ::= asdf\n        asdf ::= "a" | foo "b"\n        foo ::= "c" | empty asdf "d" | "e"\n        empty ::= "blah" | ']):
        cases.append({'name': 'left recursion %d' % (i + 1), 'error': 'left recursion', 'grammar': g})
    return cases


def port_schemas(src):
    p, cases = P(lex(src)), []
    while True:
        if not p.find_call({'test'}):
            break
        if p.peek() != ('p', '(') or p.peek(1) != ('p', '{'):
            continue
        p.take('p', '(')
        p.take('p', '{')
        status = p.take('id')[1]
        p.take('p', ',')
        name = p.string()
        p.take('p', ',')
        schema = p.string()
        p.take('p', ',')
        grammar = p.string()
        # llama.cpp's trim(): drop leading/trailing blank and the indentation of every line
        g = re.sub(r'(^|\n)[ \t]+', r'\1', grammar.strip(' \n\r\t'))
        case = {'name': name, 'status': status, 'schema': json.loads(schema)}
        if status == 'SUCCESS':
            case['llama_grammar'] = g.split('\n')
        cases.append(case)
    return cases


def main():
    src, out = sys.argv[1], sys.argv[2]
    rd = lambda rel: open(os.path.join(src, rel), encoding='utf-8').read()
    with open(os.path.join(out, 'parser.json'), 'w') as f:
        json.dump({'source': 'llama.cpp tests/test-grammar-parser.cpp',
                   'cases': port_parser(rd('tests/test-grammar-parser.cpp'))}, f, indent=1, ensure_ascii=False)
        f.write('\n')
    with open(os.path.join(out, 'integration.json'), 'w') as f:
        json.dump({'source': 'llama.cpp tests/test-grammar-integration.cpp',
                   'cases': port_integration(rd('tests/test-grammar-integration.cpp'))}, f, indent=1, ensure_ascii=False)
        f.write('\n')
    with open(os.path.join(out, 'schemas.json'), 'w') as f:
        json.dump({'source': 'llama.cpp tests/test-json-schema-to-grammar.cpp',
                   'cases': port_schemas(rd('tests/test-json-schema-to-grammar.cpp'))}, f, indent=1, ensure_ascii=False)
        f.write('\n')


if __name__ == '__main__':
    main()
