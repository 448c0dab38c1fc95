"""The foreach and fused optimizer kernels, directly and through
torch.optim: several steps of SGD, Adam, AdamW, RMSprop, Adagrad with
foreach=True and fused=True give the same parameters and states."""
import pytest
import torch
from hypothesis import given, strategies as st

from _cases import BF16, F32, F32_BF16, Case, cases, parity, parity_settings
from torch_neuron_sim.testing import strategies as nst

WRITABLE = tuple(layout for layout in nst.LAYOUTS if layout != "expanded")  # in-place targets


# The fused optimizer kernels get contiguous tensors, as torch.optim always
# gives them: PyTorch's CPU _fused_adam(w)_ mis-handles strided ones (torch
# 2.13: a sliced max_exp_avg_sq is not updated), so CPU is no reference there.
CONTIGUOUS = ("contiguous",)


def _lists(data, dtype, n=None, low=None, high=None, layouts=WRITABLE):
    n = n if n is not None else data.draw(st.integers(1, 3), label="list length")
    shapes = [data.draw(nst.shapes(0, 3, 0, 4)) for _ in range(n)]
    return shapes, [data.draw(nst.tensors(dtype=dtype, shape=s, layouts=layouts, low=low, high=high)) for s in shapes]


def _like(data, dtype, shapes, low=None, high=None, layouts=WRITABLE):
    return [data.draw(nst.tensors(dtype=dtype, shape=s, layouts=layouts, low=low, high=high)) for s in shapes]


def _foreach_binary(dtype, data):
    shapes, xs = _lists(data, dtype)
    ys = _like(data, dtype, shapes, low=0.5, high=2.0)
    zs = _like(data, dtype, shapes, low=0.5, high=2.0)
    parity(lambda xs, ys: (torch._foreach_add(xs, ys, alpha=0.5), torch._foreach_sub(xs, 1.5),
                           torch._foreach_mul(xs, ys), torch._foreach_div(xs, ys), torch._foreach_maximum(xs, ys),
                           torch._foreach_minimum(xs, 0.1), torch._foreach_pow(ys, 2.0),
                           torch._foreach_mul(xs, [0.5] * len(xs)), torch._foreach_add(xs, torch.tensor(2.0))),
           xs, ys)
    parity(lambda xs, ys, zs: (torch._foreach_addcmul(xs, ys, zs, 0.3), torch._foreach_addcdiv(xs, ys, zs, 0.3),
                               torch._foreach_lerp(xs, ys, 0.25), torch._foreach_lerp(xs, ys, zs)), xs, ys, zs)


def _foreach_inplace(dtype, data):
    shapes, xs = _lists(data, dtype)
    ys = _like(data, dtype, shapes, low=0.5, high=2.0)

    def step(xs, ys):
        torch._foreach_add_(xs, ys, alpha=-0.1)
        torch._foreach_mul_(xs, 0.9)
        torch._foreach_div_(xs, ys)
        torch._foreach_sub_(xs, [0.1] * len(xs))
        torch._foreach_addcmul_(xs, ys, ys, value=0.01)
        torch._foreach_addcdiv_(xs, ys, ys, value=0.01)
        torch._foreach_lerp_(xs, ys, 0.5)
        torch._foreach_clamp_min_(xs, -1.0)
        torch._foreach_zero_(ys)
        return xs, ys
    parity(step, xs, ys)


def _foreach_unary(dtype, data):
    _, xs = _lists(data, dtype, low=0.1, high=3.0)
    parity(lambda xs: (torch._foreach_sqrt(xs), torch._foreach_exp(xs), torch._foreach_log(xs),
                       torch._foreach_abs(xs), torch._foreach_neg(xs), torch._foreach_reciprocal(xs),
                       torch._foreach_sign(xs), torch._foreach_norm(xs), torch._foreach_norm(xs, 1),
                       torch._foreach_sigmoid(xs), torch._foreach_tanh(xs)), xs)
    parity(lambda xs: (torch._foreach_sqrt_(xs), torch._foreach_exp_(xs)), xs)


def _fused(name, dtype, data):
    shapes, params = _lists(data, dtype, layouts=CONTIGUOUS)
    grads = _like(data, dtype, shapes, layouts=CONTIGUOUS)
    m1 = _like(data, dtype, shapes, layouts=CONTIGUOUS)
    m2 = _like(data, dtype, shapes, low=0.01, high=1.0, layouts=CONTIGUOUS)
    mx = _like(data, dtype, shapes, low=0.01, high=1.0, layouts=CONTIGUOUS)
    steps = [torch.tensor(float(data.draw(st.integers(1, 5)))) for _ in shapes]
    amsgrad = data.draw(st.booleans())
    kw = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=amsgrad, maximize=False)
    fused = {"adam": torch._fused_adam_, "adamw": torch._fused_adamw_}[name]
    mx = mx if amsgrad else []  # the kernel wants max_exp_avg_sqs only with amsgrad
    parity(lambda p, g, a, b, c, s: (fused(p, g, a, b, c, s, **kw), p, a, b, c), params, grads, m1, m2, mx, steps)


def _fused_sgd(dtype, data):
    shapes, params = _lists(data, dtype, layouts=CONTIGUOUS)
    grads, bufs = _like(data, dtype, shapes, layouts=CONTIGUOUS), _like(data, dtype, shapes, layouts=CONTIGUOUS)
    first = data.draw(st.booleans())
    parity(lambda p, g, b: (torch._fused_sgd_(p, g, b, weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0,
                                              nesterov=True, maximize=False, is_first_step=first), p, b),
           params, grads, bufs)


OPTIMIZERS = {
    "SGD": lambda ps, **kw: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, **kw),
    "Adam": lambda ps, **kw: torch.optim.Adam(ps, lr=0.01, amsgrad=True, **kw),
    "AdamW": lambda ps, **kw: torch.optim.AdamW(ps, lr=0.01, **kw),
    "RMSprop": lambda ps, **kw: torch.optim.RMSprop(ps, lr=0.01, momentum=0.5, **kw),
    "Adagrad": lambda ps, **kw: torch.optim.Adagrad(ps, lr=0.1, **kw),
}
FUSED = {"SGD", "Adam", "AdamW", "Adagrad"}


def _train(name, mode, dtype, data):
    shapes = [data.draw(nst.shapes(1, 2, 1, 4)) for _ in range(data.draw(st.integers(1, 3)))]
    params = [data.draw(nst.tensors(dtype=dtype, shape=s, layouts=("contiguous",))) for s in shapes]
    # PyTorch's CPU fused kernels walk param, grad and state as flat arrays: a
    # grad laid out unlike its param (transposed, strided) gives a wrong CPU
    # reference (CPU fused and foreach disagree). neuron's clone is always
    # contiguous, as the device's, so its result is the right one there.
    layouts = {"layouts": ("contiguous", "offset")} if mode == "fused" else {}
    grads = [[data.draw(nst.tensors(dtype=dtype, shape=s, **layouts)) for s in shapes] for _ in range(3)]

    def run(params, grads):
        ps = [p.clone().requires_grad_(True) for p in params]
        opt = OPTIMIZERS[name](ps, **{mode: True})
        for step_grads in grads:
            for p, g in zip(ps, step_grads):
                p.grad = g.clone()
            opt.step()
        # "step" stays a CPU scalar unless capturable/fused, as on cuda.
        state = [t for p in ps for k, t in opt.state[p].items() if isinstance(t, torch.Tensor) and k != "step"]
        return [p.detach() for p in ps], state
    parity(run, params, grads)


CASES: list[Case] = []
CASES += cases("foreach_binary", F32_BF16, _foreach_binary)
CASES += cases("foreach_inplace", F32_BF16, _foreach_inplace)
CASES += cases("foreach_unary", F32_BF16, _foreach_unary)
CASES += cases("fused_adam", (F32,), lambda dtype, data: _fused("adam", dtype, data))
CASES += cases("fused_adamw", F32_BF16, lambda dtype, data: _fused("adamw", dtype, data))
CASES += cases("fused_sgd", (F32,), _fused_sgd)
for name in OPTIMIZERS:
    for mode in ("foreach", "fused") if name in FUSED else ("foreach",):
        CASES += cases(f"{name}-{mode}", (F32,), lambda dtype, data, name=name, mode=mode: _train(name, mode, dtype, data))


@pytest.mark.parametrize("case", CASES, ids=str)
@parity_settings
@given(data=st.data())
def test_optim(case, data):
    case(data)
