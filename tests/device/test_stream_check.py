"""The stream-order checker: programs that use a tensor across streams without
the wait hardware needs are reported; correctly ordered programs are not."""
import pytest
import torch

from torch_neuron_sim.devices.stream_check import StreamOrderError, check_stream_order

N = torch.neuron
# These tests exercise several streams: multi-stream mode, as torch_neuronx's
# requires_nrt_streams (the default is one stream per device).
pytestmark = pytest.mark.usefixtures("nrt_streams")


@pytest.fixture(autouse=True)
def _restore():
    yield
    N.set_stream(N.default_stream())


def _produce_on(stream):
    with N.stream(stream):
        return torch.ones(64, device="neuron") * 2


def test_read_after_write_on_another_stream_without_wait_is_reported():
    a, b = N.Stream(), N.Stream()
    with check_stream_order():
        x = _produce_on(a)
        with pytest.raises(StreamOrderError, match=r"aten::add.Tensor .* reads a tensor that aten::mul.Tensor"):
            with N.stream(b):
                x + 1


@pytest.mark.parametrize("order", ["wait_stream", "event", "synchronize", "stream_synchronize", "event_synchronize",
                                   "query"])
def test_each_ordering_primitive_orders(order):
    a, b = N.Stream(), N.Stream()
    with check_stream_order():
        x = _produce_on(a)
        if order == "wait_stream":
            b.wait_stream(a)
        elif order == "event":
            b.wait_event(a.record_event())
        elif order == "synchronize":
            N.synchronize()
        elif order == "stream_synchronize":
            a.synchronize()
        elif order == "event_synchronize":
            a.record_event().synchronize()
        elif order == "query":
            assert a.query()  # the host saw the work finish
        with N.stream(b):
            y = x + 1
        N.current_stream().wait_stream(b)
        assert torch.equal(y.cpu(), torch.full((64,), 3.0))


def test_host_copy_of_a_side_stream_result_needs_a_wait():
    a = N.Stream()
    with check_stream_order():
        x = _produce_on(a)
        with pytest.raises(StreamOrderError, match="aten::_to_copy"):
            x.cpu()
        N.current_stream().wait_stream(a)
        assert x.sum().item() == 128


def test_write_after_read_is_reported():
    a = N.Stream()
    with check_stream_order():
        x = torch.ones(16, device="neuron")
        a.wait_stream(N.current_stream())
        with N.stream(a):
            x * 2
        with pytest.raises(StreamOrderError, match="writes a tensor that aten::mul.Tensor on stream .* read"):
            x.add_(1)


def test_views_share_their_base_history():
    a = N.Stream()
    with check_stream_order():
        x = _produce_on(a).view(8, 8)
        v = x[2:].t()  # views alone touch no device memory
        with pytest.raises(StreamOrderError):
            v.sum()


def test_ordered_training_step_passes():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("neuron")
    opt = torch.optim.AdamW(model.parameters())
    side = N.Stream()
    with check_stream_order():
        for _ in range(2):
            x = torch.randn(4, 8).pin_memory().to("neuron", non_blocking=True)
            side.wait_stream(N.current_stream())
            with N.stream(side):  # forward and backward on a side stream, as overlap code does
                loss = model(x).sum()
                opt.zero_grad()
                loss.backward()
            N.current_stream().wait_stream(side)
            opt.step()
        assert torch.isfinite(loss).item()


def test_backward_result_read_without_wait_is_reported():
    lin = torch.nn.Linear(4, 4).to("neuron")
    s = N.Stream()
    with check_stream_order():
        s.wait_stream(N.current_stream())
        with N.stream(s):
            lin(torch.randn(2, 4, device="neuron")).sum().backward()
        with pytest.raises(StreamOrderError, match="aten::sum"):
            lin.weight.grad.sum()


def test_checker_is_off_outside_the_block():
    a, b = N.Stream(), N.Stream()
    x = _produce_on(a)
    with N.stream(b):
        assert torch.equal((x + 1).cpu(), torch.full((64,), 3.0))


@pytest.mark.parametrize("record", [False, True])
def test_freed_memory_reused_while_another_stream_used_it(record):
    # The caching-allocator hazard record_stream exists for: x is allocated on
    # the default stream, used on `a`, freed; the next allocation on the
    # default stream gets the same block while `a` may still read it.
    a = N.Stream()
    with check_stream_order():
        x = torch.ones(4096, device="neuron")
        a.wait_stream(N.current_stream())
        with N.stream(a):
            x * 2
        if record:
            x.record_stream(a)
        address = x.data_ptr()
        del x
        if record:
            z = torch.zeros(4096, device="neuron")
        else:
            with pytest.raises(StreamOrderError, match="reuses the memory of a freed tensor.*record_stream"):
                z = torch.zeros(4096, device="neuron")
            z = torch.zeros(4096, device="neuron")  # reported once; the block's history starts afresh
        assert z.data_ptr() == address  # the arena gave the same block back


def test_cross_device_copies_order_both_devices_current_streams():
    # As cuda's peer copies: the copy waits for, and is waited for by, the
    # current streams of both devices.
    with check_stream_order():
        x = torch.ones(8, device="neuron:0")
        y = x.to("neuron:1") + 1
        z = y.to("neuron:0") * 2
        assert z.sum().item() == 32
        side = N.Stream(device=1)
        with N.stream(side):
            w = torch.ones(8, device="neuron:1")
        with pytest.raises(StreamOrderError):
            w.to("neuron:0")  # copied on neuron:1's default stream, written on `side`
