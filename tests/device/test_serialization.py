"""torch.save / torch.load of neuron tensors, modules and checkpoints: every
map_location form, weights_only=True, storage sharing and views, loading a
neuron:3 checkpoint where only one device exists, and a training run resumed
from a checkpoint continuing bit-identically."""
import io

import pytest
import torch

from conftest import run_python


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def _tensors_on(device):
    base = torch.arange(24.0, device=device)
    return {
        "base": base,
        "view": base.view(4, 6)[1:, ::2],  # offset and strides into the same storage
        "alias": base,                     # the same tensor twice
        "ints": torch.arange(5, device=device),
        "bf16": torch.linspace(0, 1, 7, device=device).to(torch.bfloat16),
        "flag": torch.tensor([True, False], device=device),
    }


def _check(loaded, device):
    ref = _tensors_on("cpu")
    for k, v in loaded.items():
        assert v.device == torch.device(device), k
        assert v.dtype == ref[k].dtype and torch.equal(v.cpu(), ref[k]), k
    # Shared storage and views survive: one storage, the view's geometry kept.
    assert loaded["alias"] is loaded["base"]
    assert loaded["view"].untyped_storage().data_ptr() == loaded["base"].untyped_storage().data_ptr()
    assert loaded["view"].storage_offset() == 6 and loaded["view"].stride() == (6, 2)
    loaded["base"][6] = -1.0  # writes through the view as before saving
    assert loaded["view"][0, 0].item() == -1.0


@pytest.mark.parametrize("weights_only", [True, False])
def test_tensors_come_back_on_their_device(weights_only):
    _check(_roundtrip(_tensors_on("neuron:2"), weights_only=weights_only), "neuron:2")


@pytest.mark.parametrize("map_location, device", [
    ("neuron", "neuron:0"),
    ("neuron:1", "neuron:1"),
    (torch.device("neuron:3"), "neuron:3"),
    ("cpu", "cpu"),
    ({"neuron:2": "neuron:0"}, "neuron:0"),
    ({"neuron:2": "cpu"}, "cpu"),
    (lambda storage, location: storage.neuron(1), "neuron:1"),
    (lambda storage, location: storage, "cpu"),  # the callable gets CPU storages
])
def test_map_location_forms(map_location, device):
    _check(_roundtrip(_tensors_on("neuron:2"), weights_only=True, map_location=map_location), device)


def test_cpu_checkpoint_loads_onto_neuron():
    _check(_roundtrip(_tensors_on("cpu"), weights_only=True, map_location="neuron:1"), "neuron:1")


def test_legacy_format_roundtrip():
    buf = io.BytesIO()
    torch.save(_tensors_on("neuron:1"), buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    _check(torch.load(buf, weights_only=False), "neuron:1")


def test_module_and_state_dict_roundtrip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("neuron")
    x = torch.randn(3, 4, device="neuron")
    torch.save(model, tmp_path / "model.pt")
    whole = torch.load(tmp_path / "model.pt", weights_only=False)
    assert next(whole.parameters()).device == torch.device("neuron:0")
    assert torch.equal(whole(x).cpu(), model(x).cpu())
    torch.save(model.state_dict(), tmp_path / "sd.pt")
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("neuron:1")
    fresh.load_state_dict(torch.load(tmp_path / "sd.pt", weights_only=True))
    assert next(fresh.parameters()).device == torch.device("neuron:1")  # load_state_dict copies in place
    assert torch.equal(fresh(x.to("neuron:1")).cpu(), model(x).cpu())


def test_neuron3_checkpoint_in_a_one_device_process(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = torch.nn.Linear(3, 3).to("neuron:3")
    torch.save({"model": model.state_dict(), "step": 7, "t": _tensors_on("neuron:3")}, path)
    code = f"""
        import torch, torch_neuron_sim
        assert torch.neuron.device_count() == 1
        try:
            torch.load({str(path)!r}, weights_only=True)
        except RuntimeError as e:
            print("NO_MAP:", str(e).splitlines()[0])
        for loc in ("neuron", "neuron:0", {{"neuron:3": "neuron:0"}}, lambda s, l: s.neuron(0)):
            ck = torch.load({str(path)!r}, weights_only=True, map_location=loc)
            t = ck["t"]
            assert ck["step"] == 7 and t["base"].device == torch.device("neuron:0")
            assert t["view"].untyped_storage().data_ptr() == t["base"].untyped_storage().data_ptr()
            m = torch.nn.Linear(3, 3).to("neuron")
            m.load_state_dict(ck["model"])
            print("OK", m.weight.device, m.weight.sum().item())
    """
    r = run_python(code, env={"NEURON_RT_VISIBLE_CORES": "0"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("NO_MAP:") and "device 3" in lines[0] and "map_location" in lines[0]
    expected = f"OK neuron:0 {model.weight.sum().item()}"
    assert lines[1:] == [expected] * 4


# ---- resuming training from a checkpoint ----------------------------------
TRAIN = """
import sys, torch, torch_neuron_sim

def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(32, 4)).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, opt

def step(model, opt):
    x = torch.randn(8, 16, device="neuron")     # data from the CPU generator, dropout from the device's
    y = torch.randint(0, 4, (8,), device="neuron")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()

def save(path, model, opt):
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "rng": torch.neuron.get_rng_state(), "cpu_rng": torch.get_rng_state()}, path)

def resume(path):
    model, opt = build()
    ck = torch.load(path, weights_only=True, map_location="neuron")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    torch.neuron.set_rng_state(ck["rng"])
    torch.set_rng_state(ck["cpu_rng"].cpu())  # map_location moved it to neuron too, as cuda would
    return model, opt
"""


def test_resumed_training_is_bit_identical(tmp_path):
    ckpt, out = tmp_path / "ckpt.pt", tmp_path / "resumed.pt"
    # Uninterrupted: 6 steps in one process.
    namespace = {}
    exec(TRAIN, namespace)
    model, opt = namespace["build"]()
    for _ in range(3):
        namespace["step"](model, opt)
    namespace["save"](ckpt, model, opt)
    losses = [namespace["step"](model, opt) for _ in range(3)]
    final = {k: v.cpu() for k, v in model.state_dict().items()}
    # Interrupted: a new process resumes from the step-3 checkpoint.
    code = TRAIN + f"""
model, opt = resume({str(ckpt)!r})
losses = [step(model, opt) for _ in range(3)]
torch.save({{"losses": losses, "state": {{k: v.cpu() for k, v in model.state_dict().items()}}}}, {str(out)!r})
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    resumed = torch.load(out, weights_only=True)
    assert resumed["losses"] == losses  # exact floats
    for k, v in final.items():
        assert torch.equal(resumed["state"][k], v), k


def test_generator_roundtrip_continues_its_stream(device_stream):
    # rand falls back to the CPU, whose kernel takes CPU generators (as the release's
    # fallback does); NEURON_SIM_RNG=all lets it draw from a neuron generator.
    g = torch.Generator(device="neuron:1").manual_seed(5)
    torch.rand(3, device="neuron:1", generator=g)
    g2 = _roundtrip(g, weights_only=False)
    assert g2.device == torch.device("neuron:1")
    assert torch.equal(torch.rand(8, device="neuron:1", generator=g).cpu(),
                       torch.rand(8, device="neuron:1", generator=g2).cpu())
