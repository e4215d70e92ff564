"""Job files run over many cubes: parsing, the overlapped read/compute/write pipeline, the runner."""
