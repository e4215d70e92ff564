"""The marking controls on the Detect page: what a click on the image does.

A first-time user looked for how to mark target pixels and found nothing on screen: the tools lived only in
the menu bar's Tools menu, and that menu's "Mark target" was ticked while clicks marked nothing (the
inspect tool). This row puts the choice where the detector is set up, in words: inspect, mark targets,
mark background, and the shape a click marks. It only says what the window's state is and asks the window
to change it (:meth:`hyperapp.gui.main_window.MainWindow.set_tool` and ``set_roi_class``); the Tools menu
and the keys (0-4, T, B) change the same state, and the row follows them.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QButtonGroup, QComboBox, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

#: the shapes a marking click draws: (tool name, label, what it does)
SHAPES = (("pixel", "Pixel", "Each click marks one pixel (key 1)"),
          ("brush", "Brush", "Each click marks a small disc of pixels (key 2)"),
          ("rectangle", "Rectangle", "Two clicks mark the rectangle between them (key 3)"),
          ("polygon", "Polygon", "Clicks add corners; a double-click closes and marks the polygon (key 4)"))


class MarkingBar(QWidget):
    """Inspect / Mark targets / Mark background, and the shape a marking click draws."""

    #: a tool asked for: ``inspect`` or one of :data:`SHAPES`' names
    tool_chosen = Signal(str)
    #: a class asked for: ``target`` or ``background``
    class_chosen = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(4)
        self.buttons: dict[str, QToolButton] = {}
        self.group = QButtonGroup(self)
        for key, text, tip in (("inspect", "Inspect", "Clicks on the image mark nothing; the spectrum under the "
                                "cursor is shown (key 0)"),
                               ("target", "Mark targets", "Clicks on the image mark target pixels (key T)"),
                               ("background", "Mark background", "Clicks on the image mark background pixels, "
                                "which detectors that use them keep out of the target class (key B)")):
            b = QToolButton()
            b.setText(text)
            b.setToolTip(tip)
            b.setCheckable(True)
            self.group.addButton(b)
            self.buttons[key] = b
            row.addWidget(b)
        self.shape = QComboBox()
        for name, label, tip in SHAPES:
            self.shape.addItem(label, name)
            self.shape.setItemData(self.shape.count() - 1, tip, 3)  # Qt.ToolTipRole
        self.shape.setToolTip("The shape a marking click draws")
        row.addStretch(1)
        lay.addLayout(row)
        # the shape, and what a click does now, on lines of their own: the dock is a third of a
        # 1366-pixel screen, and one line of all of it would not fit there
        second = QHBoxLayout()
        lay.addLayout(second)
        second.setSpacing(4)
        self.shape_label = QLabel("Shape")
        second.addWidget(self.shape_label)
        second.addWidget(self.shape)
        second.addStretch(1)
        self.hint = QLabel("")
        self.hint.setWordWrap(True)
        lay.addWidget(self.hint)
        self.buttons["inspect"].clicked.connect(lambda: self.tool_chosen.emit("inspect"))
        for cls in ("target", "background"):
            self.buttons[cls].clicked.connect(lambda _=False, c=cls: self._mark(c))
        self.shape.activated.connect(lambda _: self._shape_chosen())
        self.show_state("inspect", "target")

    def _mark(self, cls: str) -> None:
        self.tool_chosen.emit(self.shape.currentData())  # the shape shown, not the inspect tool
        self.class_chosen.emit(cls)

    def _shape_chosen(self) -> None:
        if not self.buttons["inspect"].isChecked():  # already marking: go on with the new shape
            self.tool_chosen.emit(self.shape.currentData())

    def show_state(self, tool: str, roi_class) -> None:
        """Show the window's tool and class (``roi_class``: a name, or a user class's value)."""
        marking = tool != "inspect"
        key = "inspect" if not marking else roi_class if roi_class in ("target", "background") else None
        self.group.setExclusive(key is not None)  # a user class of the forest: neither button
        for k, b in self.buttons.items():
            b.setChecked(k == key)
        self.group.setExclusive(True)
        if marking:
            self.shape.setCurrentIndex(max(0, self.shape.findData(tool)))
        what = roi_class if isinstance(roi_class, str) else f"class {roi_class}"
        self.hint.setText(f"Clicks mark {what} pixels." if marking else "Clicks mark nothing: choose Mark targets.")
