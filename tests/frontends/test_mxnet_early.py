"""tvm_swap.frontends.mxnet_early: missing params proven from an MXNet symbol before TVM is imported (issue 16).

Soundness: wherever the early check names missing params, the importer's function (params=None) reads exactly
those without a value, in the same order (the CLI then gives model_checks' message word for word); it says
nothing where that is not provable. Checked on every MXNet symbol the tests and fixtures have, and on variants
that make a weight unread (fix_gamma, a zeros_like consumer, an ignored loss label)."""
import copy
import json
from pathlib import Path

import pytest


import tvm

from tvm_swap.errors import TvmSwapError  # noqa: E402
from tvm_swap.frontends.mxnet_early import surely_missing_params  # noqa: E402
from tvm_swap.frontends.mxnet_graph import parse_symbol  # noqa: E402

from tests.shared_fixtures import fixture_dir  # noqa: E402

DATA = fixture_dir("mxnet")


def _symbols():
    out = []
    for sym in sorted(DATA.glob("*-symbol.json")):
        name = sym.name[: -len("-symbol.json")]
        inp = DATA / f"{name}.input.json"
        if inp.exists():
            shapes = {i["name"]: tuple(i["shape"]) for i in json.loads(inp.read_text())["inputs"]}
            out.append((name, json.loads(sym.read_text()), shapes))
    assert len(out) >= 10, f"only {len(out)} MXNet symbols with inputs found in {DATA}"
    return out


def _importer_missing(sym, shapes):
    """What model_checks.check_params finds after the importer (the check the early one stands for)."""
    from tvm_swap.frontends.mxnet import from_mxnet
    from tvm_swap.limits.model_checks import params_without_value

    try:
        mod, prm = from_mxnet(sym, params=None, shapes=shapes)
    except TvmSwapError as e:   # the importer refuses otherwise: the early check must not claim
        return type(e).__name__
    missing, total = params_without_value(mod, prm)
    return missing, total


def _variants(sym):
    """The symbol, plus: every BatchNorm with fix_gamma flipped; the first head behind a zeros_like (every
    weight then unread: the importer's function reads none)."""
    yield "as is", sym
    flipped = copy.deepcopy(sym)
    n_bn = 0
    for n in flipped["nodes"]:
        if n["op"] == "BatchNorm":
            attrs = n.setdefault("attrs", {})
            attrs["fix_gamma"] = "False" if attrs.get("fix_gamma", "True") in ("True", "true", "1") else "True"
            n_bn += 1
    if n_bn:
        yield "fix_gamma flipped", flipped
    dead = copy.deepcopy(sym)
    head = dead["heads"][0]
    dead["nodes"].append({"op": "zeros_like", "name": "z", "inputs": [head]})
    dead["heads"] = [[len(dead["nodes"]) - 1, 0, 0]]
    yield "behind zeros_like", dead


def test_the_early_check_names_exactly_what_the_importer_would_or_nothing():
    cases = _symbols()
    assert len(cases) >= 5, [c[0] for c in cases]
    proven = []
    for name, sym, shapes in cases:
        for how, variant in _variants(sym):
            early = surely_missing_params(parse_symbol(variant), shapes)
            if early is None:
                continue
            late = _importer_missing(variant, shapes)
            assert late == (early, len(early)), f"{name} ({how}): early {early[:5]}... vs importer {late}"
            proven.append(f"{name} ({how})")
    print("proven early:", proven)
    assert "resnet18_v1 (as is)" in proven
    assert any(p.startswith("small_cnn") for p in proven)


def _conv_symbol():
    conv = {"op": "Convolution", "name": "c", "attrs": {"kernel": "(3, 3)", "num_filter": "4"},
            "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]}
    return {"nodes": [{"op": "null", "name": "data", "inputs": []}, {"op": "null", "name": "c_weight", "inputs": []},
                      {"op": "null", "name": "c_bias", "inputs": []}, conv],
            "arg_nodes": [0, 1, 2], "heads": [[3, 0, 0]]}


def test_an_ignored_label_or_a_dead_weight_is_left_to_the_importer():
    base = _conv_symbol()
    shapes = {"data": (1, 3, 8, 8)}
    assert surely_missing_params(parse_symbol(base), shapes) == ["c_weight", "c_bias"]
    assert _importer_missing(base, shapes) == (["c_weight", "c_bias"], 2)
    labelled = copy.deepcopy(base)     # a loss layer's label: a variable the importer never reads (no parameter)
    labelled["nodes"] += [{"op": "null", "name": "label", "inputs": []},
                          {"op": "SoftmaxOutput", "name": "s", "inputs": [[3, 0, 0], [4, 0, 0]]}]
    labelled["heads"] = [[5, 0, 0]]
    assert surely_missing_params(parse_symbol(labelled), shapes) == ["c_weight", "c_bias"]
    assert _importer_missing(labelled, shapes) == (["c_weight", "c_bias"], 2)
    read_too = copy.deepcopy(labelled)  # the same variable read as data elsewhere: a parameter after all
    read_too["nodes"].append({"op": "elemwise_add", "name": "a", "inputs": [[5, 0, 0], [4, 0, 0]]})
    read_too["heads"] = [[6, 0, 0]]
    assert surely_missing_params(parse_symbol(read_too), shapes) is None      # (label has no shape to take)
    shape_only = copy.deepcopy(base)   # the conv's output only gives a shape: its data may never be read
    shape_only["nodes"].append({"op": "zeros_like", "name": "z", "inputs": [[3, 0, 0]]})
    shape_only["heads"] = [[4, 0, 0]]
    assert surely_missing_params(parse_symbol(shape_only), shapes) is None   # (today's importer still reads it)
    no_bias = copy.deepcopy(base)
    no_bias["nodes"][3]["attrs"]["no_bias"] = "True"   # c_bias is needed by nothing the converter reads
    assert surely_missing_params(parse_symbol(no_bias), shapes) is None


def test_the_cli_refuses_missing_params_before_importing_tvm(tmp_path):
    """The same message the importer's check gives, from a process that never imports TVM, within a second of
    the command's own CPU time (CPU, not wall: a loaded CI machine must not fail it; generous:
    benchmarks/error_messages.md has the measured seconds)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    sym = tmp_path / "conv-symbol.json"
    sym.write_text(json.dumps(_conv_symbol()))
    code = ("import sys, time\n"
            "from tvm_swap.cli import main\n"
            "t0 = time.process_time()\n"
            f"rc = main(['compile', {str(sym)!r}, '--shape', 'data=1,3,8,8', '--mem-limit', '60%', "
            f"'-o', {str(tmp_path / 'x.so')!r}, '-q'])\n"
            "print(rc, round(time.process_time() - t0, 3), 'tvm' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    rc, seconds, tvm_loaded = r.stdout.split()
    print(seconds, r.stderr.strip().splitlines()[-1])
    assert rc == "1" and tvm_loaded == "False", r.stdout + r.stderr[-2000:]
    assert "parameters without a value" in r.stderr and "--init random|zeros" in r.stderr
    assert float(seconds) < 1.0


def test_a_wrong_rank_found_early_is_the_importers_own_error():
    """Every symbol with each --shape input one dim short and one dim long: where the early check names an
    error, the importer fails with that very message (it converts in node order and stops at the first)."""
    from tvm_swap.errors import UnsupportedModelError
    from tvm_swap.frontends.mxnet import from_mxnet
    from tvm_swap.frontends.mxnet_early import input_rank_error

    found = []
    for name, sym, shapes in _symbols():
        for inp, shape in shapes.items():
            for wrong in (shape[:-1], shape + (2,)):
                if not wrong:
                    continue
                bad = {**shapes, inp: wrong}
                early = input_rank_error(parse_symbol(sym), bad)
                if early is None:
                    continue
                with pytest.raises(UnsupportedModelError) as e:
                    from_mxnet(sym, params=None, shapes=bad)
                assert str(e.value) == str(early), name
                found.append(name)
    print("found early:", found)
    assert "resnet18_v1" in found


def test_the_largest_tensor_from_the_symbol_is_the_importers():
    """Where the symbol gives the largest tensor (a byte limit below it is refused before importing), it is what
    model_checks.largest_tensor finds on the imported function, bytes and name; at two batch sizes, so that a
    data input is the largest in some case."""
    from tvm_swap.frontends.mxnet import from_mxnet
    from tvm_swap.frontends.mxnet_early import largest_tensor as early_largest
    from tvm_swap.limits.model_checks import largest_tensor

    found = []
    for name, sym, shapes in _symbols():
        for batch in (1, 64):
            scaled = {k: (batch,) + tuple(v[1:]) for k, v in shapes.items()}
            for how, variant in _variants(sym):
                early = early_largest(parse_symbol(variant), scaled)
                if early is None:
                    continue
                mod, _ = from_mxnet(variant, params=None, shapes=scaled)
                assert largest_tensor(mod) == early, (name, batch, how)
                found.append((name, batch, early[1]))
    print("found early:", found)
    assert {"resnet18_v1", "small_cnn"} <= {f[0] for f in found}
    assert any(f[2] == "parameter 'data'" for f in found) and any("weight" in f[2] for f in found)


def test_a_byte_limit_below_a_tensor_is_refused_before_importing(tmp_path):
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.frontends.model_io import refuse_before_import

    sym = tmp_path / "conv-symbol.json"
    sym.write_text(json.dumps(_conv_symbol()))
    refuse_before_import(str(sym), {"data": (1, 3, 8, 8)}, init="random", mem_limit="1KB")   # 768 B at most
    with pytest.raises(InfeasibleLimitError, match="the model's parameter 'data' alone needs that much") as e:
        refuse_before_import(str(sym), {"data": (8, 3, 8, 8)}, init="random", mem_limit="1KB")
    assert e.value.min_feasible == 8 * 3 * 8 * 8 * 4
    refuse_before_import(str(sym), {"data": (8, 3, 8, 8)}, init="random", mem_limit="50%")  # percent: after lowering


def _perturbed(shapes):
    """The fixture's shapes, and wrong ones: one dim fewer or more, each dim doubled or halved."""
    yield "as given", shapes
    for name, shp in shapes.items():
        shp = tuple(shp)
        yield f"{name}: one dim fewer", {**shapes, name: shp[:-1] or (2,)}
        yield f"{name}: one dim more", {**shapes, name: shp + (2,)}
        for i, d in enumerate(shp):
            yield f"{name}[{i}] x2", {**shapes, name: shp[:i] + (2 * d,) + shp[i + 1:]}
            if d > 1:
                yield f"{name}[{i}] / 2", {**shapes, name: shp[:i] + (d // 2,) + shp[i + 1:]}


def test_every_early_claim_is_the_importers_for_wrong_shapes_too():
    """Transformer and RNN symbols too (fixtures and tests/data): wherever the symbol proves the import's first
    error, missing params or the largest tensor, under the fixture's shapes or wrong ones, the importer (params
    None) says exactly that: the same error, the same missing params, the same largest tensor."""
    from tvm_swap.errors import TvmSwapError
    from tvm_swap.frontends.mxnet import _check_shapes, from_mxnet
    from tvm_swap.frontends.mxnet_early import first_import_error, largest_tensor
    from tvm_swap.limits.model_checks import largest_tensor as importer_largest, params_without_value

    claims = []
    for name, sym, shapes in _symbols():
        for how, shp in _perturbed(shapes):
            graph = parse_symbol(sym)
            sh = _check_shapes(shp, graph)
            err, missing, largest = (first_import_error(graph, sh), surely_missing_params(graph, sh),
                                     largest_tensor(graph, sh))
            if err is None and missing is None and largest is None:
                continue
            try:
                mod, prm = from_mxnet(sym, params=None, shapes=sh)
                late = None
            except TvmSwapError as e:
                late = str(e)
            case = (name, how)
            if err is not None:
                assert late == str(err), case
                claims.append((name, how, "error"))
                continue
            assert late is None, (case, late)
            if missing is not None:
                assert params_without_value(mod, prm) == (missing, len(missing)), case
                claims.append((name, how, "missing"))
            if largest is not None:
                assert importer_largest(mod) == largest, case
                claims.append((name, how, "largest"))
    print(len(claims), "claims:", claims)
    kinds = {(n, k) for n, _, k in claims}
    for n in ("transformer_encoder", "lstm_lm_small"):
        assert {(n, "missing"), (n, "largest")} <= kinds, n
    assert ("lstm_lm_small", "error") in kinds          # token ids of one dim more: 4-d data into the RNN
    assert {("gru_lm", "missing"), ("bilstm", "largest"), ("bilstm", "error"), ("mobilenet_block", "missing"),
            ("inception_block", "missing"), ("inception_block", "largest")} <= kinds   # (ceil pooling, fix_gamma)


def test_full_convention_pooling_sizes_are_relaxs():
    """pooling_convention="full" (the importer's ceil_mode=True): the shape rule gives the output size Relax
    infers, for 1-, 2- and 3-d max and average pooling over sizes, kernels, strides and pads."""
    import itertools

    from tvm import relax

    from tvm_swap.frontends.mxnet_early import _pool_out

    bb = relax.BlockBuilder()
    checked = 0
    for nd, size, k, s, p in itertools.product((1, 2, 3), (1, 2, 3, 5, 7, 8, 9), (1, 2, 3), (1, 2, 3), (0, 1)):
        if size + 2 * p < k:
            continue
        x = relax.Var("x", relax.TensorType([1, 2] + [size] * nd, "float32"))
        for kind in ("max", "avg"):
            fn = getattr(relax.op.nn, f"{kind}_pool{nd}d")
            got = bb.normalize(fn(x, (k,) * nd, (s,) * nd, (p,) * nd, ceil_mode=True)).ty.shape.values
            assert [int(d) for d in got[2:]] == [_pool_out(size, k, s, p, 1)] * nd, (nd, size, k, s, p, kind)
            checked += 1
    assert checked > 500
