"""Package discovery for hyperapp's layout.

``hyperapp/`` is the application; ``models/``, ``kernels/`` and ``sample_cubes/`` sit at the top of the
repository but install as ``hyperapp.models``, ``hyperapp.kernels`` and ``hyperapp.sample_cubes``.
Every package under each of these roots is found with :func:`setuptools.find_packages`, so a new
subpackage can never be left out of the wheel (a hand-written list once dropped ``hyperapp.gui.panels``).
Everything else about the project is declared in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

#: import name -> folder in the repository
ROOTS = {
    "hyperapp": "hyperapp",
    "hyperapp.models": "models",
    "hyperapp.kernels": "kernels",
    "hyperapp.sample_cubes": "sample_cubes",
}


def _packages() -> list[str]:
    names = []
    for name, folder in ROOTS.items():
        names.append(name)
        names += [f"{name}.{sub}" for sub in find_packages(folder)]
    return names


setup(packages=_packages(), package_dir=ROOTS)
