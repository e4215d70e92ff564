"""The Qt window (PySide6 + pyqtgraph). Nothing outside this package imports Qt."""
