# Workloads fraglab's model has not seen, recorded for the fidelity and plain-replay check (issue 39).
# usage: python3 unseen.py WORKLOAD OUTDIR TAG   (PYTORCH_CUDA_ALLOC_CONF / FRACTION from the environment)
import gzip, json, os, pickle, random, sys, time
import torch

dev = torch.device("cuda")


def gpt2_with_adamw(seed, layers, width, heads, positions):
    # A GPT-2-architecture causal LM (transformers) on the GPU and its AdamW, built after seeding.
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=positions, vocab_size=32000)
    m = GPT2LMHeadModel(cfg).to(dev)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-4)


def lm_bf16_varlen(steps=40):
    # A causal LM (transformers GPT-2 architecture, 8 layers, 1024 wide) trained in bf16 autocast with AdamW
    # on batches of varying sequence length (Lightning-style: the token budget fixed, the shape not),
    # gradient clipping, a validation pass every 10 steps under no_grad.
    m, opt = gpt2_with_adamw(0, 8, 1024, 16, 2048)
    rng = random.Random(3)
    for s in range(steps):
        seq = rng.choice([96, 200, 384, 512, 700, 1024, 1500, 2048])
        bs = max(1, 24576 // seq)
        x = torch.randint(0, 32000, (bs, seq), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        if s % 10 == 9:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                v = torch.randint(0, 32000, (4, rng.choice([256, 1024])), device=dev)
                m(v).logits.float().mean().item()
                del v


def serve_with_cat_caches(requests, layers, heads, dim, seed, batches, prompts, new_tokens):
    # A decoder serving requests of varying batch and prompt length, its KV caches grown one token at a
    # time with torch.cat (as HF's legacy tuple caches do), bf16, no_grad.
    torch.manual_seed(0)
    proj = [torch.nn.Linear(heads * dim, 3 * heads * dim, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
    rng = random.Random(seed)
    with torch.no_grad():
        for r in range(requests):
            bs, prompt, new = rng.choice(batches), rng.choice(prompts), rng.choice(new_tokens)
            h = torch.randn(bs, prompt, heads * dim, device=dev, dtype=torch.bfloat16)
            cache = []
            for l in range(layers):
                q, k, v = proj[l](h).chunk(3, dim=-1)
                cache.append((k.contiguous(), v.contiguous()))
                h = torch.nn.functional.scaled_dot_product_attention(
                    q.view(bs, -1, heads, dim).transpose(1, 2), k.view(bs, -1, heads, dim).transpose(1, 2),
                    v.view(bs, -1, heads, dim).transpose(1, 2), is_causal=True).transpose(1, 2).reshape(bs, -1, heads * dim)
            tok = h[:, -1:, :]
            for t in range(new):
                x = tok
                for l in range(layers):
                    q, k, v = proj[l](x).chunk(3, dim=-1)
                    pk, pv = cache[l]
                    cache[l] = (torch.cat([pk, k], dim=1), torch.cat([pv, v], dim=1))
                    K, V = cache[l]
                    x = torch.nn.functional.scaled_dot_product_attention(
                        q.view(bs, 1, heads, dim).transpose(1, 2), K.view(bs, -1, heads, dim).transpose(1, 2),
                        V.view(bs, -1, heads, dim).transpose(1, 2)).transpose(1, 2).reshape(bs, 1, heads * dim)
                tok = x
            del cache, h, tok, x


def kv_cat_server(requests=24):
    # 12 layers, 1024 wide.
    serve_with_cat_caches(requests, 12, 16, 64, 21, [1, 4, 8, 16], [64, 300, 1000, 2000], [16, 64, 128])


def kv_cat_server_wide(requests=14):
    # 12 layers, 4096 wide: a cache tensor passes 128 MiB, so under max_split_size_mb:128 each step's larger
    # tensor needs a segment of its own while the previous step's oversize blocks stay cached until the limit
    # releases them (cudaFree after cudaFree: the driver's placement of the next segments decides which blocks
    # tie by size).
    serve_with_cat_caches(requests, 12, 32, 128, 77, [4, 8, 16], [500, 1500, 3000], [24, 48, 96])


def compiled_mlp(steps=6):
    # torch.compile'd MLP training: entries carry compile_context (recorded with compile_context=True).
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    cm = torch.compile(m)
    for s in range(steps):
        x = torch.randn(256 * (1 + s % 3), 1024, device=dev)
        cm(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def lightning_like(steps=36):
    # A Lightning-style loop (the hooks Lightning runs, without the package): bf16 autocast LM, gradient
    # accumulation over 2 micro-batches of varying length, pinned host batches copied non_blocking, a
    # validation loop every 12 steps bracketed by torch.cuda.empty_cache() (as Lightning's memory
    # utilities call it), a state_dict copied to the host as a checkpoint after each validation.
    m, opt = gpt2_with_adamw(1, 6, 768, 12, 1024)
    rng = random.Random(5)
    for s in range(steps):
        for micro in range(2):
            seq = rng.choice([128, 256, 333, 512, 800, 1024])
            bs = max(1, 12288 // seq)
            host = torch.randint(0, 32000, (bs, seq)).pin_memory()
            x = host.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(x, labels=x).loss / 2
            loss.backward()
            del x, loss, host
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if s % 12 == 11:
            torch.cuda.empty_cache()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for _ in range(3):
                    v = torch.randint(0, 32000, (8, rng.choice([256, 700])), device=dev)
                    m(v, labels=v).loss.item()
                    del v
            torch.cuda.empty_cache()
            _ = {k: t.detach().to("cpu") for k, t in m.state_dict().items()}


def hf_generate(requests=10):
    # transformers' generate() on a GPT-2-architecture model: its DynamicCache grows every layer's keys and
    # values with torch.cat each token, for requests of varying batch and prompt length, fp16.
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(2)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=2048, vocab_size=32000)
    m = GPT2LMHeadModel(cfg).to(dev, torch.float16).eval()
    rng = random.Random(8)
    with torch.no_grad():
        for r in range(requests):
            bs, prompt = rng.choice([1, 4, 8, 16]), rng.choice([32, 200, 600, 1200])
            x = torch.randint(0, 32000, (bs, prompt), device=dev)
            m.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=rng.choice([24, 64, 120]), do_sample=False,
                       pad_token_id=0)
            del x


def resnet_varsize(steps=24):
    # torchvision ResNet-50 trained with AMP (fp16, GradScaler) on images of varying resolution and batch.
    import torchvision
    torch.manual_seed(3)
    m = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    rng = random.Random(13)
    for s in range(steps):
        side, bs = rng.choice([160, 224, 288, 352]), rng.choice([16, 32, 48])
        x = torch.randn(bs, 3, side, side, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (bs,), device=dev)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        del x, y, loss


def dump_recording(out, workload, tag, fraction, err, t0, **extra):
    # The snapshot as _dump_snapshot writes it (gzip'd) and a stats.jsonl line: PyTorch's counters, the GPU.
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats()
    path = os.path.join(out, f"{workload}.{tag}.pickle.gz")
    with gzip.open(path, "wb") as f:
        pickle.dump(snap, f)
    keys = ["reserved_bytes.all.peak", "allocated_bytes.all.peak", "reserved_bytes.all.current",
            "allocated_bytes.all.current", "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
            "active_bytes.all.peak", "requested_bytes.all.peak"]
    line = {"workload": workload, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"),
            "memory_fraction": fraction or None, "total_memory": torch.cuda.get_device_properties(0).total_memory,
            "torch": torch.__version__, **extra, "gpu": torch.cuda.get_device_name(0),
            "trace_entries": sum(len(t) for t in snap["device_traces"]), "error": err,
            "wall_s": round(time.time() - t0, 2), "stats": {k: stats.get(k) for k in keys},
            "file": os.path.basename(path)}
    with open(os.path.join(out, "stats.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps(line)[:400])


def main():
    name, out, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    fraction = float(os.environ.get("FRACTION", "0") or 0)
    torch.cuda.init()
    if fraction:
        torch.cuda.set_per_process_memory_fraction(fraction)
    kwargs = dict(max_entries=10_000_000)
    if name == "compiled_mlp":
        kwargs["compile_context"] = True
    try:
        torch.cuda.memory._record_memory_history(**kwargs)
    except TypeError as e:
        print("record:", e)
        kwargs.pop("compile_context", None)
        torch.cuda.memory._record_memory_history(**kwargs)
    t0 = time.time()
    err = None
    try:
        globals()[name]()
    except torch.cuda.OutOfMemoryError as e:
        err = "oom"
    dump_recording(out, name, tag, fraction, err, t0)


if __name__ == "__main__":
    main()
