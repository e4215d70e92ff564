"""The core every layer stands on: errors, the cube, the array backend, progress and cancelling."""
