#!/usr/bin/env python3
"""File-level import cycles inside each crate.

An edge A -> B is a path in A (`use crate::..`, `use super::..`, `use child::..`, inline
`crate::a::B`) that resolves to file B; `#[cfg(test)]` modules are ignored. Every strongly connected
component of more than one file is a cycle. Exits 1 when there is any.

usage: .ci/import_cycles.py SRC_DIR...   (e.g. crates/*/src src)
"""
import os, re, sys
def crate_files(src):
    out=[]
    for d,_,fs in os.walk(src):
        for f in fs:
            if f.endswith('.rs'): out.append(os.path.join(d,f))
    return out
def mod_dir(path):
    b=os.path.basename(path)
    if b in ('mod.rs','lib.rs','main.rs'): return os.path.dirname(path)
    return path[:-3]
def resolve(src, segs):
    """segs from crate root: return the deepest existing file."""
    cur=src; best=None
    for i,s in enumerate(segs):
        f1=os.path.join(cur,s+'.rs'); f2=os.path.join(cur,s,'mod.rs')
        if os.path.exists(f1): best=f1; cur=os.path.join(cur,s)
        elif os.path.exists(f2): best=f2; cur=os.path.join(cur,s)
        else: break
    return best
def segs_of(src, path):
    rel=os.path.relpath(mod_dir(path), src)
    return [] if rel=='.' else rel.split(os.sep)
def strip_comments(t):
    t=re.sub(r'//[^\n]*','',t)
    return t
def edges(src, path):
    t=strip_comments(open(path).read())
    t=re.sub(r"#\[cfg\(test\)\](?:\s*#\[[^\]]*\])*\s*mod \w+\s*\{.*", "", t, flags=re.S)
    here=segs_of(src,path)
    out=set()
    for m in re.finditer(r'\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{[^;]*\})?', t):
        base=m.group(1); segs=m.group(2).strip(':').split('::')
        if base=='crate': full=segs
        elif base=='self': full=here+segs
        else:
            full=here[:-1]+segs
        groups=[full]
        if m.group(3):
            for it in re.split(r'[,{}]', m.group(3)):
                it=it.strip().split(' as ')[0].strip()
                if it and it!='self' and re.match(r'^[A-Za-z_][\w:]*$', it): groups.append(full+it.split('::'))
        for g in groups:
            f=resolve(src,g)
            if f and os.path.abspath(f)!=os.path.abspath(path): out.add(f)
    # pub use child::..; / use child::.. inside a module file
    for m in re.finditer(r'\buse\s+([a-z_][a-z0-9_]*)::', t):
        seg=m.group(1)
        if seg in ('crate','super','self','std','core','alloc'): continue
        f=resolve(src, here+[seg])
        if f and os.path.abspath(f)!=os.path.abspath(path): out.add(f)
    return out
def scc(graph):
    index={}; low={}; st=[]; on=set(); res=[]; i=[0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v]=low[v]=i[0]; i[0]+=1; st.append(v); on.add(v)
        for w in graph.get(v,()):
            if w not in index: visit(w); low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],index[w])
        if low[v]==index[v]:
            comp=[]
            while True:
                w=st.pop(); on.discard(w); comp.append(w)
                if w==v: break
            res.append(comp)
    for v in graph:
        if v not in index: visit(v)
    return res
total=0
for src in sys.argv[1:]:
    g={f:edges(src,f) for f in crate_files(src)}
    for comp in scc(g):
        if len(comp)>1:
            total+=1
            print(f'cycle in {src}: '+' , '.join(sorted(os.path.relpath(c,src) for c in comp)))
print(f'{total} cycles')
sys.exit(1 if total else 0)
