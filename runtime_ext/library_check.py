"""Checks on an exported library before and right after it is loaded: damage, foreign files, another TVM.

Loading a shared library runs its code (its constructors, then whatever TVM calls), as loading any shared
library does: only load libraries you trust. These checks are against accidents, not attacks:

- before dlopen: the ELF headers must describe a file no longer than it is (a truncated copy is mapped past
  its end and dies of SIGBUS on first touch, with no message); and if the export's sidecar
  `MODEL.so.check.json` is there, the file must have its recorded size and SHA-256 (so a damaged or edited
  library is named as such) and this process must run the TVM version it was built with;
- after dlopen: the library must hold a TVM Relax program (a Python extension or any other library does not).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from tvm_swap.errors import TvmSwapError

CHECK_SUFFIX = ".check.json"
CHECK_FORMAT = "tvm_swap.library_check"
_PT_LOAD = 1
_SHT_NOBITS = 8


class LibraryError(TvmSwapError):
    """The file is not a loadable tvm_swap library: damaged, truncated, foreign or built for another TVM."""


def _tvm_version() -> str:
    import tvm

    return str(tvm.__version__)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_check(path: str) -> str:
    """Record the exported library's size, SHA-256 and TVM version beside it; returns the sidecar's path."""
    from importlib.metadata import PackageNotFoundError, version

    try:            # the installed distribution's version: importing the tvm_swap package here would be a cycle
        ours = version("tvm_swap")
    except PackageNotFoundError:
        ours = "unknown"
    side = str(path) + CHECK_SUFFIX
    Path(side).write_text(json.dumps({
        "format": CHECK_FORMAT, "bytes": os.path.getsize(path), "sha256": _sha256(path),
        "tvm_version": _tvm_version(), "tvm_swap_version": ours}))
    return side


def check_before_load(path: str) -> None:
    """Raise LibraryError if `path` cannot be loaded safely (see the module docstring)."""
    size = os.path.getsize(path)
    side = Path(str(path) + CHECK_SUFFIX)
    if side.exists():
        try:
            rec = json.loads(side.read_text())
            if rec.get("format") != CHECK_FORMAT:
                raise ValueError("wrong format")
            want_bytes, want_sha, built_tvm = int(rec["bytes"]), str(rec["sha256"]), str(rec["tvm_version"])
        except (OSError, ValueError, KeyError, TypeError):
            raise LibraryError(f"{side} is not a readable tvm_swap check file; delete it or export the "
                               f"library again") from None
        if size != want_bytes:
            raise LibraryError(f"{path} is {size} bytes but was exported as {want_bytes} bytes: it is "
                               f"{'truncated' if size < want_bytes else 'changed'}; copy or export it again")
        if _sha256(path) != want_sha:
            raise LibraryError(f"{path} has changed since it was exported (its SHA-256 differs from {side}): "
                               f"it is damaged or was edited; copy or export it again")
        here = _tvm_version()
        if built_tvm != here:
            raise LibraryError(f"{path} was built with TVM {built_tvm}, but this is TVM {here}: rebuild it "
                               f"with this TVM (`tvm-swap compile` or tvm_swap.build(...).export_library)")
    end = check_elf(path, size)
    if end is not None and not holds_tvm_blob(path):
        raise not_ours(path)
    if end is not None and size > end:        # bytes after the ELF: the params trailer, which must be whole
        from .params_bundle import trailer_problem

        why = trailer_problem(path, size, end)
        if why:
            raise _damaged(path, size, why)


class _Elf:
    """The ELF file header's fields that the checks below need, and readers of its program and section
    headers (one parser for both checks; an entry shorter than its format is `struct.error`)."""

    def __init__(self, f, head: bytes):
        self.f, self.bits = f, head[4]
        self.e = e = "<" if head[5] == 1 else ">"
        if self.bits == 2:
            self.phoff, self.shoff = struct.unpack_from(e + "QQ", head, 32)
            self.phentsize, self.phnum, self.shentsize, self.shnum = struct.unpack_from(e + "HHHH", head, 54)
        else:
            self.phoff, self.shoff = struct.unpack_from(e + "II", head, 28)
            self.phentsize, self.phnum, self.shentsize, self.shnum = struct.unpack_from(e + "HHHH", head, 42)

    @staticmethod
    def open(f) -> "_Elf | None":
        """None for a file that is not ELF; `struct.error` for a header too short or naming no known class."""
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            return None
        if head[4] not in (1, 2) or head[5] not in (1, 2) or len(head) < (64 if head[4] == 2 else 52):
            raise struct.error("malformed ELF header")
        return _Elf(f, head)

    def segments(self):
        """(p_type, p_offset, p_filesz) per program header."""
        for k in range(self.phnum):
            self.f.seek(self.phoff + k * self.phentsize)
            ph = self.f.read(self.phentsize)
            if self.bits == 2:
                p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(self.e + "IIQQQQ", ph)
            else:
                p_type, p_offset, _, _, p_filesz = struct.unpack_from(self.e + "IIIII", ph)
            yield p_type, p_offset, p_filesz

    def sections(self):
        """(sh_type, sh_offset, sh_size, sh_link) per section header."""
        for k in range(self.shnum):
            self.f.seek(self.shoff + k * self.shentsize)
            sh = self.f.read(self.shentsize)
            sh_type, = struct.unpack_from(self.e + "I", sh, 4)
            fmt, at = ("QQI", 24) if self.bits == 2 else ("III", 16)
            yield (sh_type, *struct.unpack_from(self.e + fmt, sh, at))


def check_elf(path: str, size: int | None = None) -> int | None:
    """An ELF file must hold every header, segment and section its headers name (else it is truncated).
    Returns the byte where the ELF's own contents end (what follows is the params trailer:
    runtime_ext.params_bundle), or None for a file that is not ELF: those are left to the loader, which
    refuses them with its own message."""
    size = os.path.getsize(path) if size is None else size
    with open(path, "rb") as f:
        try:
            elf = _Elf.open(f)
            if elf is None:
                return None
            end = 64 if elf.bits == 2 else 52
            for what, off, n, ent in (("program headers", elf.phoff, elf.phnum, elf.phentsize),
                                      ("section headers", elf.shoff, elf.shnum, elf.shentsize)):
                if n and off + n * ent > size:
                    raise _damaged(path, size, f"its {what} end at byte {off + n * ent}")
                if n:
                    end = max(end, off + n * ent)
            for p_type, p_offset, p_filesz in elf.segments():
                if p_type == _PT_LOAD and p_offset + p_filesz > size:
                    raise _damaged(path, size, f"a loaded segment ends at byte {p_offset + p_filesz}")
                end = max(end, p_offset + p_filesz)
            for sh_type, sh_offset, sh_size, _ in elf.sections():
                if sh_type != _SHT_NOBITS and sh_offset + sh_size > size:
                    raise _damaged(path, size, f"a section ends at byte {sh_offset + sh_size}")
                if sh_type != _SHT_NOBITS:
                    end = max(end, sh_offset + sh_size)
        except struct.error:        # a header or entry shorter than its own format says
            raise _damaged(path, size, "its ELF headers are malformed") from None
    return end


def _damaged(path: str, size: int, why: str) -> LibraryError:
    return LibraryError(f"{path} is damaged: it is {size} bytes but {why} (a truncated copy?); "
                        f"copy or export it again")


def not_ours(path: str) -> LibraryError:
    return LibraryError(f"{path} is a shared library but not a tvm_swap module (it holds no TVM Relax "
                        f"program); load a library written by tvm_swap.build(...).export_library or "
                        f"`tvm-swap compile`")


def require_program(lib, path: str) -> None:
    """The loaded module must hold a TVM Relax program, as every tvm_swap library does."""
    if not lib.implements_function("vm_load_executable"):
        raise not_ours(path)


# TVM packs a library's modules (the Relax VM executable among them) into a blob the loader finds by this
# exported symbol (tvm_ffi; older TVMs named it __tvm_dev_mblob): a shared library without either holds no
# TVM program, which is known from its dynamic string table without importing TVM.
_BLOB_SYMBOLS = (b"__tvm_ffi__library_bin", b"__tvm_dev_mblob")
_SHT_DYNSYM = 11


def holds_tvm_blob(path: str) -> bool:
    """False only for an ELF file whose dynamic symbols are readable and name no TVM module blob (a Python
    extension, a system library); True otherwise (the loader then decides, as require_program does)."""
    try:
        with open(path, "rb") as f:
            elf = _Elf.open(f)
            if elf is None:
                return True
            sections = list(elf.sections())
            dynsym = [sec for sec in sections if sec[0] == _SHT_DYNSYM]
            if not dynsym or not 0 < dynsym[0][3] < len(sections):
                return True
            _, off, n, _ = sections[dynsym[0][3]]
            f.seek(off)
            names = f.read(n)
    except (OSError, struct.error):
        return True
    return any(b"\0" + sym + b"\0" in names for sym in _BLOB_SYMBOLS)


def check_embedded(plan, manifest, path: str):
    """Before the first call: the plan inside the library must pass the verifier against the graph inside
    it, and name only the tensors and objects the module has. Returns the embedded DataflowGraph.

    A library is self-describing (relay_passes.apply embeds the plan, the manifest and the graph), so an
    edited plan is caught here whatever was changed, not only its limit."""
    from tvm_swap.errors import GraphError
    from tvm_swap.graph import DataflowGraph
    from tvm_swap.verify import refuse_invalid

    meta = manifest.meta
    built_tvm, here = meta.get("tvm_version"), _tvm_version()
    if built_tvm is not None and built_tvm != here:
        raise LibraryError(f"{path} was built with TVM {built_tvm}, but this is TVM {here}: rebuild it with "
                           f"this TVM (`tvm-swap compile` or tvm_swap.build(...).export_library)")
    if "graph_json" not in meta:
        raise LibraryError(f"{path} does not carry its graph (it was built by an older tvm_swap), so its plan "
                           f"cannot be verified before it runs: rebuild it")
    try:
        graph = DataflowGraph.from_dict(meta["graph_json"])
    except GraphError as e:
        raise LibraryError(f"{path} carries a damaged graph ({e}); rebuild it") from None
    problems = []
    if meta.get("fingerprint") not in (None, graph.fingerprint()):
        problems.append(f"its graph (fingerprint {graph.fingerprint()}) is not the one its program was built "
                        f"from ({meta.get('fingerprint')})")
    if sorted(manifest.tensors) != list(range(graph.num_tensors)):
        problems.append(f"its program knows {len(manifest.tensors)} tensors, its graph {graph.num_tensors}")
    else:
        for t, spec in manifest.tensors.items():
            if spec.nbytes != graph.tensors[t].nbytes:
                problems.append(f"tensor {spec.name!r} is {spec.nbytes} bytes in its program but "
                                f"{graph.tensors[t].nbytes} in its graph")
                break
    if meta.get("op_outputs") != [list(op.outputs) for op in graph.ops]:
        problems.append("its program's ops do not write the tensors its graph says")
    if [tuple(u) for u in manifest.updates] != sorted(graph.updates.items()):
        problems.append("its program's param updates differ from its graph's")
    if problems:
        raise LibraryError(f"{path} does not hold together: {problems[0]}; it is damaged or was edited: rebuild it")
    refuse_invalid(graph, plan, "run")    # also names any tensor or object outside the module's own
    return graph
