"""Tests mirror the package folders; the shared helpers (swap_models, cuda_fake, inplace_module) stay in
tests/, so put that folder on the import path for every test module."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
