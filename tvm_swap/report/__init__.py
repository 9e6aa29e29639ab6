"""Pictures of a plan (see write.py): data.py gathers what is drawn, figure.py draws it with matplotlib,
html.py writes the page; for other viewers, trace.py (Chrome trace events) and snapshot.py (PyTorch's memory
snapshot) export a timeline from timed.py (predicted or measured). Never imports TVM."""
from .write import EXTENSIONS, write_report, write_report_file

__all__ = ["write_report_file", "write_report", "EXTENSIONS"]
