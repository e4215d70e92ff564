"""The kernel loader's source expansion (CPU only): quoted includes of the package's headers are expanded
in place with ``#line`` directives naming the real files, and the prepared-kernels digest covers them."""

import importlib.resources
import shutil
from pathlib import Path

import pytest

import hyperapp.kernels
from hyperapp.batch.prepare_gpu import kernels_digest
from hyperapp.kernels import kernel_source

HEADER = "quadform_common.cuh"


def _raw(file: str) -> list[str]:
    return importlib.resources.files("hyperapp.kernels").joinpath(file).read_text(encoding="utf-8").splitlines()


@pytest.fixture
def kernel_dir(tmp_path, monkeypatch) -> Path:
    """A copy of the package's kernel files that importlib.resources serves as ``hyperapp.kernels``."""
    root = tmp_path / "kernels"
    shutil.copytree(Path(hyperapp.kernels.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    files = importlib.resources.files
    monkeypatch.setattr(importlib.resources, "files",
                        lambda pkg: root if pkg in ("hyperapp.kernels", hyperapp.kernels) else files(pkg))
    return root


@pytest.mark.parametrize("name", ["quadform", "quadform_tc"])
def test_header_expanded_with_line_directives(name):
    raw = _raw(f"{name}.cu")
    n = next(i for i, line in enumerate(raw, start=1) if line.startswith(f'#include "{HEADER}"'))
    out = kernel_source(name).splitlines()
    assert not any(line.lstrip().startswith(f'#include "{HEADER}"') for line in out)
    # the .cu's lines up to the include, then the header under its own name, then the .cu from line n + 1
    assert out[:n - 1] == raw[:n - 1]
    assert out[n - 1] == f'#line 1 "{HEADER}"'
    header = _raw(HEADER)
    assert out[n:n + len(header)] == header
    assert out[n + len(header)] == f'#line {n + 1} "{name}.cu"'
    assert out[n + len(header) + 1:] == raw[n:]
    assert "quad_score(" in "\n".join(header) and "quad_score(" in "\n".join(raw[n:])


def test_sources_without_includes_unchanged():
    assert kernel_source("kmeans").splitlines() == _raw("kmeans.cu")


def test_other_includes_left_for_nvrtc(kernel_dir):
    body = ('#include <cuda_fp16.h>\n#include "not_in_package.cuh"\n#include "../kernels/quadform_common.cuh"\n'
            'extern "C" __global__ void k() {}\n')
    (kernel_dir / "probe.cu").write_text(body, encoding="utf-8")
    assert kernel_source("probe") == body


def test_nested_include_and_trailing_comment(kernel_dir):
    (kernel_dir / "inner.cuh").write_text("#define INNER 1", encoding="utf-8")  # (no final newline)
    (kernel_dir / "outer.cuh").write_text('// outer\n  #  include "inner.cuh"  // nested\n', encoding="utf-8")
    (kernel_dir / "probe.cu").write_text('#include "outer.cuh"\nint x;\n', encoding="utf-8")
    assert kernel_source("probe").splitlines() == [
        '#line 1 "outer.cuh"', "// outer", '#line 1 "inner.cuh"', "#define INNER 1", '#line 3 "outer.cuh"',
        '#line 2 "probe.cu"', "int x;"]


def test_include_cycle_is_an_error(kernel_dir):
    (kernel_dir / "a.cuh").write_text('#include "b.cuh"\n', encoding="utf-8")
    (kernel_dir / "b.cuh").write_text('\n#include "a.cuh"\n', encoding="utf-8")
    (kernel_dir / "probe.cu").write_text('#include "a.cuh"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r'kernels/b\.cuh: line 2: #include "a\.cuh" includes itself'):
        kernel_source("probe")


def test_digest_covers_headers(kernel_dir):
    before = kernels_digest()
    assert kernels_digest() == before
    header = kernel_dir / HEADER
    header.write_text(header.read_text(encoding="utf-8") + "// changed\n", encoding="utf-8")
    changed = kernels_digest()
    assert changed != before
    (kernel_dir / "quadform.cu").write_text("// changed\n", encoding="utf-8")
    assert kernels_digest() != changed


@pytest.mark.parametrize(("major", "optin", "chunk"), [
    (9, 232448, 32),   # H100 / H200: a block may have 227 KB
    (8, 101376, 32),   # GPUs that allow a block 99 KB: the 32-band buffers (74 KB) still fit
    (8, 48 * 1024, 16),  # only the default 48 KB: 16-band chunks (40 KB)
    (8, 32 * 1024, 0),   # less: the SIMT kernel
    (7, 232448, 0),    # no TF32 tensor cores below compute capability 8.0
])
def test_tensor_quad_chunk_fits_the_blocks_shared_memory(major, optin, chunk):
    """The tensor-core quad kernel's bands per chunk follow what a block may have of shared memory (its two
    buffers and its own arrays), and the SIMT kernel takes over where neither chunk fits or there are no
    TF32 tensor cores."""
    from hyperapp.models import classic

    got = classic._tensor_chunk({"ComputeCapabilityMajor": major, "MaxSharedMemoryPerBlockOptin": optin})
    assert got == chunk
    if got:
        assert classic._tensor_smem(got, classic.TENSOR_QUAD_WARPS) + 2048 <= optin


def test_every_launch_with_dynamic_shared_memory_asks_for_its_allowance():
    """A launch's dynamic shared memory plus the kernel's static shared memory may not pass 48 KB without the
    opt-in: a test of the dynamic part alone against 48 KB failed the FFBP's training kernel at 224 bands.
    Every function that launches a kernel with ``shared_mem=`` (or takes its kernel from one that does) goes
    through :func:`hyperapp.kernels.allow_shared`, which asks for the opt-in from the kernel's own allowance."""
    import ast

    import hyperapp

    root = Path(hyperapp.__file__).parent
    missing = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        funcs = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

        def calls(node, name: str) -> bool:
            return any(isinstance(c, ast.Call) and getattr(c.func, "id", getattr(c.func, "attr", None)) == name
                       for c in ast.walk(node))

        allowing = {n for n, f in funcs.items() if calls(f, "allow_shared")}
        for name, f in funcs.items():
            launches = any(isinstance(c, ast.Call) and any(k.arg == "shared_mem" for k in c.keywords)
                           for c in ast.walk(f))
            if launches and name not in allowing and not any(calls(f, a) for a in allowing):
                missing.append(f"{path.relative_to(root)}:{name}")
    assert not missing, missing
