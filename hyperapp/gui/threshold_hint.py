"""The Results dock's offer of a threshold that keeps the clicked targets, where the run's false-alarm
rate kept few of them: the words and the threshold come from the run's report
(:func:`hyperapp.detect.suggest.suggestion_words`, ``"suggested_threshold"``); one click moves the
threshold there, and one click moves it back to the rate's."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from hyperapp.core.words import counted


class ThresholdHint(QWidget):
    """A line saying what the default threshold keeps and a button taking the suggested one, shown while
    the run's threshold is its default; while the suggestion is in use, a line saying so and a button back
    to the default; hidden at any other threshold."""

    TAKE_TIP = ("Move the threshold just below the lowest clicked target's score: every pixel that scores at least "
                "like each clicked target joins the mask")

    def __init__(self, results, parent=None):
        super().__init__(parent)
        self.results = results
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 2)
        self.text = QLabel("")
        self.text.setWordWrap(True)
        self.text.setStyleSheet("color: #e0a000;")
        self.button = QPushButton("")
        self.button.setToolTip(self.TAKE_TIP)
        lay.addWidget(self.text)
        lay.addWidget(self.button)
        self.suggested: dict | None = None
        self._default: float | None = None
        self._report: dict = {}
        self.button.clicked.connect(self.take)
        results.threshold_changed.connect(self._moved)
        self.hide()

    def show_for(self, report: dict | None, threshold: float) -> None:
        """Offer the report's suggestion while ``threshold`` is the run's default (else nothing)."""
        report = report or {}
        s = report.get("suggested_threshold")
        self.suggested = s if s and float(threshold) == float(report.get("threshold", float("nan"))) else None
        self._default = float(threshold)
        if self.suggested is None:
            self.hide()
            return
        self._report = report
        self._offer()

    def _offer(self) -> None:
        from hyperapp.detect.suggest import suggestion_words

        s = self.suggested
        self.text.setText(suggestion_words(self._report))
        # short: the Results dock's column is 300 pixels wide (the words above say the rest)
        self.button.setText(f"Use threshold {s['threshold']:.4g} ({counted(s['objects'], 'object')})")
        self.button.setToolTip(self.TAKE_TIP)
        self.show()

    def _taken(self) -> None:
        s = self.suggested
        self.text.setText(f"The threshold is the suggested one, just below the lowest clicked target's score: "
                          f"{counted(s['objects'], 'object')} ({counted(s['pixels'], 'pixel')}) to review.")
        self.button.setText(f"Back to threshold {self._default:.4g} (the rate's)")
        self.button.setToolTip("Move the threshold back to the one the false-alarm rate set")
        self.show()

    def take(self) -> None:
        """Move the threshold to the suggestion (the mask, counts and table follow), or back to the run's
        default where the suggestion is in use."""
        if self.suggested is None:
            return
        taken = self.results.threshold() == float(self.suggested["threshold"])
        self.results.set_threshold(self._default if taken else self.suggested["threshold"])

    def _moved(self, t: float) -> None:
        if self.suggested is None:
            return
        if t == self._default:
            self._offer()
        elif t == float(self.suggested["threshold"]):
            self._taken()
        else:
            self.hide()
