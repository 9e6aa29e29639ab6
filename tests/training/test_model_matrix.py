"""The model matrix (scripts/model_matrix.py): each row imports a real architecture as its users call it, runs
inference and 2 chained Adam steps at 50% of the no-swap need, bitwise equal to the unlimited build, with the
loss next to torch's. The smallest rows run here (a transformers decoder called without an attention_mask, a
CNN, an ONNX file through from_onnx and `tvm-swap compile --train`); every row runs under the slow mark."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
import tvm  # noqa: E402,F401  (a hard dependency: a broken install fails)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import model_matrix  # noqa: E402
from tvm_swap.examples.real_models import CASES  # noqa: E402

CI_ROWS = ["mistral", "resnet", "convnext-onnx"]       # no attention_mask + its own loss; a CNN; an ONNX file
ALL_ROWS = list(CASES) + list(model_matrix.ONNX_ROWS)
KNOWN = {"bert-onnx": "TVM's ONNX frontend fails on the TorchScript export of BERT (ConstantOfShape: broadcast_to "
                      "of a 1-d tensor to a 0-d shape); refused naming the operator, from_torch trains it"}


def _check(row):
    assert row["status"] == "ok", row.get("reason")
    for kind in ("infer", "train"):
        assert row[kind]["bitwise"] and row[kind]["peak"] <= row[kind]["limit"], (kind, row[kind])
    assert row["train"]["loss_rel_err"] <= 1e-4 and row["infer"]["torch_rel_err"] <= 1e-3
    assert 0 < row["train"]["floor_share"] <= 0.5
    assert set(row["compile_s"]) == {"lower_s", "cost_s", "plan_s", "codegen_s"}


@pytest.mark.parametrize("name", CI_ROWS)       # 25-45 CPU s each (roofline times, no kernel profiling)
def test_smallest_rows(name):
    _check(model_matrix.run_row(name, profile=False))


@pytest.mark.slow           # 30-90 CPU s a row
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN[n], strict=True))
                                  if n in KNOWN else n for n in ALL_ROWS if n not in CI_ROWS])
def test_row(name):
    _check(model_matrix.run_row(name))


def test_a_failing_row_has_a_one_line_reason(monkeypatch):
    def broken(*a, **k):
        raise ValueError("no converter for frobnicate\nand a second line")

    monkeypatch.setattr(model_matrix, "_inference", broken)
    row = model_matrix.run_row("lstm-lm")
    assert row["status"] == "fail" and row["reason"] == "inference: ValueError: no converter for frobnicate"
    assert "fail" in model_matrix.render([row], "abc") and "frobnicate" in model_matrix.render([row], "abc")
