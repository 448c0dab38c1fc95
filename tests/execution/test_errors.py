"""Bad input gets a clear error and leaves the process usable."""
import pytest
import torch

import torch_neuron_sim
from conftest import run_python


def test_device_index_out_of_range():
    # The device's message and type (a RuntimeError from its C++ set_device), complete.
    with pytest.raises(RuntimeError, match=r"^Device index 7 is out of range. Valid range is 0 to 3 for this process$"):
        torch.ones(2).to("neuron:7")
    with pytest.raises(ValueError, match=r"Invalid device id: 9. Valid range is 0 to 3"):
        torch.neuron.set_device(9)
    assert torch.ones(2).to("neuron:3").device.index == 3  # still usable


def test_sparse_tensor_to_neuron_is_not_implemented():
    s = torch.eye(3).to_sparse()
    with pytest.raises(NotImplementedError, match=r"sparse tensors are not supported.*to_dense\(\)"):
        s.to("neuron")
    with pytest.raises(NotImplementedError, match="sparse"):
        torch.empty(3, layout=torch.sparse_coo, device="neuron")
    assert torch.ones(2, device="neuron").sum().item() == 2


def test_device_after_fork_tells_user_to_use_spawn():
    r = run_python("""
        import os, torch, torch_neuron_sim
        x = torch.ones(4, device="neuron")
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(4, device="neuron")
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "spawn" in str(e) and "forked" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print(os.WEXITSTATUS(status), (x + 1).sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "8.0"]


def test_fork_before_use_is_fine():
    r = run_python("""
        import os, torch, torch_neuron_sim
        pid = os.fork()
        if pid == 0:
            os._exit(0 if torch.ones(2, device="neuron").sum().item() == 2 else 5)
        _, status = os.waitpid(pid, 0)
        print(os.WEXITSTATUS(status))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"]


def test_out_of_memory_names_device_request_capacity_and_use():
    cap = torch.neuron.get_device_properties(1).total_memory
    keep = torch.empty(1024, dtype=torch.uint8, device="neuron:1")
    ooms = torch.neuron.memory_stats(1)["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(cap, dtype=torch.uint8, device="neuron:1")
    msg = str(info.value)
    assert "neuron:1" in msg and f"({cap} bytes)" in msg
    assert "is allocated by tensors" in msg and "is reserved by the caching allocator but unallocated" in msg
    assert "the largest free block is" in msg
    assert "NRT allocation failed" in msg
    assert torch.neuron.memory_stats(1)["num_ooms"] == ooms + 1
    big = torch.empty(cap // 2, dtype=torch.uint8, device="neuron:1")  # the next one that fits succeeds
    assert big.device.index == 1
    del big, keep

