"""Memory formats as in the release build: channels_last clones run on the device,
contiguous()/to() into channels_last fall back to the CPU (refused when fallback is
disabled), a channels_last ResNet trains as on the CPU, and OpInfo's channels_last
samples match the CPU."""
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuron_sim.testing import track_neuron_ops
from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


CL, CL3 = torch.channels_last, torch.channels_last_3d


def test_channels_last_clone_runs_on_the_device():
    x = torch.randn(2, 3, 4, 5)
    v = torch.randn(2, 3, 4, 5, 6)
    xd, vd = x.to(D), v.to(D)
    with track_neuron_ops() as ops:
        y = xd.clone(memory_format=CL)
        w = vd.clone(memory_format=CL3)
    assert y.device.type == "neuron" and y.is_contiguous(memory_format=CL) and not y.is_contiguous()
    assert w.is_contiguous(memory_format=CL3)
    assert torch.equal(y.cpu(), x) and torch.equal(w.cpu(), v)
    assert "aten::clone" in ops.executed and ops.fallback == []


def test_contiguous_accepts_preserve_format():
    x = torch.arange(12.0).reshape(3, 4)
    y = x.to(D).t().contiguous(memory_format=torch.preserve_format)  # the CPU refuses preserve_format
    assert y.is_contiguous() and torch.equal(y.cpu(), x.t())


def test_channels_last_contiguous_and_to_fall_back_to_the_cpu():
    x = torch.randn(2, 3, 4, 5)
    xd = x.to(D)
    with track_neuron_ops() as ops:
        a = xd.contiguous(memory_format=CL)
        b = xd.to(memory_format=CL)
        c = torch.randn(2, 3, 2, 2, 2).to(D).contiguous(memory_format=CL3)
    for t in (a, b):
        assert t.device.type == "neuron" and t.is_contiguous(memory_format=CL) and torch.equal(t.cpu(), x)
    assert c.device.type == "neuron" and c.is_contiguous(memory_format=CL3)
    assert {"aten::contiguous", "aten::_to_copy"} <= set(ops.fallback)
    assert "aten::clone" not in ops.executed  # the device's contiguous, not PyTorch's decomposition
    g = xd.clone().requires_grad_()
    (g.contiguous(memory_format=CL) * torch.arange(5.0, device=D)).sum().backward()
    assert torch.equal(g.grad.cpu(), torch.arange(5.0).expand(2, 3, 4, 5))
    assert xd.to(memory_format=CL).to("cpu").is_contiguous(memory_format=CL)


def test_channels_last_refused_only_when_fallback_is_disabled():
    xd = torch.randn(2, 3, 4, 5, device=D)
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        for convert in (lambda: xd.contiguous(memory_format=CL), lambda: xd.to(memory_format=CL)):
            with pytest.raises(RuntimeError, match="^CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_"
                                                   "UNIMPLEMENTED_OPS=1.*Neuron tensors only support contiguous or "
                                                   "preserve memory format"):
                convert()
        assert xd.clone(memory_format=CL).is_contiguous(memory_format=CL)  # clone is implemented
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    assert xd.contiguous(memory_format=CL).is_contiguous(memory_format=CL)


class _Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


def _resnet():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               _Block(8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))


def test_a_channels_last_resnet_trains_as_on_the_cpu_and_the_report_shows_the_fallbacks():
    torch.manual_seed(0)
    cpu = _resnet()
    dev = _resnet()
    dev.load_state_dict(cpu.state_dict())
    x, target = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
    cpu = cpu.to(memory_format=CL)
    with torch_neuron_sim.report() as r:
        dev = dev.to(D).to(memory_format=CL)
        opt = torch.optim.SGD(dev.parameters(), lr=0.1)
        xd, td = x.to(D).contiguous(memory_format=CL), target.to(D)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(dev(xd), td)
            loss.backward()
            opt.step()
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    xc = x.contiguous(memory_format=CL)
    for _ in range(3):
        opt_cpu.zero_grad()
        loss_cpu = F.cross_entropy(cpu(xc), target)
        loss_cpu.backward()
        opt_cpu.step()
    torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p.cpu(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)
    assert {"aten::_to_copy", "aten::contiguous"} <= set(r.fallback_ops)


def test_opinfo_cells_with_channels_last_samples_match_the_cpu():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "testing" / "opinfo"))
    import opinfo_suite as suite
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {suite.op_key(op): op for op in op_db}
    for key in ("cat", "nn.functional.interpolate.nearest", "nn.functional.interpolate.nearest-exact"):
        for direction in ("fwd", "bwd"):  # every sample, the channels-last ones included
            result = suite.check_op(ops[key], "float32", direction, max_samples=100)
            assert result.status == suite.PASS, (key, direction, result.detail)
