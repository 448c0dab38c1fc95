"""Profile one training step on `neuron` and estimate it on trn2 and trn3
(docs/profiling.md, "Reading a trace"). Writes step_trace.json for Perfetto."""
import logging

import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim

logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to("neuron")
model = model.to(torch.bfloat16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(512, 1024, dtype=torch.bfloat16)
y = torch.randn(512, 1024, dtype=torch.bfloat16)


def step():
    xd, yd = x.to("neuron"), y.to("neuron")           # host -> device copies
    loss = torch.nn.functional.mse_loss(model(xd), yd)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()                                 # device -> host


step()                                                 # compile every op signature once
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
    step()
print(p.key_averages().table(sort_by="self_device_time_total", row_limit=8, max_name_column_width=28))
p.export_chrome_trace("step_trace.json")

for chip in ("trn2", "trn3"):
    print(torch_neuron_sim.estimate(step, profile=chip).table(row_limit=6))
    print()
