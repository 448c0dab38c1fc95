"""Run by `accelerate launch --num_processes 2`: an unmodified accelerate
training loop. Each rank prints what accelerate chose and, at the end, a
checksum of its weights (DDP keeps the ranks' replicas identical)."""
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed


def build(batch_size: int = 8) -> tuple:
    """The model, its data loader and optimizer, the same in every process."""
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 8, generator=g), torch.randint(0, 2, (64,), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
    return model, loader, torch.optim.SGD(model.parameters(), lr=0.1)


def main() -> None:
    accelerator = Accelerator()
    model, loader, optimizer = build()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    print(f"rank {accelerator.process_index} of {accelerator.num_processes} {accelerator.distributed_type} "
          f"{accelerator.device} {type(model).__name__} {torch.distributed.get_backend()}", flush=True)
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    total = accelerator.reduce(loss.detach(), reduction="mean")
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"rank {accelerator.process_index} done loss {total.item():.6f} checksum {checksum:.10f}", flush=True)
    accelerator.end_training()


if __name__ == "__main__":
    main()
