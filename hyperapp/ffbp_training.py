"""How the CLI gets an FFBP model: a saved one, one trained on another scene, or one trained here."""

from __future__ import annotations

from hyperapp.errors import InputError


def prepare_ffbp(args, cube, model, params: dict):
    """Return (model or None, params). None means: train on this cube from ``--targets`` (as truth)."""
    if model is not None:
        return model, {k: v for k, v in params.items() if k == "refine"}
    if args.train_from:
        from hyperapp.backend import get_backend
        from hyperapp.io import open_cube, read_labels
        from hyperapp.models.registry import get_method

        if not args.train_truth:
            raise InputError("--train-from needs --train-truth (the training scene's truth mask)")
        train = open_cube(args.train_from).run_bands(args.all_bands, getattr(args, "bands", None))
        truth = read_labels(args.train_truth, (train.rows, train.cols))
        if train.bands != cube.bands:
            raise InputError(f"the training scene has {train.bands} bands, the cube has {cube.bands}",
                             args.train_from)
        xp = get_backend(args.device).xp
        est = get_method("ffbp").build(**{k: v for k, v in params.items() if k != "refine"})
        est.fit_scenes([(xp.asarray(train.to_float32()), truth)])
        return est, {k: v for k, v in params.items() if k == "refine"}
    if not args.targets:
        raise InputError("ffbp needs a model: --model FILE, --train-from SCENE --train-truth MASK, "
                         "or --targets marking the targets of this scene")
    return None, params
