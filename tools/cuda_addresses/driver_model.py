import sys, bisect
MiB=1<<20
CHUNK=32*MiB; PAGE=2*MiB
def ru(n,a): return (n+a-1)//a*a
def rd(n,a): return n//a*a
class VA:
    def __init__(self, top_gaps=True):
        self.H = 1<<46  # heap bottom (32 MiB aligned)
        self.chunks = {}  # base -> [size, {addr:size}]
        self.free = []    # free VA ranges below heap: list of (begin,end) sorted
        self.free=[(1<<40, self.H)]
        if top_gaps:
            # fresh context: its heap [H, ...) with two gaps, modelled as one chunk holding the context
            ctx_size = 0x20000000
            self.chunks[self.H] = [ctx_size, {self.H:0x19e00000, self.H+0x1a000000:0x4800000, self.H+0x20000000-0x1800000:0x1800000}]
            # free gaps: [H+0x19e00000,+2MiB) and [H+0x1e800000, +24MiB)
            self.chunks[self.H][1] = {self.H:0x19e00000, self.H+0x1a000000:0x4800000}
            self.chunks[self.H][0] = 0x1e800000 + 24*MiB
    def gaps(self, base):
        size, allocs = self.chunks[base]
        pos = base
        for a in sorted(allocs):
            if a>pos: yield (pos,a)
            pos=max(pos,a+allocs[a])
        if pos<base+size: yield (pos, base+size)
    def alloc(self, size):
        need = ru(size,512)
        align = PAGE if need>=PAGE else 512
        for base in reversed(list(self.chunks)):  # most recently created chunk first
            for g0,g1 in self.gaps(base):
                a=ru(g0,align)
                if a+need<=g1:
                    self.chunks[base][1][a]=need; return a
        csize=ru(need,CHUNK)
        for i in range(len(self.free)-1,-1,-1):
            b,e=self.free[i]
            if e-b >= csize + CHUNK - PAGE:
                A=rd(e-csize,CHUNK)
                if A>=b: break
        else: raise Exception('no va')
        del self.free[i]
        if A+csize<e: self.free.insert(i,(A+csize,e))
        if b<A: self.free.insert(i,(b,A))
        self.chunks[A]=[csize,{A:need}]
        return A
    def release(self, base):
        size,_=self.chunks.pop(base)
        self.free.append((base,base+size)); self.free.sort()
        m=[]
        for b,e in self.free:
            if m and m[-1][1]==b: m[-1]=(m[-1][0],e)
            else: m.append((b,e))
        self.free=m
    def free_alloc(self, addr):
        for base,(size,allocs) in self.chunks.items():
            if addr in allocs and not (base==self.H and addr==self.H):
                del allocs[addr]
                if not allocs: self.release(base)
                return
        raise Exception('unknown')
def run(ops):
    va=VA(); out=[]; allocs=[]
    for l in ops:
        p=l.split()
        if not p: continue
        if p[0]=='a':
            a=va.alloc(int(p[1])); allocs.append(a); out.append((int(p[1]),a))
        elif p[0]=='f': va.free_alloc(allocs[int(p[1])])
    return out
if __name__=='__main__':
    import glob,os
    for f in sorted(glob.glob('/work/main/.device-carry/addresses/ops/*.ops')):
        name=os.path.basename(f)[:-4]
        ops=open(f).read().splitlines()
        if any(l.startswith(('r','m')) for l in ops): continue
        pred=run(ops)
        meas=[(int(l.split()[2]),int(l.split()[3],16)) for l in open(f'/tmp/addr/dev1/res/probe/{name}.plain1.txt') if l.startswith('a ')]
        # align origin: H of the measurement unknown; use the offset that maximises matches
        from collections import Counter
        c=Counter(m[1]-p[1] for p,m in zip(pred,meas))
        off,n=c.most_common(1)[0]
        first_bad=next((i for i,(p,m) in enumerate(zip(pred,meas)) if m[1]-p[1]!=off),None)
        print(f'{name:70s} {n}/{len(meas)} first mismatch {first_bad}')
