"""Errors a user can act on. Every message says what went wrong and what to do."""


class TvmSwapError(Exception):
    """Base class: any error tvm_swap raises on purpose."""


class InfeasibleLimitError(TvmSwapError):
    """No plan can meet the memory limit; carries the smallest limit that would work."""

    def __init__(self, mem_limit: int, min_feasible: int, reason: str = "", exact: bool = True,
                 reference_bytes: int | None = None):
        from .units import format_bytes

        self.mem_limit = int(mem_limit)
        self.min_feasible = int(min_feasible)
        self.reason = reason
        self.exact = exact     # False: min_feasible is a lower bound found early, the real floor may be higher
        self.reference_bytes = reference_bytes     # the no-swap need percentages are of (tvm_swap.limits.mem_limit), if known
        why = f" ({reason})" if reason else ""
        floor = "the smallest feasible limit is" if exact else "it needs at least"
        if reference_bytes:
            from .units import percent_at_least

            pct = (f", {percent_at_least(self.min_feasible, reference_bytes)}% of the {format_bytes(reference_bytes)} "
                   f"the model needs without swapping")
        else:
            pct = ""
        super().__init__(
            f"memory limit {format_bytes(mem_limit)} ({mem_limit} bytes) cannot be met{why}; "
            f"{floor} {format_bytes(min_feasible)} ({min_feasible} bytes{pct}): "
            f"raise mem_limit to at least that"
        )


class GraphError(TvmSwapError):
    """A graph file or graph structure is malformed."""


class PlanError(TvmSwapError):
    """A plan file is malformed or does not match its graph."""


class VerificationError(PlanError):
    """A plan broke an invariant; `violations` lists each one."""

    def __init__(self, violations: list[str], message: str | None = None):
        self.violations = list(violations)
        head = "; ".join(self.violations[:5])
        more = f" (+{len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        super().__init__(message or f"plan failed verification: {head}{more}")


class UnsupportedModelError(TvmSwapError):
    """The model uses something tvm_swap cannot handle (operator, dynamic shape, ...)."""


class KernelCodegenError(UnsupportedModelError):
    """TVM's code generator failed on a kernel of the lowered model (a TVM bug, e.g. TVM 0.27's LLVM codegen
    emitting "Instruction does not dominate all uses!" for some fused matmul shapes): `kernels` names the
    kernels that fail when built alone, `tvm_error` keeps TVM's own exception."""

    def __init__(self, message: str, kernels=(), tvm_error=None):
        super().__init__(message)
        self.kernels = list(kernels)
        self.tvm_error = tvm_error
