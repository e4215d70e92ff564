"""What a person does to the window, done as Qt events (for GUI tests and scripts/screenshot_products.py):
File > Open cube… with the file dialog answered, and the mouse moved over a pixel of the image."""

from __future__ import annotations

from pathlib import Path


def open_from_menu(win, path) -> None:
    """File > Open cube… triggered from the menu bar, its file dialog answering ``path`` (the menu's own
    code path, not :meth:`MainWindow.open_cube` called directly)."""
    from PySide6.QtWidgets import QFileDialog

    real = QFileDialog.getOpenFileName
    QFileDialog.getOpenFileName = staticmethod(lambda *a, **k: (str(Path(path)), ""))
    try:
        file_menu = next(a for a in win.menuBar().actions() if a.text() == "&File").menu()
        action = next(a for a in file_menu.actions() if a.text() == "&Open cube…")
        action.trigger()
    finally:
        QFileDialog.getOpenFileName = real


def move_mouse_to_pixel(view, r: int, c: int) -> None:
    """A mouse-move event on ``view``'s (an :class:`ImageView`) viewport over pixel (r, c)'s centre, as the
    pointer sends it: the scene maps it to the pixel and the window's hover readout follows."""
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    # pyqtgraph's scene drops a move sooner than its rate limit after the last (10 ms at its 100 Hz); a
    # pointer's stream of moves has later ones, this single event must not come too soon
    QTest.qWait(25)
    local = QPointF(view.mapFromScene(view.vb.mapViewToScene(QPointF(c + 0.5, r + 0.5))))
    glob = QPointF(view.viewport().mapToGlobal(local.toPoint()))
    QApplication.sendEvent(view.viewport(), QMouseEvent(QEvent.Type.MouseMove, local, glob, Qt.MouseButton.NoButton,
                                                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
