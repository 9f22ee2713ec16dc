# A PyTorch script for checking libfraglab_record.so: a small MLP trained for a few
# steps. Run it with the recorder preloaded:
#   FRAGLAB_RECORD_OUT=torch.jsonl LD_PRELOAD=libfraglab_record.so python3 torch_example.py
# The recorder sees PyTorch's *segment-level* calls (its caching allocator's cudaMalloc /
# cudaFree), not each tensor; the script prints the allocator's own counters to compare.
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(4096, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 4096)
).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randn(256 * (step + 1), 4096, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
torch.cuda.empty_cache()
s = torch.cuda.memory_stats()
print("torch_example: num_device_alloc", s["num_device_alloc"], "num_device_free", s["num_device_free"],
      "reserved_bytes.all.peak", s["reserved_bytes.all.peak"])
