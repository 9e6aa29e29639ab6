"""A Relax module with an in-place TIR kernel (int32 buffer shapes against int64 Relax shapes), shared by the
lowering test (FuseTIR's internal check fails on it) and the extraction test (unfused, it is refused)."""
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class InPlace:
    @T.prim_func(private=True)
    def add_one(a: T.Buffer((4,), "float32")):
        for i in range(4):
            a[i] = a[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = InPlace
        with R.dataflow():
            y = R.add(x, x)
            z = R.call_tir_inplace(cls.add_one, (y,), 0, out_ty=R.Tensor((4,), "float32"))
            R.output(z)
        return z
