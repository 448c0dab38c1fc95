"""Native-op table files (native_ops.load) with hostile contents: a table is
loaded, or refused with an error naming the file and line; the device keeps
computing correctly either way, and the table in use before comes back."""
import torch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_neuron_sim.execution import native_ops

NAMES = ["aten::relu", "aten::add.Tensor", "aten::mm", "aten::sum.dim_IntList", "aten::empty.memory_format",
         "aten::copy_", "aten::_to_copy", "aten::view", "aten::as_strided", "aten::set_", "aten::resize_",
         "aten::_local_scalar_dense", "aten::relu.nonexistent", "foo::bar", "aten::relu.", "aten::", "::",
         "aten::.out", "relu", "aten::a b", "aten::relu # comment", "# only a comment", ""]
line = st.one_of(st.sampled_from(NAMES),
                 st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
table = st.lists(line, max_size=8).map("\n".join)


def check_device():
    x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])
    d = x.to("neuron")
    assert torch.equal((d @ d).relu().sum(1).cpu(), (x @ x).relu().sum(1))
    assert torch.equal(torch.empty(3, device="neuron").fill_(2).cpu(), torch.full((3,), 2.0))
    assert torch.equal(d.t().contiguous().view(4).cpu(), x.t().contiguous().view(4))


@given(table)
def test_a_hostile_table_is_loaded_or_refused_by_line(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("table") / "release.txt"
    path.write_text(text, encoding="utf-8")
    before = native_ops.current()
    try:
        native_ops.load(path)
    except ValueError as e:
        assert str(path) in str(e) and "line" in str(e), str(e)
        assert native_ops.current() == before  # a refused table changes nothing
    else:
        check_device()
    finally:
        native_ops.load()
    assert native_ops.current() == before
    check_device()


def test_a_table_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "binary.txt"
    path.write_bytes(b"\xff\xfe\x00aten::relu")
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        native_ops.load(path)
    check_device()


def test_a_table_cannot_replace_the_devices_own_kernels(tmp_path):
    """Factories, views and copies have kernels of their own on the device: a
    table naming them lists them, but their kernels stay the device's."""
    path = tmp_path / "release.txt"
    path.write_text("aten::relu\naten::empty.memory_format\naten::as_strided\naten::copy_\n")
    try:
        native_ops.load(path)
        assert "aten::empty.memory_format" in native_ops.current()
        assert "aten::empty.memory_format" not in native_ops._state["registered"]
        check_device()
    finally:
        native_ops.load()


@pytest.mark.parametrize("name", ["aten::relu.", "aten::a b", "aten::\x00", "::"])
def test_extend_and_override_refuse_names_that_are_not_operators(name):
    with pytest.raises(ValueError, match="is not an operator name"):
        native_ops.extend([name])
    with pytest.raises(ValueError, match="is not an operator name"):
        with native_ops.override([name]):
            pass
    check_device()
