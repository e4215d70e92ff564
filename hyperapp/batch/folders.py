"""Where a batch job writes: one folder a cube, one subfolder a step (names checked, never leading elsewhere)."""

from __future__ import annotations

from pathlib import Path

from hyperapp.core.errors import InputError


def cube_folder(out: str, path: str, name: str | None = None) -> Path:
    """The output subfolder of a cube: ``name`` (:meth:`hyperapp.batch.jobfile.Job.folder_of`, unique among the
    job's inputs), else the cube's file name without its extension."""
    return Path(out) / (name or Path(path).stem)


def step_folder(cube_out: Path, step_name: str) -> Path:
    """A step's output folder inside its cube's folder; a name that would lead elsewhere is refused (the
    job file's check refuses it first): one plain folder name (:func:`hyperapp.request.checks.folder_name`),
    and not a symbolic link already there. One ``lstat`` a step and cube (resolving both paths took a
    dozen system calls on the compute stage's thread)."""
    from hyperapp.request.checks import folder_name

    folder = cube_out / folder_name(step_name, "step name")
    if folder.is_symlink():
        raise InputError(f"step name {step_name!r} leads outside the cube's output folder: "
                         f"{folder} is a symbolic link")
    return folder
