"""The bundled reference CPU backend: ``Reference_CpuRef_backend.so``, id ``CpuRef``.

Its directory is the default search path of a fresh install.
"""
import os

BACKEND_ID = "CpuRef"
LIBRARY_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backends")
LIBRARY_PATH = os.path.join(LIBRARY_DIR, "Reference_CpuRef_backend.so")
