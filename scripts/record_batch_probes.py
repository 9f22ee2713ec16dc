"""Ground truth for `fraglab fit` (the batch what-if): probe snapshots of four programs at small batches, and
for each program a sweep of batches under one memory fraction that finds the largest batch that fits.
Run on a GPU machine (scripts/record_batch_probes.sh drives it):

  python3 record_batch_probes.py run PROGRAM BATCH OUTBASE [--fraction F] [--stacks]
      one run of PROGRAM at BATCH in this process, recording the allocator's history from before the first
      CUDA allocation (PYTORCH_CUDA_ALLOC_CONF from the environment); an OutOfMemoryError is caught at the
      top (fits = false). Writes OUTBASE.pickle.gz (pickle of torch.cuda.memory._snapshot(), as
      torch.cuda.memory._dump_snapshot writes it, gzipped) and OUTBASE.json (PyTorch's counters).
  python3 record_batch_probes.py notebook OUTDIR [F]
      a notebook cell that runs a forward at a batch too big for fraction F; the OOM is kept as IPython keeps
      it (sys.last_traceback holds the cell's frames and their tensors), then the snapshot is taken.
  python3 record_batch_probes.py drive OUTDIR
      probes (batches 2, 4, 6; default and expandable_segments:True; Python stacks), then per program a
      fraction F chosen from the probes' peaks and a sweep of batches around the limit it implies, one fresh
      process per (batch, conf), several at once, each capped by its own fraction; then the notebook cell.
      Writes OUTDIR/probes/, OUTDIR/sweep.jsonl, OUTDIR/sweep_keep/ (the snapshots at the largest batch that
      fits and the first that fails, per program and conf), OUTDIR/plan.json, OUTDIR/logs/.
      Environment: PROGRAMS (names, comma- or space-separated; default the four programs, not the held-out
      ones), PROBE_CONFS (default "default expandable"), NOTEBOOK=0 skips the notebook cell, DRIVE_SECONDS,
      SLOTS.

  python3 record_batch_probes.py sweep OUTDIR PROGRAM:FRACTION:LO-HI [...]
      only a sweep (no probes, no plan): batches LO..HI under FRACTION, each setting, one process each;
      appends to OUTDIR/sweep.jsonl, keeps the largest fit's and first failure's snapshots, summary_sweep.json.

Held-out programs (vit_train, llama_ckpt, t5_train: tests/data/fit/heldout/, recorded with
scripts/record_heldout.sh) run only when PROGRAMS names them.

Each program runs a fixed number of steps, deterministically: the shapes it allocates depend on the batch
only through the batch dimension (sequence lengths come from a seeded random.Random of their own).
"""
import gc, gzip, json, math, os, pickle, random, subprocess, sys, time
import torch

dev = torch.device("cuda")
STEPS_DONE = [0]


def _step():
    STEPS_DONE[0] += 1


def causal_lm(batch):
    # A GPT-2-small-like causal LM (6 layers), sequence 1024, bf16 autocast, AdamW, 3 training steps.
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(n_layer=6, n_head=12, n_embd=768, n_positions=1024)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(3):
        x = torch.randint(0, 50257, (batch, 1024), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        _step()


def vision(batch):
    # torchvision ResNet-50 (random init) training at 224x224, bf16 autocast, SGD with momentum, 3 steps.
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss
        _step()


VARLEN_SEQ = [384, 256, 512, 128]  # random.Random(7).choice([128, 256, 384, 512]) four times, as written out


def varlen(batch):
    # A BERT-like encoder (6 layers, BERT-base width) trained with masked-LM loss, bf16 autocast, AdamW; each
    # step's sequence length comes from a seeded RNG of its own, independent of the batch.
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(0)
    rng = random.Random(7)
    m = BertForMaskedLM(BertConfig(num_hidden_layers=6)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(4):
        seq = rng.choice([128, 256, 384, 512])
        x = torch.randint(0, 30522, (batch, seq), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        _step()


KV_PROMPT, KV_NEW = 2048, 48


def kv_server(batch):
    # Inference with a KV cache: a GPT-2-like decoder (8 layers, width 1024) in bf16 prefills a 2048-token
    # prompt at batch B and decodes 48 tokens greedily, one forward per token; transformers' DynamicCache
    # grows each layer's keys and values by torch.cat. Logits only for the last position (as generate does).
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(n_layer=8, n_head=16, n_embd=1024, n_positions=KV_PROMPT + KV_NEW))
    m = m.to(dev, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        prompt = torch.randint(0, 50257, (batch, KV_PROMPT), device=dev)
        out = m.transformer(input_ids=prompt, use_cache=True)
        cache = out.past_key_values
        nxt = m.lm_head(out.last_hidden_state[:, -1:]).argmax(-1)
        del out
        _step()
        tokens = [nxt]
        for t in range(KV_NEW - 1):
            out = m.transformer(input_ids=nxt, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            nxt = m.lm_head(out.last_hidden_state[:, -1:]).argmax(-1)
            tokens.append(nxt)
            del out
        _step()
        result = torch.cat(tokens, dim=1)
        del cache, tokens, prompt
        _step()
        return result.shape


def causal_lm_model():
    """causal_lm's model and optimizer (the same construction), and one training step of it at a batch:
    for scripts/hook_probe_check.py, which hands the step to fraglab_hook.probe."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(n_layer=6, n_head=12, n_embd=768, n_positions=1024)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

    def step(batch):
        x = torch.randint(0, 50257, (batch, 1024), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss

    return m, opt, step


# ---------------------------------------------------------------- held-out programs
# Recorded after `fraglab fit` was built and tuned on the four above (tests/data/fit/heldout/README.md).


def vit_train(batch):
    # torchvision ViT-B/16 (weights=None), 224x224, bf16 autocast, AdamW, 3 training steps.
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.vit_b_16(weights=None).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(3):
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss
        _step()


def llama_ckpt(batch):
    # A small LLaMA (transformers LlamaForCausalLM: 4 layers, hidden 1024, 16 heads, MLP 2816, vocab 32000),
    # sequence 1024, gradient checkpointing (model.gradient_checkpointing_enable(), the library's defaults),
    # bf16 autocast, AdamW, 3 training steps.
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024)
    m = LlamaForCausalLM(cfg).to(dev)
    m.gradient_checkpointing_enable()
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(3):
        x = torch.randint(0, 32000, (batch, 1024), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        _step()


def t5_train(batch):
    # transformers T5ForConditionalGeneration from a small T5Config (d_model 512, 6 encoder and 6 decoder
    # layers, 8 heads, d_ff 2048, vocab 32128), source 512 tokens, target 128, bf16 autocast, AdamW, 3 steps.
    from transformers import T5Config, T5ForConditionalGeneration
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6,
                   num_heads=8, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    m = T5ForConditionalGeneration(cfg).to(dev)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(3):
        src = torch.randint(2, 32128, (batch, 512), device=dev)
        tgt = torch.randint(2, 32128, (batch, 128), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=src, labels=tgt).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del src, tgt, loss
        _step()


PROGRAMS = {f.__name__: f for f in [causal_lm, vision, varlen, kv_server]}
DRIVE_DEFAULT = list(PROGRAMS)  # what `drive` runs when PROGRAMS is not set: the four programs
HELDOUT = {f.__name__: f for f in [vit_train, llama_ckpt, t5_train]}
PROGRAMS.update(HELDOUT)
# The batch each program's fraction is chosen for (the limit the sweep then brackets).
TARGETS = {"causal_lm": 10, "vision": 32, "varlen": 20, "kv_server": 36,
           "vit_train": 48, "llama_ckpt": 12, "t5_train": 20}
PROBE_BATCHES = [2, 4, 6]
CONFS = {"default": "", "expandable": "expandable_segments:True"}

STAT_KEYS = ["reserved_bytes.all.peak", "allocated_bytes.all.peak", "reserved_bytes.all.current",
             "allocated_bytes.all.current", "num_alloc_retries", "num_ooms", "segment.all.peak",
             "num_device_alloc", "num_device_free", "inactive_split_bytes.all.peak", "requested_bytes.all.peak"]


def stats():
    st = torch.cuda.memory_stats()
    return {k: st.get(k) for k in STAT_KEYS}


def dump(snap, path):
    with gzip.open(path, "wb", compresslevel=9) as f:
        pickle.dump(snap, f)


def conf_tag():
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") or os.environ.get("PYTORCH_ALLOC_CONF", "")
    return conf or "default"


def cmd_run(argv):
    program, batch, base = argv[0], int(argv[1]), argv[2]
    fraction = float(argv[argv.index("--fraction") + 1]) if "--fraction" in argv else 0.0
    stacks = "--stacks" in argv
    torch.backends.cudnn.benchmark = False
    torch.cuda.init()
    if fraction:
        torch.cuda.set_per_process_memory_fraction(fraction)
    if stacks:
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python")
    else:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="all")
    t0 = time.time()
    fits, error = True, None
    try:
        PROGRAMS[program](batch)
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as e:
        fits, error = False, str(e).split("\n")[0][:400]
    except RuntimeError as e:  # not an OutOfMemoryError (a library's own allocation failing, say): named apart
        fits, error = False, "RuntimeError: " + str(e).split("\n")[0][:400]
    gc.collect()
    torch.cuda.synchronize()
    wall = time.time() - t0
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    dump(snap, base + ".pickle.gz")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    st = torch.cuda.memory_stats()
    trace = [e for t in snap["device_traces"] for e in t]
    info = {"program": program, "conf": conf_tag(), "batch": batch, "fraction": fraction or None,
            "total_memory": props.total_memory,
            "capacity_bytes": int(fraction * props.total_memory) if fraction else None,
            "fits": fits, "reserved_peak": st.get("reserved_bytes.all.peak"),
            "allocated_peak": st.get("allocated_bytes.all.peak"), "num_ooms": st.get("num_ooms", 0),
            "num_alloc_retries": st.get("num_alloc_retries", 0), "steps_done": STEPS_DONE[0],
            "error": error, "trace_entries": len(trace),
            "trace_ooms": sum(1 for e in trace if e.get("action") == "oom"), "stacks": stacks,
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "wall_s": round(wall, 2),
            "stats": stats(), "file": os.path.basename(base) + ".pickle.gz"}
    json.dump(info, open(base + ".json", "w"), indent=1)
    print(json.dumps({k: info[k] for k in ("program", "conf", "batch", "fits", "reserved_peak", "num_ooms")}))


# A notebook cell, compiled under an ipykernel-like file name so the snapshot's Python stacks read as a
# notebook's do. The line `y = model(x)` allocates most of what is live at the OOM (the two 16384-wide
# activations, held by the frames of the kept traceback and by autograd).
CELL = '''\
import torch
model = torch.nn.Sequential(torch.nn.Linear(4096, 16384), torch.nn.GELU(),
                            torch.nn.Linear(16384, 16384), torch.nn.GELU(),
                            torch.nn.Linear(16384, 4096)).cuda()
x = torch.randn(BATCH, 4096, device="cuda")
y = model(x)
loss = y.float().pow(2).mean()
'''


def cmd_notebook(argv):
    outdir = argv[0]
    fraction = float(argv[1]) if len(argv) > 1 else 0.05
    batch = 32768
    torch.cuda.init()
    torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python")
    ns = {"BATCH": batch, "__name__": "__main__"}
    code = compile(CELL, "/tmp/ipykernel_4242/2817461930.py", "exec")
    error = None
    try:
        exec(code, ns)
    except torch.cuda.OutOfMemoryError as e:
        # What IPython does with an uncaught error in a cell: kept, with the cell's frames and their tensors.
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__
        sys.last_exc = e
        error = str(e).split("\n")[0][:400]
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    base = os.path.join(outdir, f"notebook_oom.default_cap{fraction:g}.stacks")
    dump(snap, base + ".pickle.gz")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    trace = [e for t in snap["device_traces"] for e in t]
    info = {"program": "notebook_oom", "conf": conf_tag(), "batch": batch, "fraction": fraction,
            "total_memory": props.total_memory, "capacity_bytes": int(fraction * props.total_memory),
            "error": error, "cell_file": "/tmp/ipykernel_4242/2817461930.py", "cell": CELL,
            "trace_entries": len(trace), "trace_ooms": sum(1 for e in trace if e.get("action") == "oom"),
            "live_at_snapshot": torch.cuda.memory_allocated(), "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(), "stats": stats(), "file": os.path.basename(base) + ".pickle.gz"}
    json.dump(info, open(base + ".json", "w"), indent=1)
    print(json.dumps({k: info[k] for k in ("error", "live_at_snapshot", "capacity_bytes")}))


# ---------------------------------------------------------------- the driver


class Pool:
    """Runs `run` subprocesses, several at once: at most `slots`, and the sum of their memory estimates
    (the fraction's bytes, or a probe's guess, plus a CUDA context each) under `budget` bytes."""

    def __init__(self, outdir, slots, budget, deadline):
        self.outdir, self.slots, self.budget, self.deadline = outdir, slots, budget, deadline
        self.queue, self.running, self.done = [], [], []

    def add(self, job):
        self.queue.append(job)

    def _start(self, job):
        env = dict(os.environ)
        env.pop("PYTORCH_ALLOC_CONF", None)
        if CONFS[job["conf"]]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = CONFS[job["conf"]]
        else:
            env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        args = [sys.executable, os.path.abspath(__file__), "run", job["program"], str(job["batch"]), job["base"]]
        if job.get("fraction"):
            args += ["--fraction", repr(job["fraction"])]
        if job.get("stacks"):
            args.append("--stacks")
        log = open(os.path.join(self.outdir, "logs", os.path.basename(job["base"]) + ".log"), "w")
        job["proc"] = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        job["log"], job["t0"] = log, time.time()
        self.running.append(job)

    def poll(self):
        """Starts what fits, reaps what ended; returns the jobs that ended."""
        ended = []
        for job in list(self.running):
            rc = job["proc"].poll()
            if rc is None and time.time() > self.deadline:
                job["proc"].kill()
                rc = job["proc"].wait()
                job["killed"] = True
            if rc is not None:
                job["rc"], job["wall"] = rc, time.time() - job["t0"]
                job["log"].close()
                self.running.remove(job)
                try:
                    job["result"] = json.load(open(job["base"] + ".json"))
                except (OSError, ValueError):
                    job["result"] = None
                ended.append(job)
                self.done.append(job)
        if time.time() < self.deadline - 45:
            for job in list(self.queue):
                if len(self.running) >= self.slots:
                    break
                used = sum(j["mem"] for j in self.running)
                if used + job["mem"] <= self.budget or not self.running:
                    self.queue.remove(job)
                    self._start(job)
        return ended

    def busy(self):
        return bool(self.running or (self.queue and time.time() < self.deadline - 45))


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def fit_line(points):
    """Least squares y = a + b x over (x, y) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


def cmd_drive(argv):
    outdir = argv[0]
    budget_s = float(os.environ.get("DRIVE_SECONDS", "430"))
    programs = os.environ.get("PROGRAMS", " ".join(DRIVE_DEFAULT)).replace(",", " ").split()
    unknown = [p for p in programs if p not in PROGRAMS]
    if unknown:
        raise SystemExit(f"unknown programs {unknown}: pick from {list(PROGRAMS)}")
    probe_confs = os.environ.get("PROBE_CONFS", " ".join(CONFS)).replace(",", " ").split()
    t_start = time.time()
    for d in ("probes", "sweep_all", "sweep_keep", "logs"):
        os.makedirs(os.path.join(outdir, d), exist_ok=True)
    total = torch.cuda.get_device_properties(0).total_memory  # this process makes a CUDA context too
    gib = 2**30
    ctx = int(1.5 * gib)  # a process's CUDA context and libraries, outside the fraction
    pool = Pool(outdir, slots=int(os.environ.get("SLOTS", "14")), budget=int(0.85 * total),
                deadline=t_start + budget_s)
    import torchvision, transformers
    log(f"total_memory={total} gpu={torch.cuda.get_device_name()} torch={torch.__version__} "
        f"transformers={transformers.__version__} torchvision={torchvision.__version__} programs={programs}")

    # 1. probes: no fraction, Python stacks
    for b in PROBE_BATCHES:
        for p in programs:
            for conf in probe_confs:
                pool.add({"kind": "probe", "program": p, "batch": b, "conf": conf, "stacks": True,
                          "base": os.path.join(outdir, "probes", f"{p}.b{b}.{conf}"),
                          "mem": ctx + int((2 + 1.2 * b) * gib)})
    while pool.busy():
        for j in pool.poll():
            r = j["result"] or {}
            log(f"probe {j['program']} b{j['batch']} {j['conf']} rc={j['rc']} {j['wall']:.0f}s "
                f"reserved={r.get('reserved_peak')} allocated={r.get('allocated_peak')} fits={r.get('fits')}")
        time.sleep(0.3)
    probes = {}
    for j in pool.done:
        if j["result"] and j["result"]["fits"]:
            probes.setdefault((j["program"], j["conf"]), {})[j["batch"]] = j["result"]
    log(f"probes done at {time.time() - t_start:.0f}s")

    # 2. the fraction per program and the batches to sweep, from the probes' peaks
    plan = {}
    for p in programs:
        d = probes.get((p, "default"), {})
        if len(d) < 2:
            log(f"no plan for {p}: probes {sorted(d)}")
            continue
        a_r, b_r = fit_line([(b, r["reserved_peak"]) for b, r in d.items()])
        if b_r <= 0:
            b_r = max(r["reserved_peak"] for r in d.values()) / max(d)
        cap = a_r + b_r * (TARGETS[p] + 0.5)
        fraction = math.ceil(cap / total * 1e4) / 1e4
        cap = int(fraction * total)
        entry = {"fraction": fraction, "capacity_bytes": cap, "target": TARGETS[p], "confs": {}}
        for conf in CONFS:
            pc = probes.get((p, conf), d)
            guesses = []
            for key in ("reserved_peak", "allocated_peak"):
                a, b = fit_line([(bb, r[key]) for bb, r in pc.items()])
                if b > 0:
                    guesses.append((cap - a) / b)
            lo = max(1, int(math.floor(min(guesses))) - 4)
            hi = int(math.ceil(max(guesses))) + 4
            if hi - lo > 17:  # wide: keep around the reserved-peak guess and let the extension find the rest
                mid = int(round(guesses[0]))
                lo, hi = max(1, mid - 8), mid + 9
            hi = max(hi, lo + 9)
            entry["confs"][conf] = {"guesses": [round(g, 2) for g in guesses], "batches": list(range(lo, hi + 1))}
        plan[p] = entry
        log(f"plan {p}: {json.dumps(entry)}")
    json.dump({"total_memory": total, "plan": plan}, open(os.path.join(outdir, "plan.json"), "w"), indent=1)

    # 3. the sweep, round robin over (program, conf), extended until each brackets its limit
    def job(p, conf, b):
        f = plan[p]["fraction"]
        return {"kind": "sweep", "program": p, "batch": b, "conf": conf, "fraction": f,
                "base": os.path.join(outdir, "sweep_all", f"{p}.b{b}.{conf}_cap{f:g}"),
                "mem": plan[p]["capacity_bytes"] + ctx}

    lists = [[job(p, c, b) for b in plan[p]["confs"][c]["batches"]] for p in plan for c in CONFS]
    for i in range(max(map(len, lists), default=0)):
        for lst in lists:
            if i < len(lst):
                pool.add(lst[i])
    tested = {(p, c): {} for p in plan for c in CONFS}
    queued = {(p, c): set(plan[p]["confs"][c]["batches"]) for p in plan for c in CONFS}
    rounds = {k: 0 for k in tested}
    results = open(os.path.join(outdir, "sweep.jsonl"), "w")
    keys = ["program", "conf", "batch", "fraction", "total_memory", "capacity_bytes", "fits", "reserved_peak",
            "allocated_peak", "num_ooms", "num_alloc_retries", "steps_done", "trace_entries", "trace_ooms",
            "error", "wall_s"]
    while pool.busy():
        for j in pool.poll():
            r = j["result"]
            k = (j["program"], j["conf"])
            if r is None:
                log(f"sweep {k} b{j['batch']} FAILED rc={j['rc']} killed={j.get('killed', False)}")
                tested[k][j["batch"]] = None
                continue
            results.write(json.dumps({kk: r.get(kk) for kk in keys}) + "\n")
            results.flush()
            tested[k][j["batch"]] = r["fits"]
            log(f"sweep {k} b{j['batch']} fits={r['fits']} reserved={r['reserved_peak']} "
                f"ooms={r['num_ooms']} retries={r['num_alloc_retries']} {j['wall']:.0f}s")
        for k, t in tested.items():  # extend a (program, conf) whose runs ended without bracketing its limit
            if any(j["program"] == k[0] and j["conf"] == k[1] for j in pool.running + pool.queue):
                continue
            if rounds[k] >= 3 or time.time() > pool.deadline - 90:
                continue
            fits = sorted(b for b, v in t.items() if v)
            fails = sorted(b for b, v in t.items() if v is False)
            more = []
            if not fits:
                lo = min(queued[k])
                more = list(range(max(1, lo - 6), lo))
            else:
                m = fits[-1]
                above = [b for b in fails if b > m]
                if len(above) < 2 or m + 1 not in t:
                    more = [b for b in range(m + 1, m + 5) if b not in queued[k]]
            if more:
                rounds[k] += 1
                queued[k].update(more)
                log(f"extend {k}: {more}")
                for b in more:
                    pool.add(job(k[0], k[1], b))
        time.sleep(0.3)
    results.close()

    # 4. keep the snapshots at the largest batch that fits and the first that fails
    summary = {}
    for (p, c), t in tested.items():
        fits = sorted(b for b, v in t.items() if v)
        fails = sorted(b for b, v in t.items() if v is False)
        m = fits[-1] if fits else None
        first_fail = min((b for b in fails if m is None or b > m), default=None)
        nonmono = [b for b in fails if m is not None and b < m]
        summary[f"{p}.{c}"] = {"largest_fit": m, "first_fail": first_fail, "fails_below_largest_fit": nonmono,
                               "tested": sorted(t)}
        for b in (m, first_fail):
            if b is None:
                continue
            src = os.path.join(outdir, "sweep_all", f"{p}.b{b}.{c}_cap{plan[p]['fraction']:g}")
            for ext in (".pickle.gz", ".json"):
                if os.path.exists(src + ext):
                    os.replace(src + ext, os.path.join(outdir, "sweep_keep", os.path.basename(src) + ext))
    json.dump(summary, open(os.path.join(outdir, "summary.json"), "w"), indent=1)
    log("summary " + json.dumps(summary))

    # 5. the notebook cell
    if os.environ.get("NOTEBOOK", "1") != "0" and time.time() < pool.deadline - 20:
        nb = os.path.join(outdir, "notebook")
        os.makedirs(nb, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")}
        with open(os.path.join(outdir, "logs", "notebook.log"), "w") as nblog:
            try:
                rc = subprocess.call([sys.executable, os.path.abspath(__file__), "notebook", nb, "0.05"], env=env,
                                     timeout=max(10, pool.deadline + 30 - time.time()), stdout=nblog,
                                     stderr=subprocess.STDOUT)
            except subprocess.TimeoutExpired:
                rc = "timeout"
        log(f"notebook rc={rc}")
    log(f"drive done at {time.time() - t_start:.0f}s")


def cmd_sweep(argv):
    """A sweep at given fractions and batches, no probes: `sweep OUTDIR PROGRAM:FRACTION:LO-HI ...`, each
    batch from LO to HI under each setting of CONFS, one fresh process per (batch, setting) as the drive's
    sweep runs them. Appends to OUTDIR/sweep.jsonl (the drive's fields), keeps the snapshots at the largest
    batch that fits and the first that fails in OUTDIR/sweep_keep/, writes OUTDIR/summary_sweep.json."""
    outdir, specs = argv[0], argv[1:]
    budget_s = float(os.environ.get("DRIVE_SECONDS", "300"))
    t_start = time.time()
    for d in ("sweep_all", "sweep_keep", "logs"):
        os.makedirs(os.path.join(outdir, d), exist_ok=True)
    total = torch.cuda.get_device_properties(0).total_memory
    ctx = int(1.5 * 2**30)
    pool = Pool(outdir, slots=int(os.environ.get("SLOTS", "14")), budget=int(0.85 * total),
                deadline=t_start + budget_s)
    runs = []
    for spec in specs:
        program, fraction, span = spec.split(":")
        fraction, (lo, hi) = float(fraction), map(int, span.split("-"))
        for conf in CONFS:
            runs.append((program, fraction, conf, list(range(lo, hi + 1))))
    log(f"sweep total_memory={total} gpu={torch.cuda.get_device_name()} torch={torch.__version__} {specs}")
    for i in range(max(len(r[3]) for r in runs)):  # round robin, as the drive does
        for program, fraction, conf, batches in runs:
            if i < len(batches):
                b = batches[i]
                pool.add({"kind": "sweep", "program": program, "batch": b, "conf": conf, "fraction": fraction,
                          "base": os.path.join(outdir, "sweep_all", f"{program}.b{b}.{conf}_cap{fraction:g}"),
                          "mem": int(fraction * total) + ctx})
    keys = ["program", "conf", "batch", "fraction", "total_memory", "capacity_bytes", "fits", "reserved_peak",
            "allocated_peak", "num_ooms", "num_alloc_retries", "steps_done", "trace_entries", "trace_ooms",
            "error", "wall_s"]
    tested = {(p, f, c): {} for p, f, c, _ in runs}
    with open(os.path.join(outdir, "sweep.jsonl"), "a") as results:
        while pool.busy():
            for j in pool.poll():
                r, k = j["result"], (j["program"], j["fraction"], j["conf"])
                if r is None:
                    log(f"sweep {k} b{j['batch']} FAILED rc={j['rc']} killed={j.get('killed', False)}")
                    tested[k][j["batch"]] = None
                    continue
                results.write(json.dumps({kk: r.get(kk) for kk in keys}) + "\n")
                results.flush()
                tested[k][j["batch"]] = r["fits"]
                log(f"sweep {k} b{j['batch']} fits={r['fits']} reserved={r['reserved_peak']} "
                    f"ooms={r['num_ooms']} retries={r['num_alloc_retries']} {j['wall']:.0f}s")
            time.sleep(0.3)
    summary = {}
    for (p, f, c), t in tested.items():
        fits = sorted(b for b, v in t.items() if v)
        fails = sorted(b for b, v in t.items() if v is False)
        m = fits[-1] if fits else None
        first_fail = min((b for b in fails if m is None or b > m), default=None)
        summary[f"{p}.{c}_cap{f:g}"] = {"fraction": f, "capacity_bytes": int(f * total), "largest_fit": m,
                                        "first_fail": first_fail,
                                        "fails_below_largest_fit": [b for b in fails if m is not None and b < m],
                                        "tested": sorted(t)}
        for b in (m, first_fail):
            if b is None:
                continue
            src = os.path.join(outdir, "sweep_all", f"{p}.b{b}.{c}_cap{f:g}")
            for ext in (".pickle.gz", ".json"):
                if os.path.exists(src + ext):
                    os.replace(src + ext, os.path.join(outdir, "sweep_keep", os.path.basename(src) + ext))
    json.dump(summary, open(os.path.join(outdir, "summary_sweep.json"), "w"), indent=1)
    log("summary " + json.dumps(summary))
    log(f"sweep done at {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    {"run": cmd_run, "notebook": cmd_notebook, "drive": cmd_drive, "sweep": cmd_sweep}[sys.argv[1]](sys.argv[2:])
