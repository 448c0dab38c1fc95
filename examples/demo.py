"""make demo: train a small model on `neuron`, compare with the CPU, and show
what ran on the device, what fell back to the CPU, and the HBM in use."""
import copy
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron_sim

logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)  # the summary below lists fallbacks


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8 * 14 * 14)
        self.fc1 = nn.Linear(8 * 14 * 14, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.gelu(self.conv(x)), 2).flatten(1)
        return self.fc2(F.relu(self.fc1(self.norm(x))))


def batches(steps, batch=32):
    """A task a model can learn in a few steps: each of the 10 classes is a
    fixed random 28x28 pattern, and an image is its class's pattern under
    noise as strong as the pattern itself. The same seed on every call, so
    the CPU and the neuron run see the same batches."""
    g = torch.Generator().manual_seed(0)
    patterns = torch.randn(10, 1, 28, 28, generator=g)
    for _ in range(steps):
        y = torch.randint(0, 10, (batch,), generator=g)
        yield patterns[y] + torch.randn(batch, 1, 28, 28, generator=g), y


def train(model, device, steps=20):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for x, y in batches(steps):
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def main():
    torch.manual_seed(0)
    model = Net()
    cpu_losses, _ = train(copy.deepcopy(model), "cpu")
    torch_neuron_sim.clear_op_tracking()
    losses, trained = train(copy.deepcopy(model), "neuron")

    print(f"Trained a small CNN for {len(losses)} steps on {next(trained.parameters()).device} "
          f"({torch.neuron.device_count()} simulated {torch.neuron.get_device_properties(0).name} devices).")
    print("  loss by step: " + " ".join(f"{i + 1}:{loss:.3f}" for i, loss in enumerate(losses) if i % 4 == 0 or
                                        i == len(losses) - 1))
    print(f"  loss: first {losses[0]:.4f}, last {losses[-1]:.4f}; "
          f"largest difference from the CPU run: {max(abs(a - b) for a, b in zip(losses, cpu_losses)):.2e}")
    counts = torch_neuron_sim.get_op_counts()
    native = {n: c["executed"] for n, c in counts.items() if c["executed"]}
    fallback = {n: c["fallback"] for n, c in counts.items() if c["fallback"]}
    print(f"\nOps that ran natively on neuron ({len(native)}):")
    for name, n in sorted(native.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<45} {n:6d}")
    print(f"\nOps that fell back to the CPU ({len(fallback)}) - the migration inventory:")
    for name, n in sorted(fallback.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<45} {n:6d}")
    cap = torch.neuron.get_device_properties(0).total_memory
    print(f"\nHBM on neuron:0: {torch.neuron.memory_allocated() / 2**20:.2f} MiB in use, "
          f"peak {torch.neuron.max_memory_allocated() / 2**20:.2f} MiB, of {cap / 2**30:.0f} GiB")


if __name__ == "__main__":
    main()
