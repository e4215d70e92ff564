"""The Qt window (PySide6 + pyqtgraph). Nothing outside this package imports Qt."""

from hyperapp.gui.plot_labels import install as _labels_inside_plots

_labels_inside_plots()  # titles wrap at their plot's width, axis labels are centred when they change
