"""Real models trained on neuron give CPU's losses, and leave no memory behind."""
import copy
import gc

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron_sim


def mlp():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.fc = nn.Linear(16 * 3 * 3, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


def batches(shape, classes, steps):
    g = torch.Generator().manual_seed(1234)
    return [(torch.randn(*shape, generator=g), torch.randint(0, classes, (shape[0],), generator=g))
            for _ in range(steps)]


def train(model, data, device, make_opt):
    model = model.to(device)
    opt = make_opt(model.parameters())
    losses = []
    for x, y in data:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
}


@pytest.mark.parametrize("opt", OPTIMIZERS)
@pytest.mark.parametrize("arch,shape,classes", [(mlp, (16, 20), 5), (SmallCNN, (8, 1, 14, 14), 10)])
def test_training_matches_cpu(arch, shape, classes, opt):
    torch.manual_seed(0)
    model = arch()
    data = batches(shape, classes, 20)
    # An earlier test's reference cycle (an exception's traceback holding a frame with a
    # device tensor) frees its memory only when the cycle collector runs, as on CUDA:
    # collect it now so it is not freed mid-test and counted as this loop's.
    gc.collect()
    start = torch.neuron.memory_allocated()
    cpu_losses, cpu_model = train(copy.deepcopy(model), data, "cpu", OPTIMIZERS[opt])
    torch_neuron_sim.clear_op_tracking()
    neuron_losses, neuron_model = train(copy.deepcopy(model), data, "neuron", OPTIMIZERS[opt])
    torch.testing.assert_close(torch.tensor(neuron_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=0)
    for (name, p_cpu), p_neuron in zip(cpu_model.named_parameters(), neuron_model.parameters()):
        assert p_neuron.device.type == "neuron"
        torch.testing.assert_close(p_neuron.cpu(), p_cpu, rtol=1e-5, atol=1e-6, msg=name)
    ran = torch_neuron_sim.get_executed_ops()
    assert "aten::linear" in ran or "aten::convolution" in ran  # linear runs as one op, as on the device
    del neuron_model, p_neuron
    assert torch.neuron.memory_allocated() == start  # everything the loop allocated is back


def test_backward_runs_on_neuron():
    x = torch.randn(4, 3).to("neuron").requires_grad_()
    w = torch.randn(3, 2).to("neuron").requires_grad_()
    (x @ w).tanh().sum().backward()
    assert x.grad.device.type == "neuron" and w.grad.device.type == "neuron"
    xc, wc = x.detach().cpu().requires_grad_(), w.detach().cpu().requires_grad_()
    (xc @ wc).tanh().sum().backward()
    torch.testing.assert_close(x.grad.cpu(), xc.grad)
    torch.testing.assert_close(w.grad.cpu(), wc.grad)


def test_state_dict_round_trips_through_neuron_unchanged():
    torch.manual_seed(0)
    model = SmallCNN()
    model(torch.randn(2, 1, 14, 14))  # populate batch-norm running stats
    before = {k: v.clone() for k, v in model.state_dict().items()}
    on_device = copy.deepcopy(model).to("neuron")
    sd = on_device.state_dict()
    assert all(v.device.type == "neuron" for v in sd.values())
    restored = SmallCNN()
    restored.load_state_dict({k: v.cpu() for k, v in sd.items()})
    for k, v in restored.state_dict().items():
        assert v.dtype == before[k].dtype and torch.equal(v, before[k]), k
    # and loading a CPU state dict into a neuron model
    on_device.load_state_dict(before)
    for k, v in on_device.state_dict().items():
        assert v.device.type == "neuron" and torch.equal(v.cpu(), before[k]), k


def test_model_on_second_device():
    torch.manual_seed(0)
    model = mlp()
    data = batches((4, 20), 5, 3)
    cpu_losses, _ = train(copy.deepcopy(model), data, "cpu", OPTIMIZERS["sgd"])
    losses, m = train(copy.deepcopy(model), data, "neuron:1", OPTIMIZERS["sgd"])
    assert next(m.parameters()).device == torch.device("neuron:1")
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(cpu_losses), rtol=1e-5, atol=0)
