"""The one analysis path: spectra in, a fitted clustering or classification model out."""
