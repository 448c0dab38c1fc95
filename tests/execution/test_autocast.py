"""Mixed precision on neuron: torch.autocast("neuron") with PyTorch's standard
op lists on AutocastPrivateUse1 (binary_cross_entropy banned, as on the real
backend), and torch.amp.GradScaler("neuron") unscaling, detecting inf/NaN,
skipping steps and updating its scale."""
import pytest
import torch
import torch.nn.functional as F

N = torch.neuron
D = "neuron"
LOW = [torch.bfloat16, torch.float16]


def test_supported_dtypes_and_availability():
    assert N.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]
    assert torch.amp.is_autocast_available("neuron")
    with torch.autocast(D, dtype=torch.bfloat16):
        assert torch.is_autocast_enabled(D) and torch.get_autocast_dtype(D) == torch.bfloat16
    assert not torch.is_autocast_enabled(D)


def test_unsupported_dtype_disables_autocast_with_a_warning():
    with pytest.warns(UserWarning, match="not supported"):
        with torch.autocast(D, dtype=torch.float64):
            assert torch.mm(torch.ones(2, 2, device=D), torch.ones(2, 2, device=D)).dtype == torch.float32


def _lower_precision_results(device, dtype, a, b, w, bias, img, kernel):
    a, b, w, bias, img, kernel = (t.to(device) for t in (a, b, w, bias, img, kernel))
    with torch.autocast(device, dtype=dtype):
        return {
            "mm": a @ b, "matmul": torch.matmul(a, b), "linear": F.linear(a, w, bias),
            "addmm": torch.addmm(a, a, b), "bmm": torch.bmm(a[None], b[None]),
            "conv2d": F.conv2d(img, kernel), "baddbmm": torch.baddbmm(a[None], a[None], b[None]),
            "sdpa": F.scaled_dot_product_attention(a[None, None], a[None, None], a[None, None]),
        }


@pytest.mark.parametrize("dtype", LOW)
def test_lower_precision_ops_match_cpu_autocast(dtype):
    inputs = (torch.randn(8, 8), torch.randn(8, 8), torch.randn(4, 8), torch.randn(4),
              torch.randn(1, 3, 8, 8), torch.randn(2, 3, 3, 3))
    results = _lower_precision_results(D, dtype, *inputs)
    expected = _lower_precision_results("cpu", dtype, *inputs)
    for name, r in results.items():
        assert r.dtype == dtype and r.device.type == "neuron", name
        # The same op lists and the same low-precision inputs: the CPU's result,
        # to the rounding of the autocast dtype (assert_close's default for it).
        # sdpa: neuron runs the fused "overrideable" kernel, CPU its flash kernel; both
        # accumulate in fp32 but round at different points: up to 8 ulps apart at 1.0.
        tol = {"rtol": 8 * torch.finfo(dtype).eps, "atol": 8 * torch.finfo(dtype).eps} if name == "sdpa" else {}
        torch.testing.assert_close(r.cpu(), expected[name], msg=name, **tol)


@pytest.mark.parametrize("dtype", LOW)
def test_fp32_and_fp32_set_opt_dtype_ops(dtype):
    x = torch.randn(4, 8, device=D).to(dtype)
    target = torch.randn(4, 8, device=D).to(dtype)
    with torch.autocast(D, dtype=dtype):
        results = {
            "exp": torch.exp(x), "log_softmax": torch.log_softmax(x, dim=1), "softmax": torch.softmax(x, 1),
            "layer_norm": F.layer_norm(x, (8,)), "mse_loss": F.mse_loss(x, target), "sum": x.sum(),
            "cumsum": x.cumsum(0), "pow": x.pow(2), "bce_with_logits": F.binary_cross_entropy_with_logits(x, target.sigmoid()),
            "norm": x.norm(), "rsqrt": x.abs().rsqrt(),
        }
    for name, r in results.items():
        assert r.dtype == torch.float32, name


def test_promote_ops_and_unlisted_ops():
    lo = torch.randn(4, device=D).to(torch.bfloat16)
    hi = torch.randn(4, device=D)
    with torch.autocast(D, dtype=torch.bfloat16):
        assert torch.addcmul(hi, lo, lo).dtype == torch.float32  # promote: widest input
        assert torch.stack([lo, lo]).dtype == torch.bfloat16
        assert torch.relu(hi).dtype == torch.float32  # not in any list: unchanged
        assert (lo + lo).dtype == torch.bfloat16


def test_autocast_does_not_touch_other_devices():
    a = torch.randn(4, 4)
    with torch.autocast(D, dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.float32


def test_disabled_region_and_weight_cast_cache():
    lin = torch.nn.Linear(8, 8).to(D)
    x = torch.randn(2, 8, device=D)
    with torch.autocast(D, dtype=torch.bfloat16):
        assert lin(x).dtype == torch.bfloat16
        with torch.autocast(D, enabled=False):
            assert lin(x).dtype == torch.float32
        # The bf16 copy of a leaf weight is made once per region and reused.
        y1, y2 = lin(x), lin(x)
        assert torch.equal(y1.cpu(), y2.cpu())


def test_binary_cross_entropy_is_banned():
    p = torch.rand(4, device=D)
    t = torch.rand(4, device=D)
    with torch.autocast(D, dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, t)
        with pytest.raises(RuntimeError, match="BCEWithLogitsLoss"):
            torch.nn.BCELoss()(p, t)
        assert F.binary_cross_entropy_with_logits(p, t).dtype == torch.float32
    assert F.binary_cross_entropy(p, t).dtype == torch.float32  # fine outside autocast


def test_backward_gives_fp32_grads_for_fp32_params():
    lin = torch.nn.Linear(8, 4).to(D)
    x = torch.randn(3, 8, device=D)
    with torch.autocast(D, dtype=torch.bfloat16):
        loss = lin(x).float().pow(2).mean()
    loss.backward()
    assert lin.weight.grad.dtype == torch.float32 and lin.weight.grad.device.type == "neuron"
    assert torch.isfinite(lin.weight.grad).all()


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _train_bf16(device, data):
    model = _mlp().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for x, y in data:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device, dtype=torch.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y)
        assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def test_bf16_training_matches_cpu_autocast():
    g = torch.Generator().manual_seed(1)
    w_true = torch.randn(16, 4, generator=g)
    data = []
    for _ in range(30):
        x = torch.randn(32, 16, generator=g)
        data.append((x, (x @ w_true).argmax(1)))
    neuron_losses, neuron_state = _train_bf16(D, data)
    cpu_losses, cpu_state = _train_bf16("cpu", data)
    assert neuron_losses[-1] < 0.6 * neuron_losses[0]  # it learns
    # Same model, data and dtype; op lists differ only where CPU autocast keeps
    # bf16 (e.g. layer_norm), so the runs agree to bf16 precision.
    for a, b in zip(neuron_losses, cpu_losses):
        assert a == pytest.approx(b, rel=3e-2, abs=1e-2)
    for k in cpu_state:
        torch.testing.assert_close(neuron_state[k], cpu_state[k], atol=2e-2, rtol=2e-2)


# ---- GradScaler --------------------------------------------------------------
def _scaler_setup(**kw):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(D)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(D, init_scale=2.0 ** 10, growth_interval=2, **kw)
    x = torch.randn(8, 4, device=D)
    return model, opt, scaler, x


def _backward(model, scaler, x):
    with torch.autocast(D, dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    return loss


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_grad_scaler_skips_the_step_on_non_finite_grads(bad):
    model, opt, scaler, x = _scaler_setup()
    _backward(model, scaler, x)
    model.weight.grad[0, 0] = bad  # an overflow in one gradient element
    before = [p.detach().cpu().clone() for p in model.parameters()]
    assert scaler.step(opt) is None  # skipped
    scaler.update()
    assert all(torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))
    assert scaler.get_scale() == 2.0 ** 9  # backoff_factor 0.5


def test_grad_scaler_unscales_steps_and_grows():
    model, opt, scaler, x = _scaler_setup()
    loss = _backward(model, scaler, x)
    ref = torch.nn.Linear(4, 2)
    ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ref(x.cpu()).pow(2).mean().backward()
    scaler.unscale_(opt)  # grads are back in true units, e.g. for clipping
    torch.testing.assert_close(model.weight.grad.cpu(), ref.weight.grad, rtol=1e-2, atol=1e-3)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    before = model.weight.detach().cpu().clone()
    scaler.step(opt)
    scaler.update()
    assert not torch.equal(before, model.weight.detach().cpu())
    assert scaler.get_scale() == 2.0 ** 10 and loss.isfinite()
    opt.zero_grad()
    _backward(model, scaler, x)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 11  # growth_interval (2) clean steps in a row: x2
    opt.zero_grad()
    # The scale lives on neuron; its state round-trips.
    assert scaler._scale.device.type == "neuron"
    other = torch.amp.GradScaler(D)
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == scaler.get_scale()


def test_grad_scaler_recovers_after_an_overflow():
    model, opt, scaler, x = _scaler_setup()
    scales = []
    for i in range(5):
        _backward(model, scaler, x)
        if i == 1:
            model.bias.grad.fill_(float("inf"))
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        scales.append(scaler.get_scale())
    assert scales == [2.0 ** 10, 2.0 ** 9, 2.0 ** 9, 2.0 ** 10, 2.0 ** 10]
