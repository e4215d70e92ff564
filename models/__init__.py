"""Detection and analysis algorithms of hyperapp, one module each.

Every model is a scikit-learn-style estimator (hyperparameters in ``__init__``, ``fit`` returns self,
learned state in attributes ending in ``_``) written once against the array module of its input, so
the same class runs on NumPy and CuPy arrays. :mod:`hyperapp.models.registry` lists the detectors by
the names the CLI and the GUI use.
"""
