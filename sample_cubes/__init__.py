"""Bundled synthetic sample scenes (installed as ``hyperapp.sample_cubes``); rebuilt by hyperapp.io.samples."""
