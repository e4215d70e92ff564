"""What every refusal test checks: one line naming the file and the problem, exit 2."""

from pathlib import Path

import numpy as np

from hyperapp.cli import main


def _cube(path: Path, rows=24, cols=24, bands=8, seed=0, bbl=None, header: dict | None = None) -> Path:
    """A small float32 ENVI cube with a bright block; extra header fields as given."""
    import spectral.io.envi as envi

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.1, 0.5, (rows, cols, bands)).astype(np.float32)
    X[4:7, 4:7] += 0.4
    meta = {"wavelength": [str(400 + 10 * i) for i in range(bands)]}
    if bbl is not None:
        meta["bbl"] = [str(int(b)) for b in bbl]
    envi.save_image(str(path), X, dtype=np.float32, force=True, ext=".img", metadata=meta)
    if header:
        lines = [ln for ln in path.read_text().splitlines() if ln.split("=")[0].strip().lower() not in header]
        lines += [f"{k} = {v}" for k, v in header.items()]
        path.write_text("\n".join(lines) + "\n")
    return path


def _cli(argv, capsys):
    rc = main(["--headless", *map(str, argv)])
    err = capsys.readouterr().err
    return rc, err


def _one_clean_line(rc, err, *words):
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for w in words:
        assert w in err, (w, err)
