"""The fast tile reader and its helper processes: a cube on disk streamed to the device."""
