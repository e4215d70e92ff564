"""The dialog that picks spectra out of a Spectral Python spectral database (ECOSTRESS/ASTER, USGS).

A database holds thousands of spectra, each on its own wavelengths, so the library tool asks which ones to
read. The list is :func:`hyperapp.io.speclib.database_entries` (each spectrum's name as the reader takes it
and a description); the dialog only filters and keeps the choice, and the library tool reads the chosen
names with :func:`hyperapp.io.speclib.read_library`, as the CLI's ``--spectra`` does.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

#: where an item keeps the lower-case text the filter searches (its name and description)
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 1


class DatabasePicker(QDialog):
    """A filterable multi-select list of a database's spectra; :meth:`chosen` gives the names picked.

    Parameters
    ----------
    path : path of the database (for the title and the heading)
    entries : list of (name, description)
        From :func:`hyperapp.io.speclib.database_entries`.
    parent : QWidget, optional
    """

    def __init__(self, path, entries: list[tuple[str, str]], parent: QWidget | None = None):
        super().__init__(parent)
        name = Path(path).name
        self.setWindowTitle(f"Pick spectra from {name}")
        self.setModal(True)
        lay = QVBoxLayout(self)
        head = QLabel(f"<b>{name}</b> is a spectral database of {len(entries)} spectra, each measured on its own "
                      "wavelengths. <b>Click the ones to use</b> (click again to drop one); each is resampled to "
                      "the cube's bands. A <i>#number</i> after a name tells apart spectra that share it.")
        head.setWordWrap(True)
        lay.addWidget(head)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Type to filter, e.g. quartz")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip("Shows the spectra whose name or description holds every word typed "
                               "(case ignored); what is already chosen stays chosen")
        lay.addWidget(self.filter)
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        self.list.setUniformItemSizes(True)
        for label, text in entries:
            it = QListWidgetItem(text)  # the name first, then what it is, its wavelengths and samples
            it.setToolTip(text)
            it.setData(Qt.ItemDataRole.UserRole, label)
            it.setData(SEARCH_ROLE, f"{label} {text}".lower())  # the name even where the text lacks it
            self.list.addItem(it)
        lay.addWidget(self.list, 1)
        row = QHBoxLayout()
        self.count = QLabel()
        self.clear_button = QPushButton("Clear choice")
        self.clear_button.setToolTip("Unchoose every spectrum, shown or not")
        row.addWidget(self.count, 1)
        row.addWidget(self.clear_button)
        lay.addLayout(row)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Open chosen spectra")
        self.ok_button.setToolTip("Read the chosen spectra into the library tool")
        lay.addWidget(self.buttons)
        self.filter.textChanged.connect(self.set_filter)
        self.list.itemSelectionChanged.connect(self._update)
        self.clear_button.clicked.connect(self.list.clearSelection)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.resize(620, 520)  # fits 1366 x 768 with room around it
        self._update()
        self.filter.setFocus()

    def set_filter(self, text: str) -> int:
        """Show only the spectra whose name or description holds every word of ``text`` (case ignored);
        returns how many are shown. Chosen spectra stay chosen while hidden."""
        words = text.lower().split()
        shown = 0
        for i in range(self.list.count()):
            it = self.list.item(i)
            hide = not all(w in it.data(SEARCH_ROLE) for w in words)
            it.setHidden(hide)
            shown += not hide
        self._update()
        return shown

    def select(self, names: list[str]) -> None:
        """Choose the spectra ``names`` (as listed), adding to the choice."""
        want = set(names)
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) in want:
                self.list.item(i).setSelected(True)

    def chosen(self) -> list[str]:
        """The chosen spectra's names, in the database's order: what ``read_library`` takes."""
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())
                if self.list.item(i).isSelected()]

    def _update(self) -> None:
        total = self.list.count()
        shown = sum(not self.list.item(i).isHidden() for i in range(total))
        picked = len(self.list.selectedItems())
        self.count.setText(f"{shown} of {total} spectra shown, {picked} chosen")
        self.ok_button.setEnabled(picked > 0)
        self.clear_button.setEnabled(picked > 0)
