"""tvm_swap.frontends.onnx_import.refuse_before_import: what an ONNX file proves before TVM (and before the onnx
package's own 0.7 s import): a file that is no model, weights whose data files are missing (all named at
once), shapes for inputs the graph lacks or an open dim. Wherever it speaks, from_onnx says the same."""
import pytest

onnx = pytest.importorskip("onnx")
import tvm  # noqa: F401,E402

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvm_swap.errors import TvmSwapError  # noqa: E402
from tvm_swap.frontends.onnx_import import from_onnx, refuse_before_import  # noqa: E402
from tvm_swap.testing import write_onnx_with_unconverted_ops  # noqa: E402


def _gemm(batch=4, weights_inside=True):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch if isinstance(batch, int) else "n", 16])
    inits = [numpy_helper.from_array(np.ones((16, 8), np.float32), "w"),
             numpy_helper.from_array(np.zeros(16, np.float32), "b")]
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    g = helper.make_graph([node], "g", [x], [y], initializer=inits if weights_inside else inits[1:])
    if not weights_inside:
        g.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [16, 8]))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _cases(tmp_path):
    good = tmp_path / "good.onnx"
    onnx.save(_gemm(), str(good))
    raw = good.read_bytes()
    out = [("good", good, {}), ("good, shapes of an input it lacks", good, {"image": (4, 8)}),
           ("good, shape given", good, {"x": (2, 8)})]
    for name, data in (("garbage", b"not a protobuf"), ("cut in half", raw[: len(raw) // 2]),
                       ("empty", b""), ("trailing bytes", raw + b"\xff\xff")):
        p = tmp_path / f"{name.replace(' ', '_')}.onnx"
        p.write_bytes(data)
        out.append((name, p, {}))
    open_dim = tmp_path / "open.onnx"
    onnx.save(_gemm(batch="n"), str(open_dim))
    out += [("an open dim", open_dim, {}), ("an open dim given", open_dim, {"x": (3, 8)})]
    for how, files in (("all data missing", 1), ("one of two data files missing", 2)):
        d = tmp_path / how.replace(" ", "_")
        d.mkdir()
        m = _gemm()
        if files == 1:
            onnx.save(m, str(d / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                      location="m.data", size_threshold=0)
            (d / "m.data").unlink()
        else:
            onnx.save(m, str(d / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=False,
                      size_threshold=0)
            (d / "w").unlink()
        out.append((how, d / "m.onnx", {}))
    kept = tmp_path / "kept"
    kept.mkdir()
    onnx.save(_gemm(), str(kept / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    out.append(("external data there", kept / "m.onnx", {}))
    out.append(("weights as inputs", tmp_path / "inputs.onnx", {}))
    onnx.save(_gemm(weights_inside=False), str(tmp_path / "inputs.onnx"))
    out.append(("no such file", tmp_path / "nosuch.onnx", {}))
    out.append(("operators TVM does not convert", write_onnx_with_unconverted_ops(tmp_path / "odd.onnx"), {}))
    out.append(("operators TVM does not convert, shapes of an input it lacks", tmp_path / "odd.onnx",
                {"image": (4, 8)}))
    d = tmp_path / "odd_lost"             # its weights' file missing too: that is said first, as before
    d.mkdir()
    onnx.save(onnx.load(str(tmp_path / "odd.onnx")), str(d / "m.onnx"), save_as_external_data=True,
              location="m.data", size_threshold=0)
    (d / "m.data").unlink()
    out.append(("operators TVM does not convert, data missing", d / "m.onnx", {}))
    short = tmp_path / "odd_short"        # a data file too short (onnx refuses it when reading): ops said first
    short.mkdir()
    onnx.save(onnx.load(str(tmp_path / "odd.onnx")), str(short / "m.onnx"), save_as_external_data=True,
              location="m.data", size_threshold=0)
    (short / "m.data").write_bytes((short / "m.data").read_bytes()[:16])
    out.append(("operators TVM does not convert, data file short", short / "m.onnx", {}))
    return out


def _message(fn):
    try:
        fn()
    except TvmSwapError as e:
        return str(e)
    return None


def test_wherever_the_early_check_speaks_the_importer_says_the_same(tmp_path):
    spoke = []
    for name, path, shapes in _cases(tmp_path):
        early = _message(lambda: refuse_before_import(str(path), shapes))
        late = _message(lambda: from_onnx(str(path), shapes))
        if early is not None:
            assert early == late, name
            spoke.append(name)
        else:
            assert late is None or "frontend" in late, (name, late)    # (only TVM's own refusals remain)
    assert set(spoke) == {"good, shapes of an input it lacks", "garbage", "cut in half", "trailing bytes",
                          "an open dim", "all data missing", "one of two data files missing", "no such file",
                          "operators TVM does not convert", "operators TVM does not convert, data missing",
                          "operators TVM does not convert, shapes of an input it lacks",
                          "operators TVM does not convert, data file short"}, spoke


def test_unconverted_operators_are_named_from_the_stored_list_with_counts(tmp_path):
    msg = _message(lambda: refuse_before_import(str(write_onnx_with_unconverted_ops(tmp_path / "m.onnx"))))
    assert msg.startswith("TVM's ONNX frontend has no converter for Celu (x2), FancyOp (x1); re-export"), msg


def test_the_stored_op_list_is_the_live_importers():
    """tvm_swap/frontends/onnx_ops.json is the convert map of the TVM installed (and so in use)."""
    from tvm_swap.frontends import onnx_ops

    live = onnx_ops.live_converted_ops()
    assert live, "TVM's ONNX importer has no convert map (_get_convert_map)"
    assert onnx_ops.TABLE.read_text() == onnx_ops.table_text(onnx_ops.tvm_release(), live), (
        f"{onnx_ops.TABLE} is stale for TVM {onnx_ops.tvm_release()}: run python scripts/onnx_ops.py")
    assert onnx_ops.stored_converted_ops() == live


def test_a_list_written_for_another_tvm_is_not_used(tmp_path, monkeypatch):
    from tvm_swap.frontends import onnx_ops

    path = write_onnx_with_unconverted_ops(tmp_path / "m.onnx")
    monkeypatch.setattr(onnx_ops, "tvm_release", lambda: "0.26.0")
    onnx_ops.stored_converted_ops.cache_clear()
    try:
        assert onnx_ops.stored_converted_ops() is None
        refuse_before_import(str(path))           # nothing known: left to the importer
    finally:
        monkeypatch.undo()
        onnx_ops.stored_converted_ops.cache_clear()


def test_missing_weight_files_are_named_at_once(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    onnx.save(_gemm(), str(d / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=False,
              size_threshold=0)
    for f in ("w", "b"):
        (d / f).unlink()
    msg = _message(lambda: refuse_before_import(str(d / "m.onnx")))
    assert "2 of its 2 weights" in msg and "first: 'w', 'b'" in msg and "(b, w;" in msg
