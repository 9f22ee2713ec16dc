#!/usr/bin/env python3
# Lists the functions whose bodies are longer than N lines in the C++ files under the given folders, and
# exits 1 where there is one: `scripts/long_functions.py 120 traces` is a test (issue 43: a function of the
# readers reads on one screen). Comments and string literals are blanked first; a body is the '{' after a
# parameter list (and const, override, noexcept, a trailing return type) outside another function, so a
# lambda or a local class counts toward the function it sits in. A heuristic made for this code base's
# style (clang-format'd), not a C++ parser.
import re, sys, pathlib
if len(sys.argv) < 3:
    sys.exit('usage: long_functions.py MAX_LINES FOLDER...')
N = int(sys.argv[1]); roots = sys.argv[2:]
def strip(s):
    s = re.sub(r'//[^\n]*', '', s)
    s = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), s, flags=re.S)
    s = re.sub(r'R"(\w*)\((.*?)\)\1"', lambda m: '""' + '\n' * m.group(0).count('\n'), s, flags=re.S)
    s = re.sub(r'"(\\.|[^"\\\n])*"', '""', s)
    s = re.sub(r"'(\\.|[^'\\\n])'", "''", s)
    return s
out = []
for root in roots:
    for p in sorted(pathlib.Path(root).rglob('*')):
        if p.suffix not in ('.cpp', '.h'): continue
        s = strip(p.read_text())
        stack = []  # (kind, line, name)
        line = 1; i = 0
        while i < len(s):
            c = s[i]
            if c == '\n': line += 1
            elif c == '{':
                before = s[max(0, i - 300):i]
                m = re.search(r'\)\s*(const|override|final|noexcept|mutable|->\s*[\w:<>,\s*&]+|\s)*\s*$', before)
                is_fn = bool(m) and not re.search(r'\b(if|for|while|switch|catch)\s*\([^()]*(\([^()]*\))*[^()]*\)\s*$', before)
                name = ''
                if is_fn:
                    mm = re.findall(r'([\w:~<>]+)\s*\(', before)
                    name = mm[-1] if mm else '?'
                inside_fn = any(k == 'fn' for k, _, _ in stack)
                stack.append(('fn' if is_fn and not inside_fn else 'blk', line, name))
            elif c == '}':
                if stack:
                    k, start, name = stack.pop()
                    if k == 'fn' and line - start + 1 > N: out.append((line - start + 1, f'{p}:{start}', name))
            i += 1
for n, where, name in sorted(out, reverse=True):
    print(f'{where}: {name} is {n} lines (at most {N})')
if not out:
    print(f'no function over {N} lines under {" ".join(roots)}')
sys.exit(1 if out else 0)
